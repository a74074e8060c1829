// TensorBoard event files written without TensorFlow: TFRecord framing (length, masked CRC32C of
// the length, payload, masked CRC32C of the payload) around hand-encoded `tensorflow.Event`
// protobufs (wall_time = 1, step = 2, file_version = 3, summary = 5; Summary.value = 1;
// Value.tag = 1, Value.simple_value = 2). Each writer opens a new file, as TensorBoard's own
// writers do, so a resumed run adds a file beside the earlier ones and never rewrites them;
// every record is flushed as it is written, so a crash loses nothing already logged.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nemotron::io {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), continuing from `crc` (0 to start):
// crc32c("123456789") == 0xE3069283.
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);
// TensorFlow's masked form of it: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t size);

// One TFRecord: uint64 little-endian length, masked CRC of those 8 bytes, payload, masked CRC of it.
std::string tfrecord_frame(std::string_view payload);

using Scalars = std::vector<std::pair<std::string, double>>;  // (tag, value), in order

// Serialized Event protobufs: the file's first event, and one event holding scalar summaries
// (stored as float simple_value, the form TensorBoard's scalar dashboard reads).
std::string encode_file_version_event(double wall_time, std::string_view version = "brain.Event:2");
std::string encode_scalars_event(double wall_time, int64_t step, const Scalars& scalars);

class TensorBoardWriter {
 public:
  TensorBoardWriter() = default;  // closed: writes nothing
  // Creates `dir` and a new `events.out.tfevents.<unix seconds>.<hostname>.<pid>.<n>` in it (n is
  // the first number whose file does not exist yet), and writes the file_version event. A
  // directory that cannot be created or written (permissions, read-only, a file in the way) is an
  // InputError naming it; other failures are Error.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;
  TensorBoardWriter(TensorBoardWriter&& o) noexcept : f_(o.f_), path_(std::move(o.path_)) { o.f_ = nullptr; }
  TensorBoardWriter& operator=(TensorBoardWriter&& o) noexcept;

  bool is_open() const { return f_ != nullptr; }
  const std::string& path() const { return path_; }
  // One event at `step` with every (tag, value), stamped with the current time; flushed.
  void add_scalars(int64_t step, const Scalars& scalars);
  void add_scalar(int64_t step, const std::string& tag, double value) { add_scalars(step, {{tag, value}}); }

 private:
  void write_record(std::string_view payload);
  std::FILE* f_ = nullptr;
  std::string path_;
};

}  // namespace nemotron::io
