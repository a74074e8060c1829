#include "train/optimizer_bytes.h"

namespace nemotron::train {

int64_t held_master_bytes(const model::ParamStore& params, const AdamW& opt) {
  int64_t n = 0;
  const auto& all = params.all();
  for (size_t k = 0; k < all.size(); ++k) {
    if (all[k]->master.defined()) n += static_cast<int64_t>(all[k]->master.nbytes());
    if (const Tensor piece = opt.master_piece(k); piece.defined()) n += static_cast<int64_t>(piece.nbytes());
  }
  return n;
}

}  // namespace nemotron::train
