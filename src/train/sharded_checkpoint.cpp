#include "train/sharded_checkpoint.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "core/error.h"
#include "io/checkpoint_layout.h"
#include "io/file_hash.h"
#include "model/lora.h"
#include "model/weights_io.h"

namespace nemotron::train {

namespace fs = std::filesystem;

namespace {

// The first rank of a parameter's replicas writes its whole value (every copy is the same). A
// parameter whole on every tensor rank is written by tensor rank 0; a split one by every tensor
// rank (its own part). Context ranks are replicas too: an expert's group (expert_data) already
// spans data x context, anything else is written by context rank 0.
bool writes_replica(const model::Param& p, const parallel::ProcessGroups& g) {
  const parallel::Communicator& replicas = p.is_expert() ? *g.expert_data : *g.data;
  return replicas.rank() == 0 && (p.is_expert() || g.context->rank() == 0) &&
         (p.tensor_split() || g.tensor->rank() == 0);
}

// Where a local flat range [begin, end) of a value meets each of its boxes: elements [begin, end)
// of the box, found at `at` within the range.
struct BoxPart {
  model::ParamBox box;
  int64_t begin, end, at;
};

std::vector<BoxPart> box_parts(const model::Param& p, int64_t begin, int64_t end) {
  const int64_t n = p.value.numel();
  if (end < 0) end = n;
  const int64_t row = p.value.rank() ? n / std::max<int64_t>(1, p.value.dim(0)) : n;
  std::vector<BoxPart> out;
  for (const model::ParamBox& b : p.boxes()) {
    const int64_t lo = b.local_row * row, hi = lo + b.box.numel();
    const int64_t a = std::max(lo, begin), z = std::min(hi, end);
    if (a < z) out.push_back({b, a - lo, z - lo, a - begin});
  }
  return out;
}

// `data`: the flat elements `range` (end -1: all) of p's value or state; one piece per box it meets.
void add_pieces(std::vector<io::TensorPiece>& out, const model::Param& p, std::string name, const char* part,
                const Tensor& data, std::pair<int64_t, int64_t> range = {0, -1}) {
  const std::vector<BoxPart> parts = box_parts(p, range.first, range.second);
  const bool whole = parts.size() == 1 && range.second < 0 && p.shard.row_blocks.empty();
  for (const BoxPart& bp : parts) {
    io::TensorPiece t;
    t.name = name;
    t.part = part;
    t.replicas = p.is_expert() ? "expert_data" : "data";
    t.global_shape = p.global_shape();
    t.offset = bp.box.offset;
    t.box = bp.box.box;
    t.begin = whole ? 0 : bp.begin;
    t.end = whole ? -1 : bp.end;
    t.data = whole ? data : data.view({data.numel()}).slice(bp.at, bp.at + (bp.end - bp.begin));
    out.push_back(std::move(t));
  }
}

// The local flat range [begin, end) of p's value (or state) from the pieces, box by box, in `as`.
Tensor read_boxes(const io::PieceSet& pieces, const std::string& name, const model::Param& p, DType as,
                  int64_t begin = 0, int64_t end = -1) {
  if (p.shard.row_blocks.empty())
    return pieces.read(name, p.global_shape(), p.global_offset(), p.value.shape(), as, begin, end);
  if (end < 0) end = p.value.numel();
  Tensor out = Tensor::empty({end - begin}, as);
  for (const BoxPart& bp : box_parts(p, begin, end))
    out.slice(bp.at, bp.at + (bp.end - bp.begin))
        .copy_from(pieces.read(name, p.global_shape(), bp.box.offset, bp.box.box, as, bp.begin, bp.end));
  return out;
}

}  // namespace

std::vector<io::TensorPiece> rank_pieces(const CheckpointContent& c, const parallel::ProcessGroups& g) {
  NM_CHECK(c.params != nullptr, "a checkpoint without parameters");
  const model::ParamFilter only = model::has_lora(*c.params) ? model::ParamFilter(model::is_lora) : model::ParamFilter();
  const AdamW* opt = c.optimizer;
  std::vector<io::TensorPiece> out;
  const auto& all = c.params->all();
  for (size_t k = 0; k < all.size(); ++k) {
    const model::Param& p = *all[k];
    if (only && !only(p)) continue;
    // An expert-parallel expert's state is whole on each of its copies: written once, as its value.
    const bool sharded = opt && opt->sharded() && !p.is_expert();
    const bool writer = writes_replica(p, g);
    const std::pair<int64_t, int64_t> range = opt ? opt->state_range(k) : std::pair<int64_t, int64_t>{0, 0};
    const bool owns = sharded && range.first < range.second && g.context->rank() == 0 &&
                      (p.tensor_split() || g.tensor->rank() == 0);
    // Where the optimizer shards float32 masters (or, fully sharded, the values), a trainable
    // parameter's truth is its owners' pieces: a rank that owns none of it writes nothing of it.
    const bool truth_sharded = sharded && opt->shards_truth() && p.requires_grad;
    if (truth_sharded) {
      if (owns) add_pieces(out, p, p.name, "model", opt->truth_piece(k), range);  // by its owner
    } else if (writer) {
      add_pieces(out, p, p.name, "model", p.truth());
    }
    if (!opt || !p.requires_grad) continue;
    const Tensor& m = opt->first_moments()[k];
    const Tensor& v = opt->second_moments()[k];
    if (sharded ? !owns : !writer) continue;
    NM_CHECK(m.defined() && v.defined(), "no optimizer state for {}", p.name);
    const std::pair<int64_t, int64_t> r = sharded ? range : std::pair<int64_t, int64_t>{0, -1};
    add_pieces(out, p, "exp_avg." + p.name, "optimizer", m, r);
    add_pieces(out, p, "exp_avg_sq." + p.name, "optimizer", v, r);
  }
  return out;
}

std::string save_sharded_checkpoint(const std::string& save_dir, const CheckpointContent& c,
                                    const parallel::ProcessGroups& g, int64_t most_recent_k,
                                    const SaveStageHook& hook) {
  parallel::Communicator& world = *g.world;
  const int rank = world.rank(), n = world.size();
  const bool first = g.is_first_rank();
  // Each step ends in an all-reduce of its failures, so a rank that throws never leaves the
  // others waiting in a collective, and nothing is committed unless every rank succeeded.
  auto agree = [&](const std::string& what, const std::string& error) {
    if (world.all_reduce_host(error.empty() ? 0.0 : 1.0) == 0) return;
    throw Error(fmt::format("checkpoint at iteration {}: {} failed on {} (nothing committed; {} still names the "
                            "previous iteration){}",
                            c.state.iteration, what, error.empty() ? "another rank" : "this rank", io::kTrackerFile,
                            error.empty() ? "" : ": " + error));
  };
  // 1. The first rank makes the temporary directory; its process id names it for every rank.
  std::string error;
  double pid = 0;
  if (first) try {
      pid = static_cast<double>(::getpid());
      make_temp_iteration_dir(save_dir, c.state.iteration, static_cast<long>(pid));
    } catch (const std::exception& e) {
      error = e.what();
    }
  agree("creating the temporary directory", error);
  pid = world.all_reduce_host(pid, parallel::ReduceOp::max);
  const fs::path tmp = fs::path(save_dir) / fmt::format("{}.tmp-{}", iteration_dir_name(c.state.iteration),
                                                        static_cast<long>(pid));
  // 2. Every rank writes its file, flushed (file and directory entry) before it reports.
  std::vector<double> report(3 * static_cast<size_t>(n), 0.0);  // per rank: bytes, hash high and low 32 bits
  try {
    if (hook) hook("rank_file");
    const fs::path path = tmp / io::rank_file_name(rank);
    io::save_piece_file(path.string(), rank_pieces(c, g));
    fsync_dir(tmp.string());
    const std::string h = io::file_hash(path.string());
    const uint64_t x = std::stoull(h.substr(h.find(':') + 1), nullptr, 16);
    report[3 * rank] = static_cast<double>(fs::file_size(path));
    report[3 * rank + 1] = static_cast<double>(x >> 32);
    report[3 * rank + 2] = static_cast<double>(x & 0xffffffffu);
  } catch (const std::exception& e) {
    error = e.what();
  }
  agree("writing a rank file", error);
  world.all_reduce_host(report);
  // 3. The first rank commits: train_state.json lists every rank file with its size and hash.
  std::string dir = (fs::path(save_dir) / iteration_dir_name(c.state.iteration)).string();
  if (first) try {
      std::map<std::string, std::string> hashes;
      nlohmann::json files = nlohmann::json::array();
      for (int r = 0; r < n; ++r) {
        const uint64_t x = (static_cast<uint64_t>(report[3 * r + 1]) << 32) | static_cast<uint64_t>(report[3 * r + 2]);
        hashes[io::rank_file_name(r)] = fmt::format("xxh64:{:016x}", x);
        files.push_back(io::rank_file_name(r));
      }
      const nlohmann::json extra = {{"format_version", kShardedCheckpointFormatVersion},
                                    {io::kShardedKey, {{"world_size", n}, {"rank_files", files}}}};
      dir = commit_iteration(save_dir, tmp.string(), c, extra, hashes, most_recent_k, hook);
    } catch (const std::exception& e) {
      error = e.what();
    }
  agree("the commit", error);
  return dir;
}

void load_sharded_weights(const io::PieceSet& pieces, model::ParamStore& params, const std::string& source,
                          const model::ParamFilter& only, const model::WeightSink* sink) {
  const model::WeightSink whole;
  const model::WeightSink& to = sink ? *sink : whole;
  std::set<std::string> wanted;
  bool holds_experts = false;
  for (model::Param* p : params.all()) {
    holds_experts = holds_experts || p->is_expert();
    if (only && !only(*p)) continue;
    wanted.insert(p->name);
    const auto [begin, end] = to.range(*p);
    if (begin >= end) {  // nothing of it here; still a tensor of the checkpoint, of p's global shape
      if (!pieces.contains(p->name))
        throw InputError(fmt::format("{}: missing tensor \"{}\" (shape {}) that the model needs", source, p->name,
                                     p->global_shape().str()));
      if (pieces.global_shape(p->name) != p->global_shape())
        throw InputError(fmt::format("{}: tensor \"{}\" has shape {} but the model expects {} (a checkpoint of another "
                                     "model shape?)",
                                     source, p->name, pieces.global_shape(p->name).str(), p->global_shape().str()));
      continue;
    }
    // Only the sink's elements are read: the rank's range under full parameter sharding.
    const Tensor elements = read_boxes(pieces, p->name, *p, to.dtype(*p), begin, end);
    model::check_loaded_finite(elements, source, p->name);
    to.write(*p, elements.view({end - begin}));
  }
  for (const std::string& name : pieces.names("model")) {
    if (wanted.count(name)) continue;
    const model::Param* p = params.find(name);
    if (p && only && !only(*p)) continue;  // a parameter this load leaves as it is
    if (!p && holds_experts && pieces.replicas(name) == "expert_data") continue;  // another rank's expert
    throw InputError(fmt::format("{}: tensor \"{}\" is not in the model (a checkpoint of another model shape?)", source,
                                 name));
  }
}

void load_sharded_optimizer(const io::PieceSet& pieces, AdamW& opt, const model::ParamStore& params,
                            const std::string& source) {
  opt.ensure_moments();
  const auto& all = params.all();
  for (size_t k = 0; k < all.size(); ++k) {
    const model::Param& p = *all[k];
    const auto [begin, end] = opt.state_range(k);
    if (!p.requires_grad || begin >= end) continue;
    for (const bool first_moment : {true, false}) {
      const std::string name = (first_moment ? "exp_avg." : "exp_avg_sq.") + p.name;
      if (!pieces.contains(name))
        throw InputError(fmt::format("{}: missing tensor \"{}\" (shape {}) that the optimizer needs (a weights-only "
                                     "checkpoint? load it with checkpoint.finetune=true)",
                                     source, name, p.global_shape().str()));
      Tensor& dst = first_moment ? opt.first_moments()[k] : opt.second_moments()[k];
      const Tensor range = read_boxes(pieces, name, p, dst.dtype(), begin, end);
      model::check_loaded_finite(range, source, name);  // a NaN moment poisons every later step
      dst.copy_from(range.view(dst.shape()));
    }
  }
}

}  // namespace nemotron::train
