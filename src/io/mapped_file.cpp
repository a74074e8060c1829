#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace nemotron::io {

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(fmt::format("{}: not a regular file", path));
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw InputError(fmt::format("{}: cannot map {} bytes: {}", path, f->size_, std::strerror(err)));
    }
    f->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return f;
}

std::shared_ptr<const MappedFile> MappedFile::hold(std::string label, std::vector<uint8_t> bytes) {
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = std::move(label);
  f->held_ = std::move(bytes);
  f->size_ = f->held_.size();
  return f;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  tmp_ = path_ + ".tmp." + std::to_string(::getpid());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(fmt::format("{}: cannot create: {}", tmp_, std::strerror(errno)));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void AtomicFileWriter::write(const void* bytes, size_t size) {
  NM_CHECK(fd_ >= 0, "write after commit of {}", path_);
  const char* p = static_cast<const char*>(bytes);
  size_t left = size;
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(fmt::format("{}: write failed: {} (disk full?)", tmp_, std::strerror(errno)));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  written_ += size;
}

void AtomicFileWriter::commit() {
  NM_CHECK(fd_ >= 0, "double commit of {}", path_);
  if (::fsync(fd_) != 0) throw Error(fmt::format("{}: cannot flush: {}", tmp_, std::strerror(errno)));
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) {
    ::unlink(tmp_.c_str());
    throw Error(fmt::format("{}: cannot close: {}", tmp_, std::strerror(errno)));
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp_.c_str());
    throw Error(fmt::format("cannot rename {} to {}: {}", tmp_, path_, std::strerror(err)));
  }
}

void write_file_atomically(const std::string& path, const void* bytes, size_t size) {
  AtomicFileWriter w(path);
  w.write(bytes, size);
  w.commit();
}

}  // namespace nemotron::io
