#include "engine/cached_step_model.h"

#include <algorithm>
#include <atomic>

#include "backend/cpu/parallel.h"
#include "core/dtype.h"
#include "ops/embedding.h"
#include "parallel/process_groups.h"

namespace nemotron::engine {

namespace {

std::atomic<bool> graphs_default{true};

bool expert_parallel(const Context& ctx) { return parallel::groups_of(ctx).expert->size() > 1; }

bool graphs_apply(const model::HybridModel& model, const Context& ctx) {
#if NEMOTRON_CUDA
  // Tensor parallelism's collectives are NCCL calls on the compute stream (or forked onto the
  // communicator's stream and joined by events), which a capture records like kernels; every rank
  // captures the same bucket at the same step. Expert parallelism's dispatch reads its counts back.
  (void)model;
  return graphs_default.load() && ctx.backend->device().is_cuda() && !expert_parallel(ctx);
#else
  (void)model, (void)ctx;
  return false;
#endif
}

// With graphs: one slot and one KV block more than asked, the padded rows' scratch. Under expert
// parallelism (no graphs): one slot more with its blocks, idle_step's.
model::DecodeConfig state_config(bool graphs, bool idle_slot, int64_t max_slots, int64_t max_seq_len,
                                 int64_t block_size) {
  model::DecodeConfig c{max_slots, max_seq_len, block_size, 0};
  if (graphs) {
    c.num_blocks = c.resolved_num_blocks() + 1;
    c.max_slots = max_slots + 1;
  } else if (idle_slot) {
    c.max_slots = max_slots + 1;
  }
  return c;
}

}  // namespace

void set_decode_graphs_default(bool on) { graphs_default.store(on); }
bool decode_graphs_default() { return graphs_default.load(); }

CachedStepModel::CachedStepModel(model::HybridModel& model, Context ctx, int64_t max_slots, int64_t max_seq_len,
                                 int64_t block_size)
    : model_(model), ctx_(ctx), max_slots_(max_slots),
      state_(model.make_decode_state(
          state_config(graphs_apply(model, ctx), expert_parallel(ctx), max_slots, max_seq_len, block_size))) {
#if NEMOTRON_CUDA
  if (state_.max_slots() > max_slots_ && !expert_parallel(ctx_)) {
    // The scratch slot holds one token for good: its block is the padded rows' to write.
    const model::DecodeBatch scratch = state_.begin_host({max_slots_}, {1});
    state_.commit(scratch);
    graphs_ = std::make_unique<DecodeGraphs>(model_, ctx_, state_, max_slots_, max_slots_, scratch.host_block_table[0]);
  }
#endif
}

CachedStepModel::~CachedStepModel() = default;

int64_t CachedStepModel::graph_replays() const {
#if NEMOTRON_CUDA
  if (graphs_) return graphs_->replays();
#endif
  return 0;
}

bool CachedStepModel::uses_decode_graphs() const {
#if NEMOTRON_CUDA
  if (graphs_) return graphs_->enabled();
#endif
  return false;
}

bool CachedStepModel::group_has_work(bool mine) {
  parallel::Communicator& group = *parallel::groups_of(ctx_).expert;
  if (group.size() == 1) return mine;
  return group.all_reduce_host(mine ? 1.0 : 0.0, parallel::ReduceOp::max) > 0;
}

void CachedStepModel::idle_step() {
  NM_CHECK(expert_parallel(ctx_) && state_.max_slots() > max_slots_,
           "idle_step: no slot of its own (the model is not expert-parallel)");
  const int64_t own = max_slots_;
  model_.extend(ctx_, state_, {own}, {{0}}, model_.params().dtype());
  state_.release(own);
}

std::vector<float> CachedStepModel::extend(const std::vector<int64_t>& slots,
                                           const std::vector<std::vector<int32_t>>& tokens) {
  // A bf16 model's head writes bf16 logits: they come to the host as they are (half the bytes of
  // a float32 copy: [S, V] is 64 MiB at S = 256, V = 131072) and widen there, exactly.
  const DType head = model_.params().dtype();
  const bool narrow = head == DType::bf16 && !ctx_.backend->device().is_cpu();
  const Tensor logits = model_.extend(ctx_, state_, slots, tokens, narrow ? DType::bf16 : DType::f32);  // [S, V]
  const Tensor host = logits.device().is_cpu() ? logits : logits.to(host_backend());
  const int64_t n = host.numel();
  if (!narrow) {
    const float* p = host.data<float>();
    return std::vector<float>(p, p + n);
  }
  std::vector<float> out(static_cast<size_t>(n));
  const uint16_t* p = static_cast<const uint16_t*>(host.raw());
  const int64_t rows = logits.dim(0), V = n / std::max<int64_t>(rows, 1);
  cpu::parallel_for(rows, [&](int64_t r) {
    for (int64_t v = r * V; v < (r + 1) * V; ++v) out[static_cast<size_t>(v)] = bf16_to_f32(p[v]);
  }, cpu::grain_for(V));
  return out;
}

bool CachedStepModel::graph_step(std::span<const int64_t> logits_rows,
                                 const std::vector<std::vector<int32_t>>& tokens) const {
#if NEMOTRON_CUDA
  // A decode step (one token per slot, each drawing from its own row) replays a graph.
  return graphs_ && graphs_->enabled() && logits_rows.empty() &&
         std::all_of(tokens.begin(), tokens.end(), [](const std::vector<int32_t>& t) { return t.size() == 1; });
#else
  (void)logits_rows, (void)tokens;
  return false;
#endif
}

std::vector<ops::TokenDraw> CachedStepModel::extend_and_sample(const std::vector<int64_t>& slots,
                                                               const std::vector<std::vector<int32_t>>& tokens,
                                                               std::span<const ops::RowSampling> rows,
                                                               std::span<const int64_t> logits_rows) {
#if NEMOTRON_CUDA
  if (graph_step(logits_rows, tokens)) return graphs_->step(slots, tokens, rows);
#endif
  return eager_extend_and_sample(slots, tokens, rows, logits_rows);
}

void CachedStepModel::launch_and_sample(const std::vector<int64_t>& slots, const std::vector<std::vector<int32_t>>& tokens,
                                        std::span<const ops::RowSampling> rows, std::span<const int64_t> logits_rows) {
#if NEMOTRON_CUDA
  if (graph_step(logits_rows, tokens)) {
    graphs_->launch(slots, tokens, rows);
    return;
  }
#endif
  launched_ = eager_extend_and_sample(slots, tokens, rows, logits_rows);
}

std::vector<ops::TokenDraw> CachedStepModel::collect_draws() {
#if NEMOTRON_CUDA
  if (graphs_ && graphs_->in_flight()) return graphs_->collect();
#endif
  return std::move(launched_);
}

std::vector<ops::TokenDraw> CachedStepModel::eager_extend_and_sample(const std::vector<int64_t>& slots,
                                                                     const std::vector<std::vector<int32_t>>& tokens,
                                                                     std::span<const ops::RowSampling> rows,
                                                                     std::span<const int64_t> logits_rows) {
  // The head's dtype as it is (bf16 for a bf16 model): the kernel widens as it reads.
  const Tensor logits = model_.extend(ctx_, state_, slots, tokens, model_.params().dtype());  // [S, V]
  if (logits_rows.empty()) return ops::sample_rows(ctx_, logits, rows);
  // Several draws from one row (prefix sharing): the rows gathered first (an embedding lookup).
  const int64_t R = static_cast<int64_t>(logits_rows.size()), V = logits.dim(1);
  NM_CHECK(rows.size() == logits_rows.size(), "extend_and_sample: {} draws, {} logits rows", rows.size(), R);
  std::vector<int32_t> ids(logits_rows.begin(), logits_rows.end());
  Tensor ids_t = Tensor::from_vector<int32_t>({R}, ids);
  if (!ctx_.backend->device().is_cpu()) ids_t = ids_t.to(*ctx_.backend);
  Tensor picked = ctx_.empty({R, V}, logits.dtype());
  ops::embedding_forward(ctx_, ids_t, logits, picked);
  return ops::sample_rows(ctx_, picked, rows);
}

}  // namespace nemotron::engine
