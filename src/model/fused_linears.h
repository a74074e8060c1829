// Linears of one input run as one GEMM in a model that only generates. A decode step's q/k/v_proj
// (or SwiGLU's gate/up_proj) are separate parameters with Hub names; in a store that is not
// trainable (generation builds its model frozen) their weights are re-homed at construction as
// consecutive row blocks of one tensor, so y = x [W_0; W_1; ...]^T is one launch on a wider grid
// instead of several small ones. The parameters keep their names, shapes and shards: their values
// are views of the fused tensor, and every writer (checkpoint loads, GRPO's refit, resharding)
// writes values in place, so the fused tensor is always current. Training models (trainable
// stores) are left alone and run the linears one by one.
#pragma once
#include <initializer_list>
#include <vector>

#include "model/linear.h"

namespace nemotron::model {

class FusedLinears {
 public:
  FusedLinears() = default;
  // Fuses `parts` when every weight was registered frozen (a store not trainable), all share
  // input width, dtype and backend, and all or none have a bias; otherwise stays inactive.
  // Call right after the parts are registered (their values are still zeros: nothing is copied).
  explicit FusedLinears(std::initializer_list<const Linear*> parts);
  // Fused, no part carries a LoRA adapter (adapters attach after construction), and every part's
  // value is still its view of the fused tensor (a writer that replaced a value instead of writing
  // it in place would leave the fused copy stale: the parts then run one by one, still correct).
  bool active() const;
  // y [..., sum of the parts' out_features] = x W^T (+ b): part i's output is columns
  // [o_i, o_i + out_i) of each row.
  Tensor forward(Context& ctx, const Tensor& x) const;
  int64_t out_features() const { return weight_.defined() ? weight_.dim(0) : 0; }

 private:
  std::vector<const Linear*> parts_;
  std::vector<const void*> views_;  // where each part's weight (then bias) value must point
  Tensor weight_, bias_;
};

}  // namespace nemotron::model
