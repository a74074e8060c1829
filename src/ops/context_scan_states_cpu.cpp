// CPU reference of context_scan_states.h: plain loops over rows, chunks in sequence order.
#include <cmath>
#include <vector>

#include "core/op_profiler.h"
#include "ops/context_scan_states.h"
#include "ops/dispatch.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/context_scan_states_cuda.h"
#endif

namespace nemotron::ops {

namespace {

// The gathered tensors' sizes and the chunk order of model/context_split.h.
struct Chain {
  int64_t C, B, nH, S, L;
  int rank;
  const int32_t* seq;  // [C, 2B, L] or null
  // Gathered row of chunk g of row b: rank q = g (or 2C-1-g), local row 2b (or 2b+1).
  int64_t row(int64_t g, int64_t b) const { return g < C ? g * 2 * B + 2 * b : (2 * C - 1 - g) * 2 * B + 2 * b + 1; }
  bool link(int64_t g, int64_t b) const {
    return g > 0 && (!seq || seq[row(g - 1, b) * L + L - 1] == seq[row(g, b) * L]);
  }
  bool passes(int64_t g, int64_t b) const { return !seq || seq[row(g, b) * L] == seq[row(g, b) * L + L - 1]; }
  // Local row of chunk g on this rank, or -1.
  int64_t local(int64_t g, int64_t b) const {
    return g == rank ? 2 * b : g == 2 * C - 1 - rank ? 2 * b + 1 : -1;
  }
};

template <class T>
void forward_ref(const Chain& c, const T* F, const T* decay, T* out) {
  const int64_t G = 2 * c.C, per_head = c.S / c.nH;
  std::vector<T> s(static_cast<size_t>(c.S));
  for (int64_t b = 0; b < c.B; ++b) {
    std::fill(s.begin(), s.end(), T(0));  // S_0
    for (int64_t g = 0; g < G; ++g) {
      if (const int64_t r = c.local(g, b); r >= 0) std::copy(s.begin(), s.end(), out + r * c.S);
      if (g + 1 == G) break;
      if (!c.link(g + 1, b)) {
        std::fill(s.begin(), s.end(), T(0));
        continue;
      }
      const int64_t row = c.row(g, b);
      for (int64_t i = 0; i < c.S; ++i) {
        const T d = c.passes(g, b) ? decay[row * c.nH + i / per_head] : T(0);
        s[i] = F[row * c.S + i] + d * s[i];
      }
    }
  }
}

template <class T>
void backward_ref(const Chain& c, const T* d0, const T* decay, T* out) {
  const int64_t G = 2 * c.C, per_head = c.S / c.nH;
  std::vector<T> ds(static_cast<size_t>(c.S)), df(ds.size());  // dS_{g+1}, dF_g
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t g = G - 1; g >= 0; --g) {
      const bool linked = g + 1 < G && c.link(g + 1, b);
      for (int64_t i = 0; i < c.S; ++i) df[i] = linked ? ds[i] : T(0);
      if (const int64_t r = c.local(g, b); r >= 0) std::copy(df.begin(), df.end(), out + r * c.S);
      const int64_t row = c.row(g, b);
      for (int64_t i = 0; i < c.S; ++i) {
        const T d = c.passes(g, b) ? decay[row * c.nH + i / per_head] : T(0);
        ds[i] = d0[row * c.S + i] + d * df[i];
      }
    }
  }
}

// Checks the gathered tensors against each other and `local`; returns the chain's sizes.
Chain chain_of(const Tensor& in, const Tensor& decay, const Tensor& seq, int rank, const Tensor& local,
               const char* op) {
  NM_CHECK(in.rank() == 5, "{}: states must be [C, 2B, nH, P, N], got {}", op, in.shape().str());
  const int64_t C = in.dim(0), B2 = in.dim(1), nH = in.dim(2);
  NM_CHECK(B2 % 2 == 0 && rank >= 0 && rank < C, "{}: {} rows and rank {} of {}", op, B2, rank, C);
  expect_shape(decay, {C, B2, nH}, (std::string(op) + " decay").c_str());
  expect_shape(local, {B2, nH, in.dim(3), in.dim(4)}, (std::string(op) + " output").c_str());
  expect_dtype(decay, in.dtype(), "context_states decay");
  expect_dtype(local, in.dtype(), "context_states output");
  int64_t L = 0;
  if (seq.defined()) {
    NM_CHECK(seq.rank() == 3 && seq.dim(0) == C && seq.dim(1) == B2 && seq.dim(2) > 0 && seq.dtype() == DType::i32,
             "{}: seq must be int32 [{}, {}, L], got {}", op, C, B2, seq.describe());
    L = seq.dim(2);
  }
  return {C, B2 / 2, nH, in.numel() / (C * B2), L, rank, nullptr};
}

void compose(Context& ctx, const Tensor& in, const Tensor& decay, const Tensor& seq, int rank, Tensor& out,
             bool backward) {
  const char* op = backward ? "context_states_backward" : "context_states_forward";
  OpScope scope(ctx, OpPhase::ssd_scan, op);
  Chain c = chain_of(in, decay, seq, rank, out, op);
#if NEMOTRON_CUDA
  if (in.device().is_cuda()) {
    expect_dtype(in, DType::f32, "context_states on CUDA");
    ContextStatesCudaArgs a{static_cast<const float*>(in.raw()), static_cast<const float*>(decay.raw()),
                            seq.defined() ? static_cast<const int32_t*>(seq.raw()) : nullptr,
                            static_cast<float*>(out.raw()), c.C, c.B, c.nH, c.S, c.L, rank};
    NM_CUDA_CHECK(backward ? context_states_backward_cuda(a, cuda::cuda_stream(ctx))
                           : context_states_forward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(in, op);
  c.seq = seq.defined() ? seq.data<int32_t>() : nullptr;
  dispatch_float(in.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (backward) backward_ref<T>(c, in.data<T>(), decay.data<T>(), out.data<T>());
    else forward_ref<T>(c, in.data<T>(), decay.data<T>(), out.data<T>());
  });
}

}  // namespace

void chunk_decay(Context& ctx, const Tensor& dt, const Tensor& A, Tensor& decay) {
  OpScope scope(ctx, OpPhase::ssd_scan, __func__);
  NM_CHECK(dt.rank() == 3, "chunk_decay: dt must be [R, L, nH], got {}", dt.shape().str());
  const int64_t R = dt.dim(0), L = dt.dim(1), nH = dt.dim(2);
  expect_shape(A, {nH}, "chunk_decay A");
  expect_shape(decay, {R, nH}, "chunk_decay decay");
  expect_dtype(A, dt.dtype(), "chunk_decay A");
  expect_dtype(decay, dt.dtype(), "chunk_decay decay");
#if NEMOTRON_CUDA
  if (dt.device().is_cuda()) {
    expect_dtype(dt, DType::f32, "chunk_decay dt on CUDA");
    NM_CUDA_CHECK(chunk_decay_cuda(static_cast<const float*>(dt.raw()), static_cast<const float*>(A.raw()),
                                   static_cast<float*>(decay.raw()), R, L, nH, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(dt, "chunk_decay");
  dispatch_float(dt.dtype(), "chunk_decay", [&](auto zero) {
    using T = decltype(zero);
    const T *d = dt.data<T>(), *a = A.data<T>();
    T* out = decay.data<T>();
    for (int64_t r = 0; r < R; ++r)
      for (int64_t h = 0; h < nH; ++h) {
        T sum = 0;
        for (int64_t t = 0; t < L; ++t) sum += d[(r * L + t) * nH + h];
        out[r * nH + h] = std::exp(a[h] * sum);
      }
  });
}

void context_states_forward(Context& ctx, const Tensor& F, const Tensor& decay, const Tensor& seq, int rank,
                            Tensor& incoming) {
  compose(ctx, F, decay, seq, rank, incoming, false);
}

void context_states_backward(Context& ctx, const Tensor& d0, const Tensor& decay, const Tensor& seq, int rank,
                             Tensor& d_final) {
  compose(ctx, d0, decay, seq, rank, d_final, true);
}

}  // namespace nemotron::ops
