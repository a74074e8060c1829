// CPU reference for the recurrent SSM update: per (sequence, head) the plain recurrence over its
// new tokens on the slot's state, in place.
#include <initializer_list>
#include <cmath>
#include <vector>

#include "backend/cpu/parallel.h"
#include "core/op_profiler.h"
#include "ops/decode_support.h"
#include "ops/dispatch.h"
#include "ops/ssd_decode.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/ssd_decode_cuda.h"
#endif

namespace nemotron::ops {

namespace {

struct Dims {
  int64_t nH, P, G, N;
};

template <class T>
void step_ref(const Dims& d, int64_t t0, int64_t t1, int64_t h, const T* x, const T* dt, const T* A, const T* Bm,
              const T* Cm, const T* D, T* S, T* y) {
  const int64_t g = h / (d.nH / d.G);
  for (int64_t t = t0; t < t1; ++t) {
    const T delta = dt[t * d.nH + h], decay = std::exp(delta * A[h]);
    const T* xr = x + (t * d.nH + h) * d.P;
    const T* b = Bm + (t * d.G + g) * d.N;
    const T* c = Cm + (t * d.G + g) * d.N;
    T* yr = y + (t * d.nH + h) * d.P;
    for (int64_t p = 0; p < d.P; ++p) {
      T* s = S + p * d.N;
      T acc = 0;
      for (int64_t n = 0; n < d.N; ++n) {
        s[n] = decay * s[n] + delta * xr[p] * b[n];
        acc += s[n] * c[n];
      }
      yr[p] = acc + D[h] * xr[p];
    }
  }
}

}  // namespace

void ssd_decode(Context& ctx, const SsdDecodeArgs& a, Tensor& state, Tensor& y) {
  OpScope scope(ctx, OpPhase::ssd_scan, __func__);
  const char* op = "ssd_decode";
  NM_CHECK(state.rank() == 4, "{}: state must be [slots, nH, P, N], got {}", op, state.shape().str());
  const int64_t slots = state.dim(0);
  Dims d{state.dim(1), state.dim(2), 0, state.dim(3)};
  NM_CHECK(a.x.rank() == 3 && a.x.dim(1) == d.nH && a.x.dim(2) == d.P, "{}: x must be [Ntot, {}, {}], got {}", op, d.nH,
           d.P, a.x.shape().str());
  const int64_t Ntot = a.x.dim(0);
  NM_CHECK(a.Bm.rank() == 3 && a.Bm.dim(0) == Ntot && a.Bm.dim(2) == d.N && a.Bm.dim(1) > 0 && d.nH % a.Bm.dim(1) == 0,
           "{}: Bm must be [{}, G, {}] with G dividing {}, got {}", op, Ntot, d.N, d.nH, a.Bm.shape().str());
  d.G = a.Bm.dim(1);
  expect_shape(a.Cm, a.Bm.shape(), op);
  expect_shape(a.dt, {Ntot, d.nH}, op);
  expect_shape(a.A, {d.nH}, op);
  expect_shape(a.D, {d.nH}, op);
  expect_shape(y, a.x.shape(), op);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&a.Bm, &a.Cm, &a.D, &y}) expect_dtype(*t, a.x.dtype(), op);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&a.dt, &a.A, &state}) expect_dtype(*t, stat_dtype(a.x.dtype()), op);
#if NEMOTRON_CUDA
  if (a.x.device().is_cuda()) {
    NM_CHECK(a.x.dtype() == DType::f32 || a.x.dtype() == DType::bf16, "{} on CUDA: float32 or bfloat16, got {}", op,
             dtype_name(a.x.dtype()));
    NM_CHECK(d.N <= kSsdDecodeCudaMaxN, "{} on CUDA: state size {} over the kernel's {}", op, d.N, kSsdDecodeCudaMaxN);
    for (const Tensor* t : std::initializer_list<const Tensor*>{&a.Bm, &a.Cm, &a.D, &y})
      require_cuda_decode(*t, a.x.dtype(), "x, Bm, Cm, D, y", op);
    for (const Tensor* t : std::initializer_list<const Tensor*>{&a.dt, &a.A, &state})
      require_cuda_decode(*t, DType::f32, "dt, A, state", op);
    require_cuda_decode(a.slot_ids, DType::i32, "slot_ids", op);
    require_cuda_decode(a.cu_seqlens, DType::i32, "cu_seqlens", op);
    // Sizes from shapes only: the index values stay on the device (no host sync per layer).
    NM_CHECK(a.cu_seqlens.rank() == 1 && a.cu_seqlens.dim(0) >= 1, "{}: cu_seqlens must be int32 [S+1], got {}", op,
             a.cu_seqlens.describe());
    const int64_t S = a.cu_seqlens.dim(0) - 1;
    NM_CHECK(S > 0 || Ntot == 0, "{}: cu_seqlens names no sequence for {} new tokens", op, Ntot);
    NM_CHECK(a.slot_ids.numel() == S, "{}: slot_ids must be int32 [{}], got {}", op, S, a.slot_ids.describe());
    SsdDecodeCudaArgs c;
    c.x = a.x.raw(), c.dt = static_cast<const float*>(a.dt.raw()), c.A = static_cast<const float*>(a.A.raw());
    c.Bm = a.Bm.raw(), c.Cm = a.Cm.raw(), c.D = a.D.raw(), c.state = static_cast<float*>(state.raw()), c.y = y.raw();
    c.slot_ids = static_cast<const int32_t*>(a.slot_ids.raw()), c.cu_seqlens = static_cast<const int32_t*>(a.cu_seqlens.raw());
    c.S = S, c.nH = d.nH, c.P = d.P, c.G = d.G, c.N = d.N, c.slots = slots, c.bf16 = a.x.dtype() == DType::bf16;
    NM_CUDA_CHECK(ssd_decode_cuda(c, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  for (const Tensor* t : std::initializer_list<const Tensor*>{&a.x, &a.dt, &a.A, &a.Bm, &a.Cm, &a.D, &state, &y}) require_cpu_decode(*t, op);
  std::vector<int32_t> cu = decode_offsets(a.cu_seqlens, Ntot, op);
  const int64_t S = static_cast<int64_t>(cu.size()) - 1;
  std::vector<int32_t> slot = decode_index_vector(a.slot_ids, S, "slot_ids", op);
  std::vector<char> used(static_cast<size_t>(slots), 0);
  for (int64_t i = 0; i < S; ++i) {
    NM_CHECK(slot[i] >= 0 && slot[i] < slots, "{}: slot_ids[{}] = {} outside {} slots", op, i, slot[i], slots);
    NM_CHECK(!used[slot[i]], "{}: slot {} appears twice in one call", op, slot[i]);
    used[slot[i]] = 1;
  }
  dispatch_float(a.x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    const int64_t state_size = d.P * d.N;
    cpu::parallel_for(S * d.nH, [&](int64_t ih) {
      const int64_t i = ih / d.nH, h = ih % d.nH;
      step_ref<T>(d, cu[i], cu[i + 1], h, a.x.data<T>(), a.dt.data<T>(), a.A.data<T>(), a.Bm.data<T>(), a.Cm.data<T>(),
                  a.D.data<T>(), state.data<T>() + (slot[i] * d.nH + h) * state_size, y.data<T>());
    });
  });
}

}  // namespace nemotron::ops
