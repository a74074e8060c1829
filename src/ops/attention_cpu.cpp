// CPU reference for causal GQA attention: per (batch, head, block of query rows) one GEMM for the
// scores, a masked softmax, one GEMM for the values. Memory stays O(block x T) per work item.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/blas.h"
#include "backend/cpu/parallel.h"
#include "core/op_profiler.h"
#include "ops/attention.h"
#include "ops/dispatch.h"
#include "ops/seq_idx.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/attention_cuda.h"
#endif

namespace nemotron::ops {

namespace {

constexpr int64_t kQueryBlock = 64;      // query rows per work item
constexpr int64_t kMinFlopsPerThread = 1 << 20;  // below this a thread costs more than it saves

// Work items per thread so that tiny shapes (gradient checks, decode) stay on one thread.
int64_t min_items_per_thread(double flops_per_item) {
  return std::max<int64_t>(1, static_cast<int64_t>(kMinFlopsPerThread / std::max(1.0, flops_per_item)));
}

// Head h of batch b starts at (b*T)*qs + h*hd; consecutive tokens are qs = nq*hd apart (ks for k/v).
// start[r] = first key row query i0 + r may see: its sequence's first token (0 without seq_idx).
void key_starts(const int32_t* seq, int64_t i0, int64_t rows, int64_t* start) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = i0 + r;
    start[r] = r == 0 ? sequence_start(seq, i) : (seq[i] == seq[i - 1] ? start[r - 1] : i);
  }
}

// seq: this call's seq_idx [B, Tk] or null (one sequence per row). Query row i sits at key
// position i + off (off = Tk - T: the rows are the last T of the keys' sequence).
template <class T>
void forward_ref(const AttentionDims& d, const T* q, const T* k, const T* v, T* o, T* lse, const int32_t* seq) {
  const int64_t qs = d.nq * d.hd, ks = d.nkv * d.hd, g = d.group(), off = d.offset();
  const T scale = T(1) / std::sqrt(static_cast<T>(d.hd));
  const int64_t nblk = (d.T + kQueryBlock - 1) / kQueryBlock;
  cpu::parallel_for(d.B * d.nq * nblk, [&](int64_t w) {
    const int64_t blk = w % nblk, h = (w / nblk) % d.nq, b = w / (nblk * d.nq), j = h / g;
    const int64_t i0 = blk * kQueryBlock, i1 = std::min(d.T, i0 + kQueryBlock), rows = i1 - i0;
    const T* Q = q + (b * d.T + i0) * qs + h * d.hd;
    const T* K = k + b * d.Tk * ks + j * d.hd;
    const T* V = v + b * d.Tk * ks + j * d.hd;
    T* O = o + (b * d.T + i0) * qs + h * d.hd;
    T* L = lse + (b * d.nq + h) * d.T;
    // Keys beyond the block's last query row are all masked, so only n = off + i1 columns are needed.
    const int64_t n = off + i1;
    std::vector<T> S(static_cast<size_t>(rows * n));
    std::vector<int64_t> start(static_cast<size_t>(rows), 0);
    if (seq) key_starts(seq + b * d.Tk, off + i0, rows, start.data());
    cpu::gemm<T>(false, true, rows, n, d.hd, scale, Q, qs, K, ks, T(0), S.data(), n);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = off + i0 + r, s0 = start[r];
      T* row = S.data() + r * n;
      T m = row[s0];
      for (int64_t s = s0 + 1; s <= i; ++s) m = std::max(m, row[s]);
      T sum = 0;
      for (int64_t s = 0; s < s0; ++s) row[s] = 0;
      for (int64_t s = s0; s <= i; ++s) sum += (row[s] = std::exp(row[s] - m));
      for (int64_t s = i + 1; s < n; ++s) row[s] = 0;
      for (int64_t s = s0; s <= i; ++s) row[s] /= sum;
      L[i0 + r] = m + std::log(sum);
    }
    cpu::gemm<T>(false, false, rows, d.hd, n, T(1), S.data(), n, V, ks, T(0), O, qs);
  }, min_items_per_thread(4.0 * static_cast<double>(std::min(d.T, kQueryBlock) * d.Tk * d.hd)));
}

// dS = P (dP - D), D = rowsum(dO o O); dQ = scale dS K; dK = scale dS^T Q; dV = P^T dO.
// One work item per (batch, KV head) owns dK/dV of that head, so the group's query heads
// accumulate into them in a fixed order without races.
template <class T>
void backward_ref(const AttentionDims& d, const T* q, const T* k, const T* v, const T* o, const T* lse, const T* dout,
                  T* dq, T* dk, T* dv, const int32_t* seq) {
  const int64_t qs = d.nq * d.hd, ks = d.nkv * d.hd, g = d.group(), off = d.offset();
  const T scale = T(1) / std::sqrt(static_cast<T>(d.hd));
  cpu::parallel_for(d.B * d.nkv, [&](int64_t w) {
    const int64_t b = w / d.nkv, j = w % d.nkv;
    const T* K = k + b * d.Tk * ks + j * d.hd;
    const T* V = v + b * d.Tk * ks + j * d.hd;
    T* dK = dk + b * d.Tk * ks + j * d.hd;
    T* dV = dv + b * d.Tk * ks + j * d.hd;
    for (int64_t t = 0; t < d.Tk; ++t) {
      std::fill(dK + t * ks, dK + t * ks + d.hd, T(0));
      std::fill(dV + t * ks, dV + t * ks + d.hd, T(0));
    }
    std::vector<T> P(static_cast<size_t>(std::min(d.T, kQueryBlock) * d.Tk));
    std::vector<T> dS(P.size()), D(static_cast<size_t>(kQueryBlock));
    std::vector<int64_t> start(static_cast<size_t>(kQueryBlock), 0);
    for (int64_t h = j * g; h < (j + 1) * g; ++h) {
      const T* L = lse + (b * d.nq + h) * d.T;
      for (int64_t i0 = 0; i0 < d.T; i0 += kQueryBlock) {
        const int64_t i1 = std::min(d.T, i0 + kQueryBlock), rows = i1 - i0, n = off + i1;
        const T* Q = q + (b * d.T + i0) * qs + h * d.hd;
        const T* O = o + (b * d.T + i0) * qs + h * d.hd;
        const T* dO = dout + (b * d.T + i0) * qs + h * d.hd;
        T* dQ = dq + (b * d.T + i0) * qs + h * d.hd;
        if (seq) key_starts(seq + b * d.Tk, off + i0, rows, start.data());
        cpu::gemm<T>(false, true, rows, n, d.hd, scale, Q, qs, K, ks, T(0), P.data(), n);
        cpu::gemm<T>(false, true, rows, n, d.hd, T(1), dO, qs, V, ks, T(0), dS.data(), n);
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = off + i0 + r, s0 = start[r];
          T Dr = 0;
          for (int64_t c = 0; c < d.hd; ++c) Dr += dO[r * qs + c] * O[r * qs + c];
          T* pr = P.data() + r * n;
          T* sr = dS.data() + r * n;
          for (int64_t s = 0; s < s0; ++s) pr[s] = sr[s] = 0;
          for (int64_t s = s0; s <= i; ++s) {
            pr[s] = std::exp(pr[s] - L[i0 + r]);
            sr[s] = pr[s] * (sr[s] - Dr);
          }
          for (int64_t s = i + 1; s < n; ++s) pr[s] = sr[s] = 0;
        }
        cpu::gemm<T>(false, false, rows, d.hd, n, scale, dS.data(), n, K, ks, T(0), dQ, qs);
        cpu::gemm<T>(true, false, n, d.hd, rows, scale, dS.data(), n, Q, qs, T(1), dK, ks);
        cpu::gemm<T>(true, false, n, d.hd, rows, T(1), P.data(), n, dO, qs, T(1), dV, ks);
      }
    }
  }, min_items_per_thread(5.0 * static_cast<double>(g * d.T * d.Tk * d.hd)));
}

#if NEMOTRON_CUDA
AttentionCudaArgs cuda_args(const AttentionDims& d, const Tensor& q, const Tensor& k, const Tensor& v,
                            const Tensor& seq_idx) {
  NM_CHECK(q.dtype() == DType::f32 || q.dtype() == DType::bf16, "attention on CUDA: float32 or bfloat16, got {}",
           dtype_name(q.dtype()));
  NM_CHECK(d.hd >= 1 && d.hd <= attention_cuda_max_hd, "attention on CUDA: head_dim hd = {} is not supported (1..{})",
           d.hd, attention_cuda_max_hd);
  AttentionCudaArgs a;
  a.q = q.raw(), a.k = k.raw(), a.v = v.raw();
  a.B = d.B, a.T = d.T, a.Tk = d.Tk, a.nq = d.nq, a.nkv = d.nkv, a.hd = d.hd, a.bf16 = q.dtype() == DType::bf16;
  a.seq_idx = seq_idx.defined() ? static_cast<const int32_t*>(seq_idx.raw()) : nullptr;
  return a;
}
#endif

}  // namespace

AttentionDims attention_dims(const Tensor& q, const Tensor& k, const Tensor& v) {
  NM_CHECK(q.rank() == 4, "attention: q must be [B, T, nq, hd], got {}", q.shape().str());
  NM_CHECK(k.rank() == 4, "attention: k must be [B, Tk, nkv, hd], got {}", k.shape().str());
  AttentionDims d{q.dim(0), q.dim(1), q.dim(2), k.dim(2), q.dim(3), k.dim(1)};
  NM_CHECK(d.nkv > 0 && d.nq % d.nkv == 0, "attention: {} query heads cannot share k {}", d.nq, k.shape().str());
  NM_CHECK(d.Tk >= d.T, "attention: {} query rows but only {} keys (queries are the keys' last rows)", d.T, d.Tk);
  expect_shape(k, {d.B, d.Tk, d.nkv, d.hd}, "attention k");
  expect_shape(v, {d.B, d.Tk, d.nkv, d.hd}, "attention v");
  NM_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(), "attention: mixed dtypes q {} k {} v {}",
           q.describe(), k.describe(), v.describe());
  return d;
}

void attention_forward(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& o, Tensor& lse,
                       const Tensor& seq_idx) {
  OpScope scope(ctx, OpPhase::attention, __func__);
  AttentionDims d = attention_dims(q, k, v);
  check_seq_idx(seq_idx, d.B, d.Tk, q, "attention_forward");
  expect_shape(o, q.shape(), "attention output");
  expect_shape(lse, {d.B, d.nq, d.T}, "attention lse");
  expect_dtype(o, q.dtype(), "attention output");
  expect_dtype(lse, stat_dtype(q.dtype()), "attention lse");
#if NEMOTRON_CUDA
  if (q.device().is_cuda()) {
    AttentionCudaArgs a = cuda_args(d, q, k, v, seq_idx);
    a.o = o.raw(), a.lse = static_cast<float*>(lse.raw());
    NM_CUDA_CHECK(attention_forward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  (void)ctx;
  require_cpu(q, "attention_forward");
  dispatch_float(q.dtype(), "attention_forward", [&](auto zero) {
    using T = decltype(zero);
    forward_ref<T>(d, q.data<T>(), k.data<T>(), v.data<T>(), o.data<T>(), lse.data<T>(), seq_idx_ptr(seq_idx));
  });
}

void attention_backward(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                        const Tensor& lse, const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv,
                        const Tensor& seq_idx) {
  OpScope scope(ctx, OpPhase::attention, __func__);
  AttentionDims d = attention_dims(q, k, v);
  check_seq_idx(seq_idx, d.B, d.Tk, q, "attention_backward");
  expect_shape(o, q.shape(), "attention output");
  expect_shape(lse, {d.B, d.nq, d.T}, "attention lse");
  expect_shape(dout, q.shape(), "attention dout");
  expect_shape(dq, q.shape(), "attention dq");
  expect_shape(dk, k.shape(), "attention dk");
  expect_shape(dv, v.shape(), "attention dv");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&o, &dout, &dq, &dk, &dv})
    expect_dtype(*t, q.dtype(), "attention backward tensor");
  expect_dtype(lse, stat_dtype(q.dtype()), "attention lse");
#if NEMOTRON_CUDA
  if (q.device().is_cuda()) {
    AttentionCudaArgs a = cuda_args(d, q, k, v, seq_idx);
    a.o = o.raw(), a.lse = static_cast<float*>(lse.raw());
    a.dout = dout.raw(), a.dq = dq.raw(), a.dk = dk.raw(), a.dv = dv.raw();
    NM_CUDA_CHECK(attention_backward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  (void)ctx;
  require_cpu(q, "attention_backward");
  dispatch_float(q.dtype(), "attention_backward", [&](auto zero) {
    using T = decltype(zero);
    backward_ref<T>(d, q.data<T>(), k.data<T>(), v.data<T>(), o.data<T>(), lse.data<T>(), dout.data<T>(),
                    dq.data<T>(), dk.data<T>(), dv.data<T>(), seq_idx_ptr(seq_idx));
  });
}

}  // namespace nemotron::ops
