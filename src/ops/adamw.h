// AdamW with decoupled weight decay over a list of parameters, and the global gradient norm, as
// multi-tensor ops: the list is fixed at construction (on CUDA a device table of pointers and a
// flat work list of (tensor, chunk) items is built then), and each call is one launch over all of
// it. Per element, with t the step count (from 1), wd 0 for tensors without decay, and g the
// stored gradient times grad_scale (the clipping factor, applied here instead of in a pass of its own):
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   w -= lr (m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + wd w)
// w is the truth: the float32 master when the parameter has one (its bf16 value is then written
// as bf16(master) in the same pass), else the value itself (float32 or float64). Moments and
// gradients are in grad_dtype(value) (float32 for bf16 values).
#pragma once
#include <memory>
#include <vector>

#include "core/context.h"

namespace nemotron::ops {

struct AdamWParam {
  Tensor value;
  Tensor master;  // float32 master of a bf16 value, or undefined
  Tensor grad;
  Tensor m, v;    // undefined in a list used only for gradient norms
  bool weight_decay = true;
};

struct AdamWHyper {
  double lr = 0, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0;
  int64_t step = 1;  // the step being taken (bias corrections), from 1
  double grad_scale = 1;  // multiplies every gradient as it is read (gradient clipping)
};

class AdamWTensors {
 public:
  explicit AdamWTensors(std::vector<AdamWParam> params);
  ~AdamWTensors();
  AdamWTensors(AdamWTensors&&) noexcept;
  AdamWTensors& operator=(AdamWTensors&&) noexcept;
  const std::vector<AdamWParam>& params() const { return params_; }
  struct Device;  // the CUDA table (defined in adamw_cpu.cpp)

 private:
  friend void adamw_update(Context&, AdamWTensors&, const AdamWHyper&);
  friend double grad_norm(Context&, const AdamWTensors&);
  friend void scale_grads(Context&, AdamWTensors&, double);
  std::vector<AdamWParam> params_;
  std::unique_ptr<Device> device_;
};

// One AdamW step over every parameter of the list.
void adamw_update(Context& ctx, AdamWTensors& list, const AdamWHyper& h);
// sqrt(sum of g^2 over every gradient of the list); on CUDA a deterministic two-stage reduction
// with one read back to the host.
double grad_norm(Context& ctx, const AdamWTensors& list);
// g *= s for every gradient of the list.
void scale_grads(Context& ctx, AdamWTensors& list, double s);

}  // namespace nemotron::ops
