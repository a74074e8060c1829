#include "rl/engine/cached_step_model.h"

namespace nemotron::rl {

CachedStepModel::CachedStepModel(model::HybridModel& model, Context ctx, int64_t max_slots, int64_t max_seq_len,
                                 int64_t block_size)
    : model_(model), ctx_(ctx), state_(model.make_decode_state({max_slots, max_seq_len, block_size, 0})) {}

std::vector<float> CachedStepModel::extend(const std::vector<int64_t>& slots,
                                           const std::vector<std::vector<int32_t>>& tokens) {
  const Tensor logits = model_.extend(ctx_, state_, slots, tokens);  // [S, V] float32 on the device
  const Tensor host = logits.device().is_cpu() ? logits : logits.to(host_backend());
  const float* p = host.data<float>();
  return std::vector<float>(p, p + host.numel());
}

}  // namespace nemotron::rl
