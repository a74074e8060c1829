#include "engine/decode_graphs.h"
#if NEMOTRON_CUDA

#include <algorithm>
#include <cstdio>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_graph.h"
#include "core/error.h"
#include "core/host_waits.h"
#include "parallel/process_groups.h"

namespace nemotron::engine {

namespace {

// Pinned host memory: the per-step copies are asynchronous and the one wait is for the tokens.
template <class T>
struct Pinned {
  T* p = nullptr;
  explicit Pinned(int64_t n) { NM_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&p), static_cast<size_t>(n) * sizeof(T))); }
  ~Pinned() { cudaFreeHost(p); }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
};

// While alive, every allocation on the backend comes from the pool, from its start.
struct PoolScope {
  cuda::CudaBackend& backend;
  PoolScope(cuda::CudaBackend& b, int64_t pool) : backend(b) {
    backend.rewind_pool(pool);
    backend.activate_pool(pool);
  }
  ~PoolScope() { backend.activate_pool(-1); }
};

}  // namespace

// One batch-size bucket: its device buffers (inputs, the drawn tokens), the host staging for
// them, the private pool of its step's memory and its graph once captured. The int32 inputs are
// one buffer: the ids [B], then the batch's index arrays in model::view_batch_tensors's order
// (slot_ids [B], cu_seqlens [B+1], context_lens [B], block_table [B, M], slot_mapping [B],
// positions [B]).
struct DecodeGraphs::Bucket {
  cuda::CudaBackend& backend;
  int64_t rows, ints;
  int64_t pool;
  Tensor inputs, params, tokens, logprobs, ids;
  model::DecodeBatch batch;
  Pinned<int32_t> host_inputs;
  Pinned<double> host_params;
  Pinned<int32_t> host_tokens;
  Pinned<float> host_logprobs;
  cuda::CudaGraph graph;

  Bucket(cuda::CudaBackend& be, int64_t B, int64_t M)
      : backend(be), rows(B), ints(6 * B + 1 + B * M), pool(be.make_pool()), host_inputs(ints), host_params(2 * B),
        host_tokens(B), host_logprobs(2 * B), graph(be) {
    // The host side of the padded batch: B sequences of one new token (only its sizes are read).
    for (int64_t i = 0; i < B; ++i) {
      batch.slots.push_back(i);
      batch.start.push_back(0);
      batch.new_tokens.push_back(1);
      batch.cu.push_back(static_cast<int32_t>(i));
    }
    batch.cu.push_back(static_cast<int32_t>(B));
    batch.total_tokens = B;
    batch.table_width = M;
    inputs = Tensor::empty({ints}, DType::i32, be);
    params = Tensor::empty({B, 2}, DType::f64, be);
    tokens = Tensor::empty({B}, DType::i32, be);
    logprobs = Tensor::empty({B, 2}, DType::f32, be);
    ids = inputs.slice(0, B).view({1, B});
    model::view_batch_tensors(inputs.slice(B, ints), batch);
  }
  ~Bucket() { backend.free_pool(pool); }
};

DecodeGraphs::DecodeGraphs(model::HybridModel& model, Context ctx, model::DecodeState& state, int64_t max_slots,
                           int64_t scratch_slot, int32_t scratch_block)
    : model_(model), ctx_(ctx), state_(state), max_slots_(max_slots), scratch_slot_(scratch_slot),
      scratch_block_(scratch_block) {
  // The graph's memory must come from its pool: no arena (whose blocks later steps reuse), and
  // no profiler (its events are host round trips).
  ctx_.workspace = nullptr;
  ctx_.profiler = nullptr;
  table_width_ = state_.blocks_for(state_.max_seq_len());
  table_width_ = std::max<int64_t>(table_width_, 1);
}

DecodeGraphs::~DecodeGraphs() = default;

DecodeGraphs::Bucket& DecodeGraphs::bucket_for(int64_t rows) {
  size_t k = 0;
  while ((int64_t{1} << k) < rows) ++k;
  if (buckets_.size() <= k) buckets_.resize(k + 1);
  if (!buckets_[k]) buckets_[k] = std::make_unique<Bucket>(cuda::cuda_backend(ctx_), int64_t{1} << k, table_width_);
  return *buckets_[k];
}

void DecodeGraphs::run(Bucket& b) {
  const Tensor logits = model_.extend_batch(ctx_, state_, b.batch, b.ids, model_.params().dtype());
  ops::sample_rows_into(ctx_, logits, b.params, b.tokens, b.logprobs);
}

void DecodeGraphs::launch(const std::vector<int64_t>& slots, const std::vector<std::vector<int32_t>>& tokens,
                          std::span<const ops::RowSampling> rows) {
  const int64_t S = static_cast<int64_t>(slots.size());
  NM_CHECK(enabled_, "decode graphs: step after they were turned off ({})", failure_);
  NM_CHECK(!pending_, "decode graphs: a step launched while another is in flight");
  NM_CHECK(S > 0 && S <= max_slots_ && static_cast<int64_t>(tokens.size()) == S && static_cast<int64_t>(rows.size()) == S,
           "decode graphs: {} slots, {} token lists, {} draws (at most {} slots)", S, tokens.size(), rows.size(),
           max_slots_);
  for (const std::vector<int32_t>& t : tokens) NM_CHECK(t.size() == 1, "decode graphs: a step of {} tokens for a slot", t.size());
  model_.check_token_ids(slots, tokens);
  const std::vector<double> params = ops::sample_rows_params(rows);
  model::DecodeBatch plan = state_.begin_host(slots, std::vector<int64_t>(static_cast<size_t>(S), 1));

  Bucket& b = bucket_for(S);
  const int64_t B = b.rows, M = table_width_, bs = state_.block_size();
  int32_t* ids = b.host_inputs.p;
  int32_t *slot_ids = ids + B, *cu = slot_ids + B, *lens = cu + B + 1, *table = lens + B, *mapping = table + B * M,
          *positions = mapping + B;
  std::fill(table, table + B * M, 0);
  for (int64_t i = 0; i < B; ++i) {
    cu[i] = static_cast<int32_t>(i);
    if (i < S) {
      ids[i] = tokens[static_cast<size_t>(i)][0];
      slot_ids[i] = plan.host_slot_ids[i];
      lens[i] = plan.host_context_lens[i];
      std::copy_n(plan.host_block_table.begin() + i * plan.table_width, plan.table_width, table + i * M);
      mapping[i] = plan.host_slot_mapping[i];
      positions[i] = plan.host_positions[i];
    } else {  // padding: token 0 at position 0 of the scratch slot, written to its own block
      ids[i] = 0;
      slot_ids[i] = static_cast<int32_t>(scratch_slot_);
      lens[i] = 1;
      table[i * M] = scratch_block_;
      mapping[i] = static_cast<int32_t>(scratch_block_ * bs);
      positions[i] = 0;
    }
  }
  cu[B] = static_cast<int32_t>(B);
  std::fill(b.host_params.p, b.host_params.p + 2 * B, 0.0);  // padded rows: greedy
  std::copy(params.begin(), params.end(), b.host_params.p);

  cuda::CudaBackend& be = cuda::cuda_backend(ctx_);
  cudaStream_t s = be.stream();
  NM_CUDA_CHECK(cudaMemcpyAsync(b.inputs.raw(), b.host_inputs.p, static_cast<size_t>(b.ints) * sizeof(int32_t),
                                cudaMemcpyHostToDevice, s));
  NM_CUDA_CHECK(cudaMemcpyAsync(b.params.raw(), b.host_params.p, static_cast<size_t>(2 * B) * sizeof(double),
                                cudaMemcpyHostToDevice, s));
  if (b.graph.captured()) {
    b.graph.launch();
    ++replays_;
  } else {
    {  // this step, eagerly, sizing the pool; then the capture reuses its addresses
      PoolScope scope(be, b.pool);
      run(b);
    }
    try {
      PoolScope scope(be, b.pool);
      b.graph.capture([&] { run(b); });
      ++captures_;
    } catch (const std::exception& e) {
      // Under tensor parallelism the failed capture may have taken the group's collectives with it
      // (recorded, never run) on this rank alone: going on eagerly could wait forever on a partner.
      if (parallel::groups_of(ctx_).tensor->size() > 1)
        throw Error(fmt::format("decode graphs: a tensor-parallel decode step cannot be captured ({}); run with "
                                "NEMOTRON_DECODE_GRAPHS=0",
                                e.what()));
      enabled_ = false;
      failure_ = e.what();
      std::fprintf(stderr, "decode graphs: off for this model, its step cannot be captured: %s\n", e.what());
    }
  }
  NM_CUDA_CHECK(cudaMemcpyAsync(b.host_tokens.p, b.tokens.raw(), static_cast<size_t>(B) * sizeof(int32_t),
                                cudaMemcpyDeviceToHost, s));
  NM_CUDA_CHECK(cudaMemcpyAsync(b.host_logprobs.p, b.logprobs.raw(), static_cast<size_t>(2 * B) * sizeof(float),
                                cudaMemcpyDeviceToHost, s));
  pending_ = &b;
  pending_rows_ = S;
  pending_plan_ = std::move(plan);
}

std::vector<ops::TokenDraw> DecodeGraphs::collect() {
  NM_CHECK(pending_, "decode graphs: collect without a step in flight");
  Bucket& b = *pending_;
  const int64_t S = pending_rows_;
  pending_ = nullptr;
  NM_CUDA_CHECK(cudaStreamSynchronize(cuda::cuda_backend(ctx_).stream()));
  note_host_wait();
  state_.commit(pending_plan_);
  std::vector<ops::TokenDraw> out(static_cast<size_t>(S));
  for (int64_t i = 0; i < S; ++i)
    out[static_cast<size_t>(i)] = {b.host_tokens.p[i], b.host_logprobs.p[2 * i], b.host_logprobs.p[2 * i + 1]};
  return out;
}

}  // namespace nemotron::engine
#endif
