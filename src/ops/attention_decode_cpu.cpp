// CPU reference for paged decode attention: per (new token, query head) one pass over its keys,
// scores kept, softmax with the running maximum subtracted, then the weighted sum of values.
#include <initializer_list>
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/parallel.h"
#include "ops/attention_decode.h"
#include "core/op_profiler.h"
#include "ops/decode_support.h"
#include "ops/dispatch.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/attention_decode_cuda.h"
#endif

namespace nemotron::ops {

namespace {

struct Dims {
  int64_t Ntot, nq, nkv, hd, bs, M;
};

template <class T>
void decode_ref(const Dims& d, const T* q, const T* kc, const T* vc, const int32_t* table, const int32_t* seq_of,
                const int32_t* pos_of, T* o) {
  const int64_t group = d.nq / d.nkv;
  const T scale = T(1) / std::sqrt(static_cast<T>(d.hd));
  cpu::parallel_for(d.Ntot * d.nq, [&](int64_t nh) {
    const int64_t n = nh / d.nq, h = nh % d.nq, j = h / group;
    const int32_t* blocks = table + static_cast<int64_t>(seq_of[n]) * d.M;
    const int64_t keys = pos_of[n] + 1;
    const T* qr = q + nh * d.hd;
    std::vector<T> s(static_cast<size_t>(keys));
    T mx = -std::numeric_limits<T>::infinity();
    auto row = [&](int64_t p) { return ((static_cast<int64_t>(blocks[p / d.bs]) * d.bs + p % d.bs) * d.nkv + j) * d.hd; };
    for (int64_t p = 0; p < keys; ++p) {
      const T* kr = kc + row(p);
      T acc = 0;
      for (int64_t e = 0; e < d.hd; ++e) acc += qr[e] * kr[e];
      s[p] = acc * scale;
      mx = std::max(mx, s[p]);
    }
    T sum = 0;
    for (int64_t p = 0; p < keys; ++p) sum += (s[p] = std::exp(s[p] - mx));
    T* orow = o + nh * d.hd;
    std::fill(orow, orow + d.hd, T(0));
    for (int64_t p = 0; p < keys; ++p) {
      const T* vr = vc + row(p);
      const T w = s[p] / sum;
      for (int64_t e = 0; e < d.hd; ++e) orow[e] += w * vr[e];
    }
  }, std::max<int64_t>(1, 4096 / (d.hd * 8)));
}

}  // namespace

void attention_decode_forward(Context& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                              const PagedAttentionMeta& meta, Tensor& o) {
  OpScope scope(ctx, OpPhase::attention, __func__);
  const char* op = "attention_decode";
  NM_CHECK(k_cache.rank() == 4, "{}: k_cache must be [num_blocks, block_size, nkv, hd], got {}", op,
           k_cache.shape().str());
  expect_shape(v_cache, k_cache.shape(), op);
  const int64_t nkv = k_cache.dim(2), hd = k_cache.dim(3);
  NM_CHECK(q.rank() == 3 && q.dim(2) == hd && q.dim(1) % nkv == 0, "{}: q must be [Ntot, nq, {}] with nq a multiple of {}, got {}",
           op, hd, nkv, q.shape().str());
  expect_shape(o, q.shape(), op);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&k_cache, &v_cache, &o}) expect_dtype(*t, q.dtype(), op);
#if NEMOTRON_CUDA
  if (q.device().is_cuda()) {
    NM_CHECK(q.dtype() == DType::f32 || q.dtype() == DType::bf16, "{} on CUDA: float32 or bfloat16, got {}", op,
             dtype_name(q.dtype()));
    NM_CHECK(hd <= kAttentionDecodeCudaMaxHd, "{} on CUDA: head dim {} over the kernel's {}", op, hd,
             kAttentionDecodeCudaMaxHd);
    for (const Tensor* t : std::initializer_list<const Tensor*>{&k_cache, &v_cache, &o})
      require_cuda_decode(*t, q.dtype(), "every float tensor", op);
    require_cuda_decode(meta.cu_seqlens, DType::i32, "cu_seqlens", op);
    require_cuda_decode(meta.context_lens, DType::i32, "context_lens", op);
    require_cuda_decode(meta.block_table, DType::i32, "block_table", op);
    // Sizes from shapes only: the index values stay on the device (no host sync per layer).
    NM_CHECK(meta.cu_seqlens.rank() == 1 && meta.cu_seqlens.dim(0) >= 1, "{}: cu_seqlens must be int32 [S+1], got {}", op,
             meta.cu_seqlens.describe());
    const int64_t S = meta.cu_seqlens.dim(0) - 1;
    NM_CHECK(S > 0 || q.dim(0) == 0, "{}: cu_seqlens names no sequence for {} new tokens", op, q.dim(0));
    NM_CHECK(meta.context_lens.numel() == S, "{}: context_lens must be int32 [{}], got {}", op, S, meta.context_lens.describe());
    NM_CHECK(meta.block_table.rank() == 2 && meta.block_table.dim(0) == S, "{}: block_table must be int32 [{}, M], got {}",
             op, S, meta.block_table.describe());
    AttentionDecodeCudaArgs a;
    a.q = q.raw(), a.k_cache = k_cache.raw(), a.v_cache = v_cache.raw(), a.o = o.raw();
    a.block_table = static_cast<const int32_t*>(meta.block_table.raw());
    a.cu_seqlens = static_cast<const int32_t*>(meta.cu_seqlens.raw());
    a.context_lens = static_cast<const int32_t*>(meta.context_lens.raw());
    a.Ntot = q.dim(0), a.S = S, a.nq = q.dim(1), a.nkv = nkv, a.hd = hd, a.bs = k_cache.dim(1);
    a.M = meta.block_table.dim(1), a.num_blocks = k_cache.dim(0), a.bf16 = q.dtype() == DType::bf16;
    Tensor workspace;
    if (const int64_t floats = attention_decode_cuda_workspace(a); floats > 0) {
      workspace = ctx.empty({floats}, DType::f32);
      a.workspace = static_cast<float*>(workspace.raw());
    }
    NM_CUDA_CHECK(attention_decode_forward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  for (const Tensor* t : std::initializer_list<const Tensor*>{&q, &k_cache, &v_cache, &o}) require_cpu_decode(*t, op);
  Dims d{q.dim(0), q.dim(1), nkv, hd, k_cache.dim(1), 0};
  std::vector<int32_t> cu = decode_offsets(meta.cu_seqlens, d.Ntot, op);
  const int64_t S = static_cast<int64_t>(cu.size()) - 1;
  std::vector<int32_t> len = decode_index_vector(meta.context_lens, S, "context_lens", op);
  NM_CHECK(meta.block_table.defined() && meta.block_table.rank() == 2 && meta.block_table.dim(0) == S &&
               meta.block_table.dtype() == DType::i32,
           "{}: block_table must be int32 [{}, M], got {}", op, S,
           meta.block_table.defined() ? meta.block_table.describe() : std::string("undefined"));
  d.M = meta.block_table.dim(1);
  const int32_t* table = meta.block_table.data<int32_t>();
  // Per new token: its sequence and position (validated here once, so the loop reads no bounds).
  std::vector<int32_t> seq_of(static_cast<size_t>(d.Ntot)), pos_of(seq_of.size());
  for (int64_t i = 0; i < S; ++i) {
    const int64_t n = cu[i + 1] - cu[i];
    NM_CHECK(len[i] >= n && (len[i] + d.bs - 1) / d.bs <= d.M, "{}: sequence {}: {} cached tokens for {} new ones and {} blocks",
             op, i, len[i], n, d.M);
    for (int64_t b = 0; b < (len[i] + d.bs - 1) / d.bs; ++b)
      NM_CHECK(table[i * d.M + b] >= 0 && table[i * d.M + b] < k_cache.dim(0), "{}: block_table[{}, {}] = {} outside {} blocks",
               op, i, b, table[i * d.M + b], k_cache.dim(0));
    for (int64_t j = 0; j < n; ++j) seq_of[cu[i] + j] = static_cast<int32_t>(i), pos_of[cu[i] + j] = static_cast<int32_t>(len[i] - n + j);
  }
  dispatch_float(q.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    decode_ref<T>(d, q.data<T>(), k_cache.data<T>(), v_cache.data<T>(), table, seq_of.data(), pos_of.data(), o.data<T>());
  });
}

}  // namespace nemotron::ops
