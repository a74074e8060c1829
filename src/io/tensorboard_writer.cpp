#include "io/tensorboard_writer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace nemotron::io {

namespace {

constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

// Protobuf wire format: key = field << 3 | wire type (0 varint, 1 fixed64, 2 bytes, 5 fixed32).
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_key(std::string& out, int field, int wire_type) { put_varint(out, static_cast<uint64_t>(field << 3 | wire_type)); }
template <class T>
void put_le(std::string& out, T v) {  // little-endian fixed width (the host is little-endian)
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}
void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}
void put_event_header(std::string& out, double wall_time, int64_t step) {
  put_key(out, 1, 1);  // Event.wall_time: double
  put_le(out, wall_time);
  if (step != 0) {  // proto3 leaves a zero scalar out
    put_key(out, 2, 0);  // Event.step: int64
    put_varint(out, static_cast<uint64_t>(step));
  }
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A directory the user named that cannot be written is bad input (exit 2); other failures are
// system errors.
[[noreturn]] void throw_open_failure(const std::string& what, int err) {
  const std::string msg = fmt::format("{}: {}", what, std::strerror(err));
  if (err == EACCES || err == EPERM || err == EROFS || err == ENOTDIR || err == ENAMETOOLONG || err == EEXIST)
    throw InputError(msg);
  throw Error(msg);
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

}  // namespace

uint32_t crc32c(const void* data, size_t size, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = kCrc32cTable[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t c = crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string tfrecord_frame(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 16);
  put_le<uint64_t>(out, payload.size());
  put_le<uint32_t>(out, masked_crc32c(out.data(), 8));
  out.append(payload);
  put_le<uint32_t>(out, masked_crc32c(payload.data(), payload.size()));
  return out;
}

std::string encode_file_version_event(double wall_time, std::string_view version) {
  std::string out;
  put_event_header(out, wall_time, 0);
  put_bytes(out, 3, version);  // Event.file_version: string
  return out;
}

std::string encode_scalars_event(double wall_time, int64_t step, const Scalars& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    put_bytes(v, 1, tag);  // Summary.Value.tag: string
    put_key(v, 2, 5);      // Summary.Value.simple_value: float
    put_le(v, static_cast<float>(value));
    put_bytes(summary, 1, v);  // Summary.value: repeated Value
  }
  std::string out;
  put_event_header(out, wall_time, step);
  put_bytes(out, 5, summary);  // Event.summary: Summary
  return out;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw_open_failure(fmt::format("{}: cannot create the TensorBoard directory", dir), ec.value());
  const double t0 = now_seconds();
  const std::string stem = fmt::format("events.out.tfevents.{:010d}.{}.{}.", static_cast<int64_t>(t0), host_name(),
                                       static_cast<int64_t>(getpid()));
  for (int n = 0; !f_; ++n) {
    path_ = (fs::path(dir) / (stem + std::to_string(n))).string();
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST && n < 1000) continue;
    if (fd < 0) throw_open_failure(fmt::format("{}: cannot create the TensorBoard event file", path_), errno);
    f_ = ::fdopen(fd, "wb");
    if (!f_) {
      const int err = errno;
      ::close(fd);
      throw Error(fmt::format("{}: cannot open the TensorBoard event file: {}", path_, std::strerror(err)));
    }
  }
  write_record(encode_file_version_event(t0));
}

TensorBoardWriter::~TensorBoardWriter() {
  if (f_) std::fclose(f_);
}

TensorBoardWriter& TensorBoardWriter::operator=(TensorBoardWriter&& o) noexcept {
  if (this != &o) {
    if (f_) std::fclose(f_);
    f_ = o.f_, path_ = std::move(o.path_);
    o.f_ = nullptr;
  }
  return *this;
}

void TensorBoardWriter::add_scalars(int64_t step, const Scalars& scalars) {
  if (!f_ || scalars.empty()) return;
  write_record(encode_scalars_event(now_seconds(), step, scalars));
}

void TensorBoardWriter::write_record(std::string_view payload) {
  const std::string rec = tfrecord_frame(payload);
  if (std::fwrite(rec.data(), 1, rec.size(), f_) != rec.size() || std::fflush(f_) != 0)
    throw Error(fmt::format("{}: cannot write: {}", path_, std::strerror(errno)));
}

}  // namespace nemotron::io
