// AdamW with decoupled weight decay (Loshchilov & Hutter), as Megatron configures it: no decay
// on parameters marked weight_decay = false (norms, biases, 1-D tensors), and frozen parameters
// (requires_grad = false: buffers such as the MoE router's correction bias, LoRA's base weights)
// are never touched and hold no state. State (first/second moments) lives beside each trainable
// parameter in its grad_dtype (float32 in a bf16 store); one unfrozen later starts from zero
// moments. With float32 masters the update applies to the master and writes the bf16 value in the
// same pass. The math is ops/adamw.h (one multi-tensor launch on CUDA).
#pragma once
#include <memory>
#include <vector>

#include "model/param.h"
#include "ops/adamw.h"

namespace nemotron::train {

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

class AdamW {
 public:
  AdamW(model::ParamStore& params, AdamWConfig cfg);
  // One update with learning rate `lr` from the gradients currently in the store.
  void step(double lr);
  int64_t steps_taken() const { return step_; }
  // Moments by parameter, in the store's order (for checkpoints); undefined for frozen ones.
  const std::vector<Tensor>& first_moments() const { return m_; }
  const std::vector<Tensor>& second_moments() const { return v_; }
  std::vector<Tensor>& first_moments() { return m_; }
  std::vector<Tensor>& second_moments() { return v_; }
  void set_steps_taken(int64_t s) { step_ = s; }
  // Zero moments for every parameter that requires a gradient and has none yet (one unfrozen
  // since construction); step() and checkpoint loading call it.
  void ensure_moments();
  // The global gradient norm over this optimizer's parameters (its multi-tensor list). Clipping,
  // when the norm exceeds max_norm, is applied by the next step() as it reads the gradients (one
  // pass over them less); the stored gradients stay unscaled.
  double clip_grad_norm(double max_norm);

 private:
  ops::AdamWTensors& list();  // built on first use, rebuilt when masters or the frozen set changed
  model::ParamStore* params_;
  AdamWConfig cfg_;
  std::vector<Tensor> m_, v_;
  int64_t step_ = 0;
  double pending_grad_scale_ = 1;  // from clip_grad_norm, used by the next step()
  std::unique_ptr<ops::AdamWTensors> list_;
  std::vector<const void*> list_key_;  // the masters and gradients the list was built with
};

// Global L2 norm of the gradients of all parameters that require one; when max_norm > 0 and the norm exceeds it, scales
// every gradient by max_norm / (norm + 1e-6). Returns the norm before clipping. One multi-tensor
// reduction and one host read on CUDA.
double clip_grad_norm(model::ParamStore& params, double max_norm);

}  // namespace nemotron::train
