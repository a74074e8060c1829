#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_limits.h"

namespace nemotron::io {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's bound

struct DtypeRow {
  StDtype dtype;
  const char* name;
  size_t size;
};
constexpr DtypeRow kDtypes[] = {{StDtype::F64, "F64", 8}, {StDtype::F32, "F32", 4}, {StDtype::F16, "F16", 2},
                                {StDtype::BF16, "BF16", 2}, {StDtype::I64, "I64", 8}, {StDtype::I32, "I32", 4},
                                {StDtype::I16, "I16", 2},  {StDtype::I8, "I8", 1},   {StDtype::U8, "U8", 1},
                                {StDtype::BOOL, "BOOL", 1}};

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw InputError(fmt::format("{}: invalid safetensors file: {}", path, what));
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do { man <<= 1, ++e; } while (!(man & 0x400u));
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

bool is_int(StDtype t) {
  return t == StDtype::I64 || t == StDtype::I32 || t == StDtype::I16 || t == StDtype::I8 || t == StDtype::U8 ||
         t == StDtype::BOOL;
}

// Element i of a raw buffer as double (floats) or int64 (integers); unaligned-safe.
template <class T>
T read_at(const uint8_t* p, size_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}
double float_at(StDtype t, const uint8_t* p, size_t i) {
  switch (t) {
    case StDtype::F64: return read_at<double>(p, i);
    case StDtype::F32: return read_at<float>(p, i);
    case StDtype::F16: return f16_to_f32(read_at<uint16_t>(p, i));
    case StDtype::BF16: return bf16_to_f32(read_at<uint16_t>(p, i));
    default: return 0;
  }
}
int64_t int_at(StDtype t, const uint8_t* p, size_t i) {
  switch (t) {
    case StDtype::I64: return read_at<int64_t>(p, i);
    case StDtype::I32: return read_at<int32_t>(p, i);
    case StDtype::I16: return read_at<int16_t>(p, i);
    case StDtype::I8: return read_at<int8_t>(p, i);
    case StDtype::U8:
    case StDtype::BOOL: return read_at<uint8_t>(p, i);
    default: return 0;
  }
}

}  // namespace

const char* st_dtype_name(StDtype t) {
  for (const auto& r : kDtypes)
    if (r.dtype == t) return r.name;
  return "?";
}

size_t st_dtype_size(StDtype t) {
  for (const auto& r : kDtypes)
    if (r.dtype == t) return r.size;
  return 0;
}

StDtype st_dtype_of(DType t) {
  switch (t) {
    case DType::f64: return StDtype::F64;
    case DType::f32: return StDtype::F32;
    case DType::bf16: return StDtype::BF16;
    case DType::i32: return StDtype::I32;
    case DType::i64: return StDtype::I64;
  }
  return StDtype::F32;
}

std::optional<DType> dtype_of_st(StDtype t) {
  switch (t) {
    case StDtype::F64: return DType::f64;
    case StDtype::F32: return DType::f32;
    case StDtype::BF16: return DType::bf16;
    case StDtype::I32: return DType::i32;
    case StDtype::I64: return DType::i64;
    default: return std::nullopt;
  }
}

SafetensorsFile SafetensorsFile::open(const std::string& path) { return parse(MappedFile::open(path)); }

SafetensorsFile SafetensorsFile::from_memory(std::string label, std::vector<uint8_t> bytes) {
  return parse(MappedFile::hold(std::move(label), std::move(bytes)));
}

SafetensorsFile SafetensorsFile::parse(std::shared_ptr<const MappedFile> file) {
  SafetensorsFile f;
  f.file_ = std::move(file);
  const std::string& path = f.file_->path();
  const size_t size = f.file_->size();
  if (size < 8) bad(path, fmt::format("{} bytes is shorter than the 8-byte header length", size));
  uint64_t n = 0;
  std::memcpy(&n, f.file_->data(), 8);  // little-endian on every platform we build for
  if (n > kMaxHeaderBytes) bad(path, fmt::format("header length {} exceeds the {} byte limit", n, kMaxHeaderBytes));
  if (n > size - 8) bad(path, fmt::format("header length {} runs past the end of the {}-byte file", n, size));
  f.data_start_ = 8 + static_cast<size_t>(n);
  const size_t data_bytes = size - f.data_start_;
  nlohmann::json header;
  if (std::optional<JsonError> e = parse_json_bounded(
          std::string_view(reinterpret_cast<const char*>(f.file_->data()) + 8, static_cast<size_t>(n)), header))
    bad(path, fmt::format("header is not valid JSON ({}: {})", e->where(), e->reason));
  if (!header.is_object()) bad(path, "header is not a JSON object");
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) bad(path, "__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) bad(path, fmt::format("__metadata__.{} is not a string", m.key()));
        f.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    auto where = [&](const std::string& w) { return fmt::format("tensor \"{}\": {}", name, w); };
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      bad(path, where("expected an object with dtype, shape and data_offsets"));
    StTensorInfo t;
    t.name = name;
    const nlohmann::json& dt = v["dtype"];
    bool known = false;
    if (dt.is_string())
      for (const auto& r : kDtypes)
        if (dt.get<std::string>() == r.name) t.dtype = r.dtype, known = true;
    if (!known) bad(path, where(fmt::format("unsupported dtype {}", dt.dump())));
    const nlohmann::json& sh = v["shape"];
    if (!sh.is_array()) bad(path, where("shape is not a list"));
    std::vector<int64_t> dims;
    uint64_t numel = 1;
    for (const auto& d : sh) {
      if (!d.is_number_unsigned()) bad(path, where(fmt::format("shape entry {} is not a non-negative integer", d.dump())));
      uint64_t e = d.get<uint64_t>();
      if (e > (uint64_t{1} << 48) || (e != 0 && numel > (uint64_t{1} << 62) / e)) bad(path, where("shape is too large"));
      numel *= e;
      dims.push_back(static_cast<int64_t>(e));
    }
    t.shape = Shape(dims);
    const nlohmann::json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      bad(path, where("data_offsets must be [begin, end] with non-negative integers"));
    uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (b > e) bad(path, where(fmt::format("data_offsets [{}, {}] end before they begin", b, e)));
    if (e > data_bytes)
      bad(path, where(fmt::format("data_offsets [{}, {}] run past the data buffer of {} bytes", b, e, data_bytes)));
    if (e - b != numel * st_dtype_size(t.dtype))
      bad(path, where(fmt::format("{} bytes for {} {} elements of shape {} (expected {})", e - b, numel,
                                  st_dtype_name(t.dtype), t.shape.str(), numel * st_dtype_size(t.dtype))));
    t.begin = static_cast<size_t>(b);
    t.end = static_cast<size_t>(e);
    f.tensors_.push_back(std::move(t));
  }
  std::sort(f.tensors_.begin(), f.tensors_.end(), [](const StTensorInfo& a, const StTensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  size_t cursor = 0;
  for (size_t i = 0; i < f.tensors_.size(); ++i) {
    const StTensorInfo& t = f.tensors_[i];
    if (t.begin < cursor)
      bad(path, fmt::format("tensor \"{}\" (bytes {}..{}) overlaps \"{}\"", t.name, t.begin, t.end, f.tensors_[i - 1].name));
    if (t.begin > cursor) bad(path, fmt::format("bytes {}..{} before tensor \"{}\" belong to no tensor", cursor, t.begin, t.name));
    cursor = t.end;
    f.by_name_[t.name] = i;
  }
  if (cursor != data_bytes)
    bad(path, fmt::format("the last {} bytes of the data buffer belong to no tensor", data_bytes - cursor));
  return f;
}

const StTensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

std::span<const uint8_t> SafetensorsFile::bytes(const StTensorInfo& t) const {
  return {file_->data() + data_start_ + t.begin, t.end - t.begin};
}

Tensor SafetensorsFile::load(const std::string& name, std::optional<DType> as) const {
  const StTensorInfo* t = find(name);
  if (!t) throw InputError(fmt::format("{}: no tensor named \"{}\"", path(), name));
  std::optional<DType> native = dtype_of_st(t->dtype);
  DType want = as ? *as : native ? *native : (is_int(t->dtype) ? DType::i64 : DType::f32);
  if (is_int(t->dtype) == is_float(want))
    throw InputError(fmt::format("{}: tensor \"{}\" is {}, cannot be read as {}", path(), name, st_dtype_name(t->dtype),
                                 dtype_name(want)));
  std::span<const uint8_t> raw = bytes(*t);
  Tensor out = Tensor::empty(t->shape, want);
  if (native && *native == want) {
    if (!raw.empty()) std::memcpy(out.raw(), raw.data(), raw.size());
    return out;
  }
  const size_t n = static_cast<size_t>(t->shape.numel());
  Tensor wide = Tensor::empty(t->shape, is_float(want) ? DType::f64 : DType::i64);
  for (size_t i = 0; i < n; ++i) {
    if (is_float(want)) wide.data<double>()[i] = float_at(t->dtype, raw.data(), i);
    else wide.data<int64_t>()[i] = int_at(t->dtype, raw.data(), i);
  }
  return wide.to_host(want);
}

SafetensorsSet SafetensorsSet::open(const std::string& path) {
  namespace fs = std::filesystem;
  SafetensorsSet s;
  std::vector<std::string> files;
  std::string index = path + "/model.safetensors.index.json";
  if (fs::is_directory(path) && fs::exists(index)) {
    std::ifstream in(index);
    const nlohmann::json j = parse_json<nlohmann::json>(in, index);
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw InputError(fmt::format("{}: weight_map: missing or not an object", index));
    std::map<std::string, std::string> wm;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it.value().is_string()) throw InputError(fmt::format("{}: weight_map.{}: expected a file name", index, it.key()));
      std::string file = it.value().get<std::string>();
      if (file.find('/') != std::string::npos || file == "..")
        throw InputError(fmt::format("{}: weight_map.{}: \"{}\" is not a file name in this directory", index, it.key(), file));
      wm[it.key()] = file;
      if (std::find(files.begin(), files.end(), file) == files.end()) files.push_back(file);
    }
    std::sort(files.begin(), files.end());
    for (const std::string& f : files) s.files_.push_back(SafetensorsFile::open(path + "/" + f));
    for (const auto& [name, file] : wm) {
      size_t k = static_cast<size_t>(std::find(files.begin(), files.end(), file) - files.begin());
      if (!s.files_[k].find(name))
        throw InputError(fmt::format("{}: weight_map.{}: tensor is not in {}", index, name, file));
      s.where_[name] = k;
    }
    return s;
  }
  std::string single = fs::is_directory(path) ? path + "/model.safetensors" : path;
  if (!fs::exists(single))
    throw InputError(fmt::format("{}: no model.safetensors or model.safetensors.index.json", path));
  s.files_.push_back(SafetensorsFile::open(single));
  for (const StTensorInfo& t : s.files_[0].tensors()) s.where_[t.name] = 0;
  return s;
}

SafetensorsSet SafetensorsSet::of(SafetensorsFile file) {
  SafetensorsSet s;
  s.files_.push_back(std::move(file));
  for (const StTensorInfo& t : s.files_[0].tensors()) s.where_[t.name] = 0;
  return s;
}

std::vector<std::string> SafetensorsSet::names() const {
  std::vector<std::string> out;
  for (const auto& [name, k] : where_) out.push_back(name);
  return out;
}

const SafetensorsFile& SafetensorsSet::file_of(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) throw InputError(fmt::format("checkpoint has no tensor named \"{}\"", name));
  return files_[it->second];
}

const StTensorInfo& SafetensorsSet::info(const std::string& name) const { return *file_of(name).find(name); }

Tensor SafetensorsSet::load(const std::string& name, std::optional<DType> as) const { return file_of(name).load(name, as); }

std::string safetensors_header(const std::vector<StTensorInfo>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  for (const StTensorInfo& t : tensors) {
    NM_CHECK(!header.contains(t.name), "tensor {} saved twice", t.name);
    header[t.name] = {{"dtype", st_dtype_name(t.dtype)}, {"shape", t.shape.dims()}, {"data_offsets", {t.begin, t.end}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned, as the reference pads
  const uint64_t n = text.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + text;
}

void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<StTensorInfo> infos;
  size_t offset = 0;
  for (const NamedTensor& t : tensors) {
    infos.push_back({t.name, st_dtype_of(t.tensor.dtype()), t.tensor.shape(), offset, offset + t.tensor.nbytes()});
    offset += t.tensor.nbytes();
  }
  const std::string header = safetensors_header(infos, metadata);
  AtomicFileWriter out(path);
  out.write(header.data(), header.size());
  for (const NamedTensor& t : tensors) {
    Tensor host = t.tensor.device().is_cpu() ? t.tensor : t.tensor.to(host_backend());
    out.write(host.raw(), host.nbytes());
  }
  out.commit();
}

std::vector<std::string> save_sharded_safetensors(const std::string& dir, const std::vector<NamedTensor>& tensors,
                                                  size_t max_shard_bytes,
                                                  const std::map<std::string, std::string>& metadata) {
  std::vector<std::vector<NamedTensor>> shards(1);
  size_t in_shard = 0, total = 0;
  for (const NamedTensor& t : tensors) {
    if (in_shard > 0 && in_shard + t.tensor.nbytes() > max_shard_bytes) shards.emplace_back(), in_shard = 0;
    shards.back().push_back(t);
    in_shard += t.tensor.nbytes();
    total += t.tensor.nbytes();
  }
  std::vector<std::string> names;
  if (shards.size() == 1) {
    save_safetensors(dir + "/model.safetensors", tensors, metadata);
    return {"model.safetensors"};
  }
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    std::string name = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    save_safetensors(dir + "/" + name, shards[i], metadata);
    for (const NamedTensor& t : shards[i]) weight_map[t.name] = name;
    names.push_back(name);
  }
  nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  std::string text = index.dump(2) + "\n";
  write_file_atomically(dir + "/model.safetensors.index.json", text.data(), text.size());
  names.push_back("model.safetensors.index.json");
  return names;
}

}  // namespace nemotron::io
