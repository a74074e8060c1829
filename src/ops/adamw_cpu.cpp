#include <cmath>
#include <cstring>

#include "backend/cpu/parallel.h"
#include "core/host_waits.h"
#include "core/op_profiler.h"
#include "ops/adamw.h"
#include "ops/dispatch.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/optimizer_cuda.h"
#endif

namespace nemotron::ops {

// The device table of a list on CUDA: slots and work items as raw bytes in backend tensors.
struct AdamWTensors::Device {
  Tensor slots, work;
  int64_t items = 0;
};

namespace {

bool on_cuda(const std::vector<AdamWParam>& ps) { return !ps.empty() && ps.front().grad.device().is_cuda(); }

// Bytes of a vector of plain structs as an int64 host tensor (the structs are 8-byte multiples).
template <class S>
Tensor as_bytes(const std::vector<S>& v) {
  static_assert(sizeof(S) % 8 == 0);
  Tensor t = Tensor::empty({static_cast<int64_t>(std::max<size_t>(1, v.size() * sizeof(S) / 8))}, DType::i64);
  if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * sizeof(S));
  return t;
}

void check_param(const AdamWParam& p) {
  const Tensor& truth = p.master.defined() ? p.master : p.value;
  expect_shape(p.grad, p.value.shape(), "adamw grad");
  expect_dtype(p.grad, grad_dtype(truth.dtype()), "adamw grad");
  if (p.master.defined()) {
    expect_shape(p.master, p.value.shape(), "adamw master");
    expect_dtype(p.master, DType::f32, "adamw master");
  }
  for (const Tensor* t : {&p.m, &p.v}) {
    if (!t->defined()) continue;
    expect_shape(*t, p.value.shape(), "adamw moment");
    expect_dtype(*t, p.grad.dtype(), "adamw moment");
  }
}

#if NEMOTRON_CUDA
AdamWTensors::Device* build_device(const std::vector<AdamWParam>& ps) {
  std::vector<OptimizerSlot> slots;
  std::vector<OptimizerWork> work;
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  for (const AdamWParam& p : ps) {
    NM_CHECK(p.grad.device().is_cuda(), "adamw: every tensor of a CUDA list must be on CUDA, {} is not",
             p.grad.describe());
    OptimizerSlot s;
    if (p.master.defined()) {
      NM_CHECK(p.value.dtype() == DType::bf16, "adamw: a master belongs to a bf16 value, got {}", p.value.describe());
      s.truth = static_cast<float*>(p.master.raw()), s.value_bf16 = p.value.raw();
    } else {
      NM_CHECK(p.value.dtype() == DType::f32, "adamw on CUDA: a {} value needs a float32 master",
               dtype_name(p.value.dtype()));
      s.truth = static_cast<float*>(p.value.raw());
    }
    s.grad = static_cast<float*>(p.grad.raw());
    s.m = p.m.defined() ? static_cast<float*>(p.m.raw()) : nullptr;
    s.v = p.v.defined() ? static_cast<float*>(p.v.raw()) : nullptr;
    s.numel = p.value.numel();
    s.weight_decay = p.weight_decay ? 1.0f : 0.0f;  // scaled by the step's weight decay at launch
    s.vec4 = aligned(s.truth) && aligned(s.grad) && (!s.m || aligned(s.m)) && (!s.v || aligned(s.v)) &&
             (!s.value_bf16 || reinterpret_cast<uintptr_t>(s.value_bf16) % 8 == 0);
    for (int64_t b = 0; b < s.numel; b += kOptimizerChunk)
      work.push_back({static_cast<int64_t>(slots.size()), b});
    slots.push_back(s);
  }
  Backend& dev = ps.front().grad.backend();
  auto* d = new AdamWTensors::Device;
  d->slots = as_bytes(slots).to(dev);
  d->work = as_bytes(work).to(dev);
  d->items = static_cast<int64_t>(work.size());
  return d;
}
#endif

template <class T>
void adamw_ref(T* w, const T* g, T* m, T* v, int64_t n, const AdamWHyper& h, double wd) {
  const double bc1 = 1.0 - std::pow(h.beta1, static_cast<double>(h.step));
  const double bc2 = 1.0 - std::pow(h.beta2, static_cast<double>(h.step));
  const T b1 = static_cast<T>(h.beta1), b2 = static_cast<T>(h.beta2), gs = static_cast<T>(h.grad_scale);
  cpu::parallel_for(n, [&](int64_t i) {
    const T gi = gs * g[i];
    m[i] = b1 * m[i] + (T(1) - b1) * gi;
    v[i] = b2 * v[i] + (T(1) - b2) * gi * gi;
    T mhat = m[i] / static_cast<T>(bc1), vhat = v[i] / static_cast<T>(bc2);
    w[i] -= static_cast<T>(h.lr) * (mhat / (std::sqrt(vhat) + static_cast<T>(h.eps)) + static_cast<T>(wd) * w[i]);
  }, 4096);
}

}  // namespace

AdamWTensors::AdamWTensors(std::vector<AdamWParam> params) : params_(std::move(params)) {
  for (const AdamWParam& p : params_) check_param(p);
#if NEMOTRON_CUDA
  if (on_cuda(params_)) device_.reset(build_device(params_));
#endif
}
AdamWTensors::~AdamWTensors() = default;
AdamWTensors::AdamWTensors(AdamWTensors&&) noexcept = default;
AdamWTensors& AdamWTensors::operator=(AdamWTensors&&) noexcept = default;

void adamw_update(Context& ctx, AdamWTensors& list, const AdamWHyper& h) {
  OpScope scope(ctx, OpPhase::optimizer, __func__);
  NM_CHECK(h.step >= 1, "adamw: step {} (steps count from 1)", h.step);
  for (const AdamWParam& p : list.params_) NM_CHECK(p.m.defined() && p.v.defined(), "adamw: {} has no moments", p.value.describe());
#if NEMOTRON_CUDA
  if (list.device_) {
    AdamWCudaStep s;
    s.lr = static_cast<float>(h.lr), s.beta1 = static_cast<float>(h.beta1), s.beta2 = static_cast<float>(h.beta2);
    s.eps = static_cast<float>(h.eps);
    s.inv_bc1 = static_cast<float>(1.0 / (1.0 - std::pow(h.beta1, static_cast<double>(h.step))));
    s.inv_bc2 = static_cast<float>(1.0 / (1.0 - std::pow(h.beta2, static_cast<double>(h.step))));
    s.weight_decay = static_cast<float>(h.weight_decay);
    s.grad_scale = static_cast<float>(h.grad_scale);
    NM_CUDA_CHECK(adamw_cuda(static_cast<const OptimizerSlot*>(list.device_->slots.raw()),
                             static_cast<const OptimizerWork*>(list.device_->work.raw()), list.device_->items, s,
                             cuda::cuda_stream(ctx)));
    return;
  }
#endif
  (void)ctx;
  for (AdamWParam& p : list.params_) {
    Tensor& truth = p.master.defined() ? p.master : p.value;
    require_cpu(truth, "adamw");
    dispatch_float(truth.dtype(), "adamw", [&](auto zero) {
      using T = decltype(zero);
      adamw_ref<T>(truth.data<T>(), p.grad.data<T>(), p.m.data<T>(), p.v.data<T>(), truth.numel(), h,
                   p.weight_decay ? h.weight_decay : 0.0);
    });
    if (p.master.defined()) p.value.copy_from(p.master.to_host(p.value.dtype()));
  }
}

double grad_norm(Context& ctx, const AdamWTensors& list) {
  OpScope scope(ctx, OpPhase::optimizer, __func__);
#if NEMOTRON_CUDA
  if (list.device_) {
    double sq = 0;
    NM_CUDA_CHECK(grad_sum_sq_cuda(static_cast<const OptimizerSlot*>(list.device_->slots.raw()),
                                   static_cast<const OptimizerWork*>(list.device_->work.raw()), list.device_->items,
                                   &sq, cuda::cuda_stream(ctx)));
    note_host_wait();
    return std::sqrt(sq);
  }
#endif
  (void)ctx;
  double sq = 0;
  for (const AdamWParam& p : list.params_) {
    require_cpu(p.grad, "grad_norm");
    dispatch_float(p.grad.dtype(), "grad_norm", [&](auto zero) {
      using T = decltype(zero);
      const T* g = p.grad.data<T>();
      for (int64_t i = 0; i < p.grad.numel(); ++i) sq += static_cast<double>(g[i]) * static_cast<double>(g[i]);
    });
  }
  return std::sqrt(sq);
}

void scale_grads(Context& ctx, AdamWTensors& list, double s) {
  OpScope scope(ctx, OpPhase::optimizer, __func__);
#if NEMOTRON_CUDA
  if (list.device_) {
    NM_CUDA_CHECK(scale_grads_cuda(static_cast<const OptimizerSlot*>(list.device_->slots.raw()),
                                   static_cast<const OptimizerWork*>(list.device_->work.raw()), list.device_->items,
                                   static_cast<float>(s), cuda::cuda_stream(ctx)));
    return;
  }
#endif
  (void)ctx;
  for (AdamWParam& p : list.params_) {
    require_cpu(p.grad, "scale_grads");
    dispatch_float(p.grad.dtype(), "scale_grads", [&](auto zero) {
      using T = decltype(zero);
      T* g = p.grad.data<T>();
      for (int64_t i = 0; i < p.grad.numel(); ++i) g[i] *= static_cast<T>(s);
    });
  }
}

}  // namespace nemotron::ops
