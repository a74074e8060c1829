#include "train/adamw.h"

#include <cmath>

#include "backend/cpu/parallel.h"
#include "ops/dispatch.h"

namespace nemotron::train {

AdamW::AdamW(model::ParamStore& params, AdamWConfig cfg) : params_(&params), cfg_(cfg) {
  for (model::Param* p : params.all()) {
    m_.push_back(Tensor::zeros(p->value.shape(), p->value.dtype(), p->value.backend()));
    v_.push_back(Tensor::zeros(p->value.shape(), p->value.dtype(), p->value.backend()));
  }
}

void AdamW::step(double lr) {
  ++step_;
  const double bc1 = 1.0 - std::pow(cfg_.beta1, static_cast<double>(step_));
  const double bc2 = 1.0 - std::pow(cfg_.beta2, static_cast<double>(step_));
  const auto& all = params_->all();
  for (size_t k = 0; k < all.size(); ++k) {
    model::Param& p = *all[k];
    if (!p.trainable) continue;
    ops::require_cpu(p.value, "adamw");
    const double wd = p.weight_decay ? cfg_.weight_decay : 0.0;
    ops::dispatch_float(p.value.dtype(), "adamw", [&](auto zero) {
      using T = decltype(zero);
      T *w = p.value.data<T>(), *m = m_[k].data<T>(), *v = v_[k].data<T>();
      const T* g = p.grad.data<T>();
      const T b1 = static_cast<T>(cfg_.beta1), b2 = static_cast<T>(cfg_.beta2);
      cpu::parallel_for(p.value.numel(), [&](int64_t i) {
        m[i] = b1 * m[i] + (T(1) - b1) * g[i];
        v[i] = b2 * v[i] + (T(1) - b2) * g[i] * g[i];
        T mhat = m[i] / static_cast<T>(bc1), vhat = v[i] / static_cast<T>(bc2);
        w[i] -= static_cast<T>(lr) * (mhat / (std::sqrt(vhat) + static_cast<T>(cfg_.eps)) + static_cast<T>(wd) * w[i]);
      }, 4096);
    });
  }
}

double clip_grad_norm(model::ParamStore& params, double max_norm) {
  double sq = 0;
  for (model::Param* p : params.all()) {
    if (!p->trainable) continue;
    ops::require_cpu(p->grad, "clip_grad_norm");
    ops::dispatch_float(p->grad.dtype(), "clip_grad_norm", [&](auto zero) {
      using T = decltype(zero);
      const T* g = p->grad.data<T>();
      for (int64_t i = 0; i < p->grad.numel(); ++i) sq += static_cast<double>(g[i]) * static_cast<double>(g[i]);
    });
  }
  double norm = std::sqrt(sq);
  if (max_norm > 0 && norm > max_norm) {
    double s = max_norm / (norm + 1e-6);
    for (model::Param* p : params.all()) {
      if (!p->trainable) continue;
      ops::dispatch_float(p->grad.dtype(), "clip_grad_norm", [&](auto zero) {
        using T = decltype(zero);
        T* g = p->grad.data<T>();
        for (int64_t i = 0; i < p->grad.numel(); ++i) g[i] *= static_cast<T>(s);
      });
    }
  }
  return norm;
}

}  // namespace nemotron::train
