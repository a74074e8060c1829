#include "train/adamw.h"

namespace nemotron::train {

namespace {

Context store_context(const model::ParamStore& params) {
  return Context{&params.backend(), nullptr, params.dtype()};
}

// What the multi-tensor list depends on: which parameters train and where their masters and
// gradients are (a freeze, an unfreeze or create_masters() since the last build changes it).
std::vector<const void*> list_key(const model::ParamStore& params) {
  std::vector<const void*> out;
  for (const model::Param* p : params.all()) {
    out.push_back(p->master.defined() ? p->master.raw() : nullptr);
    out.push_back(p->requires_grad && p->grad.defined() ? p->grad.raw() : nullptr);
  }
  return out;
}

// Megatron's rule: scale by max_norm / (norm + 1e-6) when the norm exceeds max_norm.
double clip_factor(double norm, double max_norm) { return max_norm > 0 && norm > max_norm ? max_norm / (norm + 1e-6) : 1.0; }

}  // namespace

AdamW::AdamW(model::ParamStore& params, AdamWConfig cfg) : params_(&params), cfg_(cfg) {
  m_.resize(params.all().size());
  v_.resize(params.all().size());
  ensure_moments();
}

void AdamW::ensure_moments() {
  const auto& all = params_->all();
  NM_CHECK(all.size() == m_.size(), "AdamW: the store has {} parameters, the optimizer was built for {}", all.size(),
           m_.size());
  for (size_t k = 0; k < all.size(); ++k) {
    const model::Param& p = *all[k];
    if (!p.requires_grad || m_[k].defined()) continue;
    m_[k] = Tensor::zeros(p.value.shape(), p.grad.dtype(), p.grad.backend());
    v_[k] = Tensor::zeros(p.value.shape(), p.grad.dtype(), p.grad.backend());
  }
}

ops::AdamWTensors& AdamW::list() {
  std::vector<const void*> key = list_key(*params_);
  if (list_ && key == list_key_) return *list_;
  ensure_moments();
  std::vector<ops::AdamWParam> ps;
  const auto& all = params_->all();
  for (size_t k = 0; k < all.size(); ++k) {
    model::Param& p = *all[k];
    if (p.requires_grad) ps.push_back({p.value, p.master, p.grad, m_[k], v_[k], p.weight_decay});
  }
  list_ = std::make_unique<ops::AdamWTensors>(std::move(ps));
  list_key_ = std::move(key);
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
    if (p->requires_grad) ps.push_back({p->value, p->master, p->grad, Tensor(), Tensor(), p->weight_decay});
  ops::AdamWTensors list(std::move(ps));
  Context ctx = store_context(params);
  const double norm = ops::grad_norm(ctx, list);
  if (const double s = clip_factor(norm, max_norm); s != 1.0) ops::scale_grads(ctx, list, s);
  return norm;
}

}  // namespace nemotron::train
