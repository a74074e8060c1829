// A read-only memory map of a whole file, shared by copies (the map lives until the last copy
// goes). An empty file maps to no memory (data() is null, size() 0), which is legal.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

namespace nemotron::data {

class MappedFile {
 public:
  MappedFile() = default;
  // Throws InputError "<path>: cannot open: <reason>" when the file is missing or unreadable,
  // Error when mmap itself fails.
  static MappedFile open(const std::string& path);

  const unsigned char* data() const { return map_ ? map_->data : nullptr; }
  size_t size() const { return map_ ? map_->size : 0; }
  const std::string& path() const { return path_; }

 private:
  struct Map {
    const unsigned char* data = nullptr;
    size_t size = 0;
    ~Map();
  };
  std::shared_ptr<Map> map_;
  std::string path_;
};

}  // namespace nemotron::data
