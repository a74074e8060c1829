#include "train/adamw.h"

namespace nemotron::train {

namespace {

Context store_context(const model::ParamStore& params) {
  return Context{&params.backend(), nullptr, params.dtype()};
}

std::vector<const void*> masters_of(const model::ParamStore& params) {
  std::vector<const void*> out;
  for (const model::Param* p : params.all()) out.push_back(p->master.defined() ? p->master.raw() : nullptr);
  return out;
}

// Megatron's rule: scale by max_norm / (norm + 1e-6) when the norm exceeds max_norm.
double clip_factor(double norm, double max_norm) { return max_norm > 0 && norm > max_norm ? max_norm / (norm + 1e-6) : 1.0; }

}  // namespace

AdamW::AdamW(model::ParamStore& params, AdamWConfig cfg) : params_(&params), cfg_(cfg) {
  for (model::Param* p : params.all()) {
    m_.push_back(Tensor::zeros(p->value.shape(), p->grad.dtype(), p->grad.backend()));
    v_.push_back(Tensor::zeros(p->value.shape(), p->grad.dtype(), p->grad.backend()));
  }
}

ops::AdamWTensors& AdamW::list() {
  std::vector<const void*> masters = masters_of(*params_);
  if (list_ && masters == list_masters_) return *list_;
  std::vector<ops::AdamWParam> ps;
  const auto& all = params_->all();
  for (size_t k = 0; k < all.size(); ++k) {
    model::Param& p = *all[k];
    if (p.trainable) ps.push_back({p.value, p.master, p.grad, m_[k], v_[k], p.weight_decay});
  }
  list_ = std::make_unique<ops::AdamWTensors>(std::move(ps));
  list_masters_ = std::move(masters);
  return *list_;
}

void AdamW::step(double lr) {
  ++step_;
  Context ctx = store_context(*params_);
  ops::adamw_update(ctx, list(),
                    {lr, cfg_.beta1, cfg_.beta2, cfg_.eps, cfg_.weight_decay, step_, pending_grad_scale_});
  pending_grad_scale_ = 1;
}

double AdamW::clip_grad_norm(double max_norm) {
  Context ctx = store_context(*params_);
  const double norm = ops::grad_norm(ctx, list());
  pending_grad_scale_ = clip_factor(norm, max_norm);
  return norm;
}

double clip_grad_norm(model::ParamStore& params, double max_norm) {
  std::vector<ops::AdamWParam> ps;
  for (model::Param* p : params.all())
    if (p->trainable) ps.push_back({p->value, p->master, p->grad, Tensor(), Tensor(), p->weight_decay});
  ops::AdamWTensors list(std::move(ps));
  Context ctx = store_context(params);
  const double norm = ops::grad_norm(ctx, list);
  if (const double s = clip_factor(norm, max_norm); s != 1.0) ops::scale_grads(ctx, list, s);
  return norm;
}

}  // namespace nemotron::train
