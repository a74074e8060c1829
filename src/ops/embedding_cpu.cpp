#include <cstring>
#include <limits>
#include <string>

#include "backend/cpu/parallel.h"
#include "core/host_waits.h"
#include "core/op_profiler.h"
#include "ops/dispatch.h"
#include "ops/embedding.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/embedding_cuda.h"
#endif

namespace nemotron::ops {

namespace {

// No upper bound: embedding_backward_range checks only that ids are not negative.
constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();

std::string id_error(int64_t id, int64_t position, int64_t vocab_size) {
  if (vocab_size == kUnbounded) return fmt::format("embedding: token id {} at position {} is negative", id, position);
  return fmt::format("embedding: token id {} at position {} is outside the vocabulary [0, {})", id, position,
                     vocab_size);
}

void check_id_dtype(const Tensor& ids) {
  NM_CHECK(ids.dtype() == DType::i32 || ids.dtype() == DType::i64, "embedding: ids must be int32 or int64, got {}",
           dtype_name(ids.dtype()));
}

std::vector<int64_t> token_ids(const Tensor& ids, int64_t vocab_size) {
  std::vector<int64_t> out(static_cast<size_t>(ids.numel()));
  for (int64_t n = 0; n < ids.numel(); ++n) {
    int64_t id = ids.dtype() == DType::i32 ? ids.data<int32_t>()[n] : ids.data<int64_t>()[n];
    if (id < 0 || id >= vocab_size) throw InputError(id_error(id, n, vocab_size));
    out[static_cast<size_t>(n)] = id;
  }
  return out;
}

#if NEMOTRON_CUDA
// Ids on the host are checked there and uploaded; ids on the device are checked by the kernel.
Tensor device_ids(const Tensor& ids, int64_t vocab_size, Backend& backend) {
  if (ids.device().is_cuda()) return ids;
  token_ids(ids, vocab_size);
  return ids.to(backend);
}

EmbeddingCudaArgs cuda_args(const Tensor& ids, int64_t V, int64_t D, DType dtype, int64_t vocab_begin,
                            int64_t vocab_size) {
  NM_CHECK(dtype == DType::f32 || dtype == DType::bf16, "embedding on CUDA: float32 or bfloat16, got {}",
           dtype_name(dtype));
  EmbeddingCudaArgs a;
  a.ids = ids.raw(), a.ids64 = ids.dtype() == DType::i64;
  a.N = ids.numel(), a.V = V, a.D = D, a.bf16 = dtype == DType::bf16;
  a.vocab_begin = vocab_begin, a.vocab_size = vocab_size;
  return a;
}

void throw_bad_id(const Tensor& ids, int64_t position, int64_t vocab_size) {
  int64_t id = static_cast<int64_t>(ids.view({ids.numel()}).slice(position, position + 1).to_f64_vector()[0]);
  throw InputError(id_error(id, position, vocab_size));
}
#endif

// Rows [vocab_begin, vocab_begin + W.rows) of a vocabulary of vocab_size; ids outside the rows
// but inside the vocabulary give zero rows.
// `read_back` false: the CUDA path reads no flag back (the ids were checked by the caller).
void forward_rows(Context& ctx, const Tensor& ids, const Tensor& w, int64_t vocab_begin, int64_t vocab_size,
                  Tensor& y, bool read_back = true) {
  NM_CHECK(w.rank() == 2, "embedding weight must be [V, D], got {}", w.shape().str());
  int64_t V = w.dim(0), D = w.dim(1), N = ids.numel();
  NM_CHECK(y.numel() == N * D && y.dtype() == w.dtype(), "embedding output {} for {} ids of width {}",
           y.describe(), N, D);
  NM_CHECK(vocab_begin >= 0 && vocab_begin + V <= vocab_size,
           "embedding: rows [{}, {}) are not inside the vocabulary [0, {})", vocab_begin, vocab_begin + V, vocab_size);
  check_id_dtype(ids);
#if NEMOTRON_CUDA
  if (w.device().is_cuda()) {
    Tensor dids = device_ids(ids, vocab_size, w.backend());
    EmbeddingCudaArgs a = cuda_args(dids, V, D, w.dtype(), vocab_begin, vocab_size);
    a.w = w.raw(), a.y = y.raw();
    if (!read_back) {
      NM_CUDA_CHECK(embedding_forward_cuda(a, cuda::cuda_stream(ctx), nullptr));
      return;
    }
    int64_t bad = -1;
    NM_CUDA_CHECK(embedding_forward_cuda(a, cuda::cuda_stream(ctx), &bad));
    note_host_wait();
    if (bad >= 0) throw_bad_id(dids, bad, vocab_size);
    return;
  }
#endif
  (void)ctx, (void)read_back;
  require_cpu(w, "embedding_forward");
  std::vector<int64_t> id = token_ids(ids, vocab_size);
  size_t row_bytes = static_cast<size_t>(D) * dtype_size(w.dtype());
  const char* src = static_cast<const char*>(w.raw());
  char* dst = static_cast<char*>(y.raw());
  cpu::parallel_for(N, [&](int64_t n) {
    const int64_t local = id[n] - vocab_begin;
    if (local >= 0 && local < V) std::memcpy(dst + n * row_bytes, src + local * row_bytes, row_bytes);
    else std::memset(dst + n * row_bytes, 0, row_bytes);
  }, 64);
}

// ids are checked against [0, vocab_size) (kUnbounded: only their sign); rows outside
// [vocab_begin, vocab_begin + dW.rows) add nothing.
// `read_back` false: as forward_rows.
void backward_rows(Context& ctx, const Tensor& ids, const Tensor& dy, int64_t vocab_begin, int64_t vocab_size,
                   Tensor& dw, bool read_back = true) {
  NM_CHECK(dw.rank() == 2, "embedding dw must be [V, D], got {}", dw.shape().str());
  int64_t V = dw.dim(0), D = dw.dim(1), N = ids.numel();
  NM_CHECK(dy.numel() == N * D, "embedding dy {} for {} ids of width {}", dy.describe(), N, D);
  NM_CHECK(vocab_begin >= 0, "embedding: vocab_begin {} is negative", vocab_begin);
  check_id_dtype(ids);
#if NEMOTRON_CUDA
  if (dw.device().is_cuda()) {
    expect_dtype(dw, grad_dtype(dy.dtype()), "embedding dw on CUDA");
    Tensor dids = device_ids(ids, vocab_size, dw.backend());
    EmbeddingCudaArgs a = cuda_args(dids, V, D, dy.dtype(), vocab_begin, vocab_size);
    a.dy = dy.raw(), a.dw = static_cast<float*>(dw.raw());
    if (!read_back) {
      NM_CUDA_CHECK(embedding_backward_cuda(a, cuda::cuda_stream(ctx), nullptr));
      return;
    }
    int64_t bad = -1;
    NM_CUDA_CHECK(embedding_backward_cuda(a, cuda::cuda_stream(ctx), &bad));
    note_host_wait();
    if (bad >= 0) throw_bad_id(dids, bad, vocab_size);
    return;
  }
#endif
  (void)ctx, (void)read_back;
  require_cpu(dw, "embedding_backward");
  std::vector<int64_t> id = token_ids(ids, vocab_size);
  dispatch_float(dw.dtype(), "embedding_backward", [&](auto zero) {
    using T = decltype(zero);
    const T* g = dy.data<T>();
    T* out = dw.data<T>();
    // Serial over tokens: repeated ids add in a fixed order, so the result is reproducible.
    for (int64_t n = 0; n < N; ++n) {
      const int64_t local = id[n] - vocab_begin;
      if (local < 0 || local >= V) continue;
      for (int64_t i = 0; i < D; ++i) out[local * D + i] += g[n * D + i];
    }
  });
}

}  // namespace

void embedding_forward(Context& ctx, const Tensor& ids, const Tensor& w, Tensor& y) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  NM_CHECK(w.rank() == 2, "embedding weight must be [V, D], got {}", w.shape().str());
  forward_rows(ctx, ids, w, 0, w.dim(0), y);
}

void embedding_forward_prechecked(Context& ctx, const Tensor& ids, const Tensor& w, Tensor& y) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  NM_CHECK(w.rank() == 2, "embedding weight must be [V, D], got {}", w.shape().str());
  forward_rows(ctx, ids, w, 0, w.dim(0), y, /*read_back=*/false);
}

void embedding_backward(Context& ctx, const Tensor& ids, const Tensor& dy, Tensor& dw) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  NM_CHECK(dw.rank() == 2, "embedding dw must be [V, D], got {}", dw.shape().str());
  backward_rows(ctx, ids, dy, 0, dw.dim(0), dw);
}

void embedding_backward_prechecked(Context& ctx, const Tensor& ids, const Tensor& dy, Tensor& dw) {
  OpScope scope(ctx, OpPhase::elementwise, "embedding_backward");
  NM_CHECK(dw.rank() == 2, "embedding dw must be [V, D], got {}", dw.shape().str());
  backward_rows(ctx, ids, dy, 0, dw.dim(0), dw, /*read_back=*/false);
}

void embedding_forward_range(Context& ctx, const Tensor& ids, const Tensor& w, int64_t vocab_begin, int64_t vocab_size,
                             Tensor& y, bool prechecked) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  forward_rows(ctx, ids, w, vocab_begin, vocab_size, y, /*read_back=*/!prechecked);
}

void embedding_backward_range(Context& ctx, const Tensor& ids, const Tensor& dy, int64_t vocab_begin, Tensor& dw,
                              bool prechecked) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  backward_rows(ctx, ids, dy, vocab_begin, kUnbounded, dw, /*read_back=*/!prechecked);
}

}  // namespace nemotron::ops
