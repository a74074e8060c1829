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

// The first rank of a parameter's replicas writes its whole value (every copy is the same).
bool writes_replica(const model::Param& p, const parallel::ProcessGroups& g) {
  const parallel::Communicator& replicas = p.is_expert() ? *g.expert_data : *g.data;
  return replicas.rank() == 0 && g.context->rank() == 0;
}

io::TensorPiece piece_of(const model::Param& p, std::string name, const char* part, Tensor data,
                         std::pair<int64_t, int64_t> range = {0, -1}) {
  io::TensorPiece t;
  t.name = std::move(name);
  t.part = part;
  t.replicas = p.is_expert() ? "expert_data" : "data";
  t.global_shape = p.global_shape();
  t.offset = p.global_offset();
  t.box = p.value.shape();
  t.begin = range.first;
  t.end = range.second;
  t.data = std::move(data);
  return t;
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
    const bool owns = sharded && range.first < range.second && g.context->rank() == 0;
    // Where the optimizer shards float32 masters, a trainable parameter's truth is its owners'
    // master pieces: a rank that owns none of it writes nothing of it (not its bf16 value).
    const bool truth_sharded = sharded && opt->shards_masters() && p.requires_grad;
    if (truth_sharded) {
      if (owns) out.push_back(piece_of(p, p.name, "model", opt->master_piece(k), range));  // by its owner
    } else if (writer) {
      out.push_back(piece_of(p, p.name, "model", p.truth()));
    }
    if (!opt || !p.requires_grad) continue;
    const Tensor& m = opt->first_moments()[k];
    const Tensor& v = opt->second_moments()[k];
    if (sharded ? !owns : !writer) continue;
    NM_CHECK(m.defined() && v.defined(), "no optimizer state for {}", p.name);
    const std::pair<int64_t, int64_t> r = sharded ? range : std::pair<int64_t, int64_t>{0, -1};
    out.push_back(piece_of(p, "exp_avg." + p.name, "optimizer", m, r));
    out.push_back(piece_of(p, "exp_avg_sq." + p.name, "optimizer", v, r));
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
                          const model::ParamFilter& only) {
  std::set<std::string> wanted;
  bool holds_experts = false;
  for (model::Param* p : params.all()) {
    holds_experts = holds_experts || p->is_expert();
    if (only && !only(*p)) continue;
    wanted.insert(p->name);
    Tensor& dst = p->truth();  // the float32 master when the compute copy is bf16
    const Tensor box = pieces.read(p->name, p->global_shape(), p->global_offset(), p->value.shape(), dst.dtype());
    model::check_loaded_finite(box, source, p->name);
    dst.copy_from(box.view(dst.shape()));
    p->refresh_value();
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
      const Tensor range =
          pieces.read(name, p.global_shape(), p.global_offset(), p.value.shape(), dst.dtype(), begin, end);
      model::check_loaded_finite(range, source, name);  // a NaN moment poisons every later step
      dst.copy_from(range.view(dst.shape()));
    }
  }
}

}  // namespace nemotron::train
