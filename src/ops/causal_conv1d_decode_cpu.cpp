// CPU reference for the windowed causal conv: per sequence, the window and the new inputs joined
// into one buffer, the plain K-tap loop, then the last K-1 rows kept.
#include <initializer_list>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/parallel.h"
#include "ops/causal_conv1d_decode.h"
#include "core/op_profiler.h"
#include "ops/decode_support.h"
#include "ops/dispatch.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/causal_conv1d_decode_cuda.h"
#endif

namespace nemotron::ops {

namespace {

template <class T>
void conv_seq(int64_t n, int64_t C, int64_t K, const T* x, const T* w, const T* bias, T* state, T* y) {
  std::vector<T> buf(static_cast<size_t>((K - 1 + n) * C));
  std::copy(state, state + (K - 1) * C, buf.begin());
  std::copy(x, x + n * C, buf.begin() + (K - 1) * C);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < C; ++c) {
      T pre = bias ? bias[c] : T(0);
      for (int64_t k = 0; k < K; ++k) pre += w[c * K + k] * buf[(t + k) * C + c];
      y[t * C + c] = pre / (T(1) + std::exp(-pre));
    }
  std::copy(buf.end() - (K - 1) * C, buf.end(), state);
}

}  // namespace

void causal_conv1d_decode(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& state,
                          const Tensor& slot_ids, const Tensor& cu_seqlens, Tensor& y) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  const char* op = "causal_conv1d_decode";
  NM_CHECK(state.rank() == 3, "{}: state must be [slots, K-1, C], got {}", op, state.shape().str());
  const int64_t slots = state.dim(0), K = state.dim(1) + 1, C = state.dim(2);
  NM_CHECK(w.numel() == C * K && w.dim(0) == C, "{}: w must be [{}, {}] or [{}, 1, {}] for state {}, got {}", op, C, K, C,
           K, state.shape().str(), w.shape().str());
  NM_CHECK(!bias.defined() || bias.numel() == C, "{}: bias must be [{}], got {}", op, C, bias.shape().str());
  NM_CHECK(x.rank() >= 1 && x.shape()[x.rank() - 1] == C, "{}: x must be [Ntot, {}], got {}", op, C, x.shape().str());
  expect_shape(y, x.shape(), op);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&w, &state, &y}) expect_dtype(*t, x.dtype(), op);
  if (bias.defined()) expect_dtype(bias, x.dtype(), op);
  const int64_t Ntot = x.numel() / C;
#if NEMOTRON_CUDA
  if (x.device().is_cuda()) {
    NM_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::bf16, "{} on CUDA: float32 or bfloat16, got {}", op,
             dtype_name(x.dtype()));
    NM_CHECK(K <= kCausalConv1dDecodeCudaMaxK, "{} on CUDA: kernel width {} over the kernel's {}", op, K,
             kCausalConv1dDecodeCudaMaxK);
    for (const Tensor* t : std::initializer_list<const Tensor*>{&w, &bias, &state, &y})
      require_cuda_decode(*t, x.dtype(), "every float tensor", op);
    require_cuda_decode(slot_ids, DType::i32, "slot_ids", op);
    require_cuda_decode(cu_seqlens, DType::i32, "cu_seqlens", op);
    // Sizes from shapes only: the index values stay on the device (no host sync per layer).
    NM_CHECK(cu_seqlens.rank() == 1 && cu_seqlens.dim(0) >= 1, "{}: cu_seqlens must be int32 [S+1], got {}", op,
             cu_seqlens.describe());
    const int64_t S = cu_seqlens.dim(0) - 1;
    NM_CHECK(S > 0 || Ntot == 0, "{}: cu_seqlens names no sequence for {} new tokens", op, Ntot);
    NM_CHECK(slot_ids.numel() == S, "{}: slot_ids must be int32 [{}], got {}", op, S, slot_ids.describe());
    CausalConv1dDecodeCudaArgs a;
    a.x = x.raw(), a.w = w.raw(), a.bias = bias.defined() ? bias.raw() : nullptr, a.state = state.raw(), a.y = y.raw();
    a.slot_ids = static_cast<const int32_t*>(slot_ids.raw()), a.cu_seqlens = static_cast<const int32_t*>(cu_seqlens.raw());
    a.S = S, a.C = C, a.K = K, a.slots = slots, a.bf16 = x.dtype() == DType::bf16;
    NM_CUDA_CHECK(causal_conv1d_decode_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  for (const Tensor* t : std::initializer_list<const Tensor*>{&x, &w, &state, &y}) require_cpu_decode(*t, op);
  std::vector<int32_t> cu = decode_offsets(cu_seqlens, Ntot, op);
  const int64_t S = static_cast<int64_t>(cu.size()) - 1;
  std::vector<int32_t> slot = decode_index_vector(slot_ids, S, "slot_ids", op);
  std::vector<char> used(static_cast<size_t>(slots), 0);
  for (int64_t i = 0; i < S; ++i) {
    NM_CHECK(slot[i] >= 0 && slot[i] < slots, "{}: slot_ids[{}] = {} outside {} slots", op, i, slot[i], slots);
    NM_CHECK(!used[slot[i]], "{}: slot {} appears twice in one call", op, slot[i]);
    used[slot[i]] = 1;
  }
  dispatch_float(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    const T* b = bias.defined() ? bias.data<T>() : nullptr;
    cpu::parallel_for(S, [&](int64_t i) {
      conv_seq<T>(cu[i + 1] - cu[i], C, K, x.data<T>() + cu[i] * C, w.data<T>(), b,
                  state.data<T>() + slot[i] * (K - 1) * C, y.data<T>() + cu[i] * C);
    });
  });
}

}  // namespace nemotron::ops
