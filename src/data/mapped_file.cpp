#include "data/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace nemotron::data {

MappedFile::Map::~Map() {
  if (data) munmap(const_cast<unsigned char*>(data), size);
}

MappedFile MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw Error(fmt::format("{}: fstat failed: {}", path, std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(fmt::format("{}: cannot open: not a regular file", path));
  }
  MappedFile f;
  f.path_ = path;
  f.map_ = std::make_shared<Map>();
  f.map_->size = static_cast<size_t>(st.st_size);
  if (f.map_->size > 0) {
    void* p = mmap(nullptr, f.map_->size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw Error(fmt::format("{}: mmap of {} bytes failed: {}", path, f.map_->size, std::strerror(err)));
    }
    f.map_->data = static_cast<const unsigned char*>(p);
  }
  ::close(fd);
  return f;
}

}  // namespace nemotron::data
