// qkv_rope_cache_write: the shapes checked once, then the CUDA kernel, or on the CPU the ops it
// fuses, in the order the attention layer ran them (the CPU result is theirs exactly).
#include <initializer_list>

#include "core/op_profiler.h"
#include "ops/decode_support.h"
#include "ops/fused_projection.h"
#include "ops/kv_cache_decode.h"
#include "ops/qkv_rope_cache.h"
#include "ops/rope.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/qkv_rope_cache_cuda.h"
#endif

namespace nemotron::ops {

void qkv_rope_cache_write(Context& ctx, const Tensor& qkv, const RopeFreq* freq, const Tensor& position_ids,
                          const Tensor& slot_mapping, Tensor& q, Tensor& k_cache, Tensor& v_cache) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  const char* op = "qkv_rope_cache_write";
  NM_CHECK(k_cache.rank() == 4, "{}: k_cache must be [num_blocks, block_size, nkv, hd], got {}", op,
           k_cache.shape().str());
  expect_shape(v_cache, k_cache.shape(), op);
  const int64_t nkv = k_cache.dim(2), hd = k_cache.dim(3);
  NM_CHECK(qkv.rank() == 2 && qkv.dim(1) > 2 * nkv * hd && (qkv.dim(1) - 2 * nkv * hd) % hd == 0,
           "{}: qkv must be [Ntot, (nq + 2 x {}) x {}], got {}", op, nkv, hd, qkv.shape().str());
  const int64_t n = qkv.dim(0), nq = qkv.dim(1) / hd - 2 * nkv;
  NM_CHECK(q.numel() == n * nq * hd, "{}: q must hold [{}, {}, {}], got {}", op, n, nq, hd, q.shape().str());
  NM_CHECK(position_ids.defined() && position_ids.numel() == n && position_ids.dtype() == DType::i32,
           "{}: position_ids must be int32 [{}], got {}", op, n,
           position_ids.defined() ? position_ids.describe() : std::string("undefined"));
  NM_CHECK(!freq || hd % 2 == 0, "{}: RoPE needs an even head dim, got {}", op, hd);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&q, &k_cache, &v_cache}) expect_dtype(*t, qkv.dtype(), op);
#if NEMOTRON_CUDA
  if (qkv.device().is_cuda()) {
    NM_CHECK(qkv.dtype() == DType::f32 || qkv.dtype() == DType::bf16, "{} on CUDA: float32 or bfloat16, got {}", op,
             dtype_name(qkv.dtype()));
    NM_CHECK(hd % 2 == 0, "{} on CUDA: the kernel moves pairs (i, i + hd/2): head dim {} is odd", op, hd);
    for (const Tensor* t : std::initializer_list<const Tensor*>{&q, &k_cache, &v_cache})
      require_cuda_decode(*t, qkv.dtype(), "every float tensor", op);
    require_cuda_decode(position_ids, DType::i32, "position_ids", op);
    require_cuda_decode(slot_mapping, DType::i32, "slot_mapping", op);
    NM_CHECK(slot_mapping.numel() == n, "{}: slot_mapping must be int32 [{}], got {}", op, n, slot_mapping.describe());
    QkvRopeCacheCudaArgs a;
    a.qkv = qkv.raw(), a.q = q.raw(), a.k_cache = k_cache.raw(), a.v_cache = v_cache.raw();
    a.position_ids = static_cast<const int32_t*>(position_ids.raw());
    a.slot_mapping = static_cast<const int32_t*>(slot_mapping.raw());
    a.n = n, a.nq = nq, a.nkv = nkv, a.hd = hd, a.rows = k_cache.dim(0) * k_cache.dim(1);
    a.rope = freq != nullptr, a.bf16 = qkv.dtype() == DType::bf16;
    if (freq) a.freq = *freq;
    NM_CUDA_CHECK(qkv_rope_cache_write_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  Tensor q4 = q.view({1, n, nq, hd});
  Tensor k = ctx.empty({1, n, nkv, hd}, qkv.dtype()), v = ctx.empty({1, n, nkv, hd}, qkv.dtype());
  Tensor blocks[] = {q4.view({n, nq * hd}), k.view({n, nkv * hd}), v.view({n, nkv * hd})};
  split_columns(ctx, qkv, blocks);
  if (freq) {
    const Tensor pos = position_ids.view({1, n});
    rope_forward(ctx, q4, *freq, q4, 0, pos);
    rope_forward(ctx, k, *freq, k, 0, pos);
  }
  kv_cache_write_decode(ctx, k.view({n, nkv, hd}), slot_mapping, k_cache);
  kv_cache_write_decode(ctx, v.view({n, nkv, hd}), slot_mapping, v_cache);
}

}  // namespace nemotron::ops
