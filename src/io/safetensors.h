// The safetensors format (https://huggingface.co/docs/safetensors): an 8-byte little-endian
// header length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]},
// "__metadata__": {str: str}}, then the data buffer. Reading is strict, because these files come
// from anywhere: the header length is bounded, offsets must lie inside the file, tensors must not
// overlap or leave holes, and each byte size must equal dtype size x shape. Any violation is an
// InputError naming the file and the tensor; nothing is read out of bounds.
// Sharded checkpoints pair files with `model.safetensors.index.json` ({"weight_map": ...}).
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/mapped_file.h"

namespace nemotron::io {

enum class StDtype : uint8_t { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };
const char* st_dtype_name(StDtype t);  // "F32", ...
size_t st_dtype_size(StDtype t);
StDtype st_dtype_of(DType t);          // our dtype as stored on disk
std::optional<DType> dtype_of_st(StDtype t);  // our dtype that holds it without conversion

struct StTensorInfo {
  std::string name;
  StDtype dtype;
  Shape shape;
  size_t begin = 0, end = 0;  // byte range inside the data buffer
};

class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);
  // The same checks over bytes in memory (MappedFile::hold); `label` names it in errors.
  static SafetensorsFile from_memory(std::string label, std::vector<uint8_t> bytes);
  const std::string& path() const { return file_->path(); }
  const std::vector<StTensorInfo>& tensors() const { return tensors_; }  // in data order
  const StTensorInfo* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::span<const uint8_t> bytes(const StTensorInfo& t) const;
  // The tensor on the host in `as` (default: its own dtype). Float types convert among
  // themselves (F16 is read into f32 by default) and integers among themselves; a request that
  // would mix them is an InputError.
  Tensor load(const std::string& name, std::optional<DType> as = std::nullopt) const;

 private:
  static SafetensorsFile parse(std::shared_ptr<const MappedFile> file);
  std::shared_ptr<const MappedFile> file_;
  size_t data_start_ = 0;
  std::vector<StTensorInfo> tensors_;
  std::map<std::string, size_t> by_name_;
  std::map<std::string, std::string> metadata_;
};

// A checkpoint directory or file: a single `*.safetensors`, a directory with `model.safetensors`,
// or a directory with `model.safetensors.index.json` naming its shards.
class SafetensorsSet {
 public:
  static SafetensorsSet open(const std::string& path);
  // One file's tensors (e.g. a sharded checkpoint's model assembled in memory).
  static SafetensorsSet of(SafetensorsFile file);
  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const { return where_.count(name) > 0; }
  const StTensorInfo& info(const std::string& name) const;
  Tensor load(const std::string& name, std::optional<DType> as = std::nullopt) const;
  const std::vector<SafetensorsFile>& files() const { return files_; }

 private:
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t> where_;  // tensor name -> file
  const SafetensorsFile& file_of(const std::string& name) const;
};

struct NamedTensor {
  std::string name;
  Tensor tensor;  // any device; copied to the host while writing
};

// The 8-byte length and the JSON header (padded to 8 bytes) of a file holding `tensors` (their
// name, dtype, shape, and byte range [begin, end) of the data buffer, in order).
std::string safetensors_header(const std::vector<StTensorInfo>& tensors,
                               const std::map<std::string, std::string>& metadata);

// One file, written atomically (temporary name, fsync, rename). Tensors keep their dtype.
void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// `dir/model.safetensors` when everything fits in one shard of max_shard_bytes, else
// `dir/model-0000i-of-0000n.safetensors` plus `dir/model.safetensors.index.json`, as transformers
// writes them. Returns the file names written (relative to dir).
std::vector<std::string> save_sharded_safetensors(const std::string& dir, const std::vector<NamedTensor>& tensors,
                                                  size_t max_shard_bytes,
                                                  const std::map<std::string, std::string>& metadata = {});

}  // namespace nemotron::io
