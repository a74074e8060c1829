// A read-only memory map of a whole file (POSIX mmap), shared by every tensor view into it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nemotron::io {

class MappedFile {
 public:
  // Throws InputError naming the path when it cannot be opened or mapped.
  static std::shared_ptr<const MappedFile> open(const std::string& path);
  // Bytes already in memory behind the same interface (a checkpoint assembled from its rank
  // files); `label` stands for the path in messages.
  static std::shared_ptr<const MappedFile> hold(std::string label, std::vector<uint8_t> bytes);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return held_.empty() ? data_ : held_.data(); }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::vector<uint8_t> held_;  // hold(): the bytes themselves (nothing mapped)
};

// Writes a file through a temporary name in the same directory; commit() flushes (fsync) and
// renames it into place, so readers see either the old file or the complete new one, never a
// torn write. Destroyed without commit() (an exception on the way), it removes the temporary.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  void write(const void* bytes, size_t size);
  void commit();
  size_t bytes_written() const { return written_; }

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  size_t written_ = 0;
};

void write_file_atomically(const std::string& path, const void* bytes, size_t size);

}  // namespace nemotron::io
