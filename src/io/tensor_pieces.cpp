#include "io/tensor_pieces.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_limits.h"
#include "io/checkpoint_layout.h"

namespace nemotron::io {

namespace {

constexpr const char* kPiecesKey = "nemotron.pieces";

// A scalar is stored as the one-element box [1] of [1], so the row walk below has a last dim.
std::vector<int64_t> dims_of(const Shape& s) { return s.rank() ? s.dims() : std::vector<int64_t>{1}; }
int64_t numel_of(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// The piece with its defaults filled in (whole box, zero offset, whole range).
TensorPiece normalized(TensorPiece p) {
  if (p.box.rank() == 0) p.box = p.global_shape;
  if (p.offset.empty()) p.offset.assign(p.global_shape.rank(), 0);
  if (p.end < 0) p.end = p.box.numel();
  return p;
}

// What is wrong with a piece's place, or "".
std::string misplaced(const TensorPiece& p) {
  if (p.box.rank() != p.global_shape.rank() || static_cast<int>(p.offset.size()) != p.global_shape.rank())
    return fmt::format("box {} at offset [{}] does not match the rank of global shape {}", p.box.str(),
                       fmt::join(p.offset, ", "), p.global_shape.str());
  for (size_t d = 0; d < p.offset.size(); ++d)
    if (p.offset[d] < 0 || p.box.dims()[d] < 0 || p.offset[d] + p.box.dims()[d] > p.global_shape.dims()[d])
      return fmt::format("box {} at offset [{}] lies outside global shape {}", p.box.str(), fmt::join(p.offset, ", "),
                         p.global_shape.str());
  if (p.begin < 0 || p.begin > p.end || p.end > p.box.numel())
    return fmt::format("elements [{}, {}) outside its box of {}", p.begin, p.end, p.box.numel());
  return "";
}

std::vector<int64_t> ints(const nlohmann::json& j) {
  if (!j.is_array()) throw std::invalid_argument("not a list");
  std::vector<int64_t> v;
  for (const auto& x : j) v.push_back(x.get<int64_t>());
  return v;
}

}  // namespace

void save_piece_file(const std::string& path, const std::vector<TensorPiece>& pieces) {
  std::vector<NamedTensor> tensors;
  nlohmann::json meta = nlohmann::json::array();
  for (const TensorPiece& raw : pieces) {
    const TensorPiece p = normalized(raw);
    NM_CHECK(misplaced(p).empty(), "{}: piece of {}: {}", path, p.name, misplaced(p));
    NM_CHECK(p.data.numel() == p.end - p.begin, "{}: piece of {} has {} elements for [{}, {})", path, p.name,
             p.data.numel(), p.begin, p.end);
    const std::string key = fmt::format("{}@[{}]+{}", p.name, fmt::join(p.offset, ","), p.begin);
    tensors.push_back({key, p.data.view({p.data.numel()})});
    meta.push_back({{"key", key},
                    {"name", p.name},
                    {"part", p.part},
                    {"replicas", p.replicas},
                    {"global_shape", p.global_shape.dims()},
                    {"offset", p.offset},
                    {"box", p.box.dims()},
                    {"begin", p.begin},
                    {"end", p.end}});
  }
  save_safetensors(path, tensors, {{"format", "nemotron-pieces"}, {kPiecesKey, meta.dump()}});
}

PieceSet PieceSet::open(const std::vector<std::string>& paths, const std::string& source) {
  PieceSet s;
  s.source_ = source;
  for (const std::string& path : paths) {
    const size_t k = s.files_.size();
    s.files_.push_back(SafetensorsFile::open(path));
    const SafetensorsFile& f = s.files_.back();
    auto it = f.metadata().find(kPiecesKey);
    if (it == f.metadata().end())
      throw InputError(fmt::format("{}: no __metadata__.{} (not a rank file of a sharded checkpoint)", path, kPiecesKey));
    nlohmann::json list;
    if (parse_json_bounded(it->second, list) || !list.is_array())
      throw InputError(fmt::format("{}: __metadata__.{} is not a JSON list", path, kPiecesKey));
    for (const nlohmann::json& e : list) {
      Entry en{k, "", {}};
      TensorPiece& p = en.meta;
      try {
        en.key = e.at("key").get<std::string>();
        p.name = e.at("name").get<std::string>();
        p.part = e.at("part").get<std::string>();
        p.replicas = e.at("replicas").get<std::string>();
        p.global_shape = Shape(ints(e.at("global_shape")));
        p.offset = ints(e.at("offset"));
        p.box = Shape(ints(e.at("box")));
        p.begin = e.at("begin").get<int64_t>();
        p.end = e.at("end").get<int64_t>();
      } catch (const std::exception& ex) {
        throw InputError(fmt::format("{}: __metadata__.{}: bad entry {}: {}", path, kPiecesKey, e.dump(), ex.what()));
      }
      const StTensorInfo* info = f.find(en.key);
      const std::string bad = !info ? std::string("no such tensor in the file")
                              : info->shape.numel() != p.end - p.begin
                                  ? fmt::format("{} stored elements for [{}, {})", info->shape.numel(), p.begin, p.end)
                                  : misplaced(p);
      if (!bad.empty()) throw InputError(fmt::format("{}: tensor \"{}\" ({}): {}", path, p.name, en.key, bad));
      s.index_[p.name].push_back(std::move(en));
    }
  }
  return s;
}

std::vector<std::string> PieceSet::names(const std::string& part) const {
  std::vector<std::string> out;
  for (const auto& [name, es] : index_)
    if (es.front().meta.part == part) out.push_back(name);
  return out;
}

const std::vector<PieceSet::Entry>& PieceSet::entries(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw InputError(fmt::format("{}: missing tensor \"{}\" (in no rank file)", source_, name));
  return it->second;
}

const Shape& PieceSet::global_shape(const std::string& name) const { return entries(name).front().meta.global_shape; }
const std::string& PieceSet::replicas(const std::string& name) const { return entries(name).front().meta.replicas; }

Tensor PieceSet::read(const std::string& name, const Shape& global_shape, const std::vector<int64_t>& offset_in,
                      const Shape& box_in, DType as, int64_t begin, int64_t end) const {
  const std::vector<Entry>& es = entries(name);
  const std::vector<int64_t> G = dims_of(global_shape), S = dims_of(box_in);
  const std::vector<int64_t> O = global_shape.rank() ? offset_in : std::vector<int64_t>{0};
  NM_CHECK(O.size() == G.size() && S.size() == G.size(), "read of {}: box {} at {} in {}", name, box_in.str(),
           fmt::join(offset_in, ","), global_shape.str());
  if (end < 0) end = numel_of(S);
  const size_t n = G.size(), es_size = dtype_size(as);
  Tensor out = Tensor::empty({end - begin}, as);
  uint8_t* dst = static_cast<uint8_t*>(out.raw());
  int64_t filled = 0;
  for (const Entry& e : es) {
    const TensorPiece& p = e.meta;
    if (p.global_shape != global_shape)
      throw InputError(fmt::format("{}: tensor \"{}\" has global shape {} in {}, but {} is expected here (a checkpoint "
                                   "of another model shape?)",
                                   source_, name, p.global_shape.str(), files_[e.file].path(), global_shape.str()));
    const std::vector<int64_t> pb = dims_of(p.box), po = global_shape.rank() ? p.offset : std::vector<int64_t>{0};
    bool overlaps = true;  // the boxes intersect in every dim
    for (size_t d = 0; d < n && overlaps; ++d) overlaps = po[d] < O[d] + S[d] && O[d] < po[d] + pb[d];
    if (!overlaps || p.begin == p.end) continue;
    // The piece's bytes in `as`: straight from the file when it is stored so, else converted once.
    const SafetensorsFile& f = files_[e.file];
    const StTensorInfo& info = *f.find(e.key);
    Tensor converted;
    const uint8_t* src = nullptr;
    if (dtype_of_st(info.dtype) == as) {
      src = f.bytes(info).data();
    } else {
      converted = f.load(e.key, as);
      src = static_cast<const uint8_t*>(converted.raw());
    }
    // Walk the piece's rows (runs along the last dim) that its flat range touches.
    const int64_t L = pb[n - 1];
    if (L == 0) continue;
    std::vector<int64_t> g(n);
    for (int64_t row = p.begin / L; row * L < p.end; ++row) {
      const int64_t a = std::max(row * L, p.begin), b = std::min(row * L + L, p.end);  // box-flat
      int64_t rest = row, inside = 1;
      for (size_t d = n - 1; d-- > 0;) {  // the row's global coordinates in the leading dims
        g[d] = po[d] + rest % pb[d];
        rest /= pb[d];
        if (g[d] < O[d] || g[d] >= O[d] + S[d]) inside = 0;
      }
      if (!inside) continue;
      const int64_t x = std::max(po[n - 1] + (a - row * L), O[n - 1]);
      const int64_t y = std::min(po[n - 1] + (b - row * L), O[n - 1] + S[n - 1]);
      if (x >= y) continue;
      int64_t f0 = 0;  // the run's first element, flat in the requested box
      for (size_t d = 0; d + 1 < n; ++d) f0 = f0 * S[d] + (g[d] - O[d]);
      f0 = f0 * S[n - 1] + (x - O[n - 1]);
      const int64_t lo = std::max(f0, begin), hi = std::min(f0 + (y - x), end);
      if (lo >= hi) continue;
      const int64_t from = row * L + (x - po[n - 1]) + (lo - f0) - p.begin;  // element of the piece's data
      std::memcpy(dst + static_cast<size_t>(lo - begin) * es_size, src + static_cast<size_t>(from) * es_size,
                  static_cast<size_t>(hi - lo) * es_size);
      filled += hi - lo;
    }
  }
  if (filled != end - begin)
    throw InputError(fmt::format("{}: tensor \"{}\": {} of the {} elements asked (box {} at [{}], elements [{}, {})) "
                                 "are {} (rank files of different runs mixed, or one lost)",
                                 source_, name, filled < end - begin ? end - begin - filled : filled - (end - begin),
                                 end - begin, box_in.str(), fmt::join(offset_in, ", "), begin, end,
                                 filled < end - begin ? "in no rank file" : "in several rank files"));
  return out;
}

Tensor PieceSet::read_whole(const std::string& name, std::optional<DType> as) const {
  const Entry& e = entries(name).front();
  const StTensorInfo& info = *files_[e.file].find(e.key);
  std::optional<DType> native = dtype_of_st(info.dtype);
  if (!as && !native)
    throw InputError(fmt::format("{}: tensor \"{}\" is stored as {}, which has no dtype here", source_, name,
                                 st_dtype_name(info.dtype)));
  const Shape& G = e.meta.global_shape;
  Tensor flat = read(name, G, std::vector<int64_t>(G.rank(), 0), G, as ? *as : *native);
  return flat.view(G);
}

SafetensorsFile PieceSet::gather(const std::string& part) const {
  std::vector<StTensorInfo> infos;
  size_t offset = 0;
  for (const std::string& name : names(part)) {
    const Entry& e = entries(name).front();
    const StDtype dt = files_[e.file].find(e.key)->dtype;
    const size_t bytes = static_cast<size_t>(e.meta.global_shape.numel()) * st_dtype_size(dt);
    infos.push_back({name, dt, e.meta.global_shape, offset, offset + bytes});
    offset += bytes;
  }
  const std::string header = safetensors_header(infos, {{"format", "pt"}});
  std::vector<uint8_t> image(header.size() + offset);
  std::memcpy(image.data(), header.data(), header.size());
  for (const StTensorInfo& t : infos) {
    const Tensor whole = read_whole(t.name);
    std::memcpy(image.data() + header.size() + t.begin, whole.raw(), t.end - t.begin);
  }
  return SafetensorsFile::from_memory(fmt::format("{} ({} assembled from its rank files)", source_, part),
                                      std::move(image));
}

SafetensorsSet open_weight_set(const std::string& dir) {
  const std::vector<std::string> ranks = rank_files(dir);
  if (ranks.empty()) return SafetensorsSet::open(dir);
  return SafetensorsSet::of(PieceSet::open(ranks, dir).gather("model"));
}

}  // namespace nemotron::io
