// Adapts any Mixer to the op harness: the inputs are u [B, T, H] followed by every parameter of
// the mixer (by name), so the float64 gradient check covers du and every parameter gradient.
// Parameters the store keeps in stat_dtype (the MoE correction bias) are stat inputs.
// Each forward builds a fresh mixer on the context's backend and dtype and loads the inputs into
// its parameters, so the same case also runs in the backend mode.
#pragma once
#include <functional>
#include <tuple>

#include "block_case.h"
#include "model/mixer.h"

namespace nemotron::testing {

using MixerFactory = std::function<std::unique_ptr<model::Mixer>(const model::ModelConfig&, model::ParamStore&)>;
using ParamRange = std::function<std::pair<double, double>(const std::string& name, const Shape& shape)>;

class MixerCase : public BlockCase {
 public:
  MixerCase(std::string op, model::ModelConfig cfg, int64_t B, int64_t T, MixerFactory make, ParamRange range = {})
      : op_(std::move(op)), cfg_(std::move(cfg)), B_(B), T_(T), make_(std::move(make)), range_(std::move(range)) {
    model::ParamStore probe(host_backend(), DType::bf16);  // a statistic parameter shows as float32
    make_(cfg_, probe);
    for (const model::Param* p : probe.all()) params_.push_back({p->name, p->value.shape(), p->value.dtype() != DType::bf16});
  }
  std::string op() const override { return op_; }
  std::string params() const override { return fmt::format("B={},T={},{}", B_, T_, extra_params()); }
  virtual std::string extra_params() const { return fmt::format("H={}", cfg_.hidden_size); }

  std::vector<InputSpec> inputs() const override {
    std::vector<InputSpec> in{{"u", {B_, T_, cfg_.hidden_size}}};
    for (const auto& [name, shape, stat] : params_) {
      auto [lo, hi] = range_ ? range_(name, shape) : std::pair<double, double>{-0.5, 0.5};
      in.push_back({name, shape, DType::f64, true, lo, hi, stat});
    }
    return in;
  }

  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    model::ParamStore store(*ctx.backend, in[0].dtype());
    auto mixer = build(ctx, store, in);
    return {mixer->forward(ctx, in[0], nullptr)};
  }

  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    model::ParamStore store(*ctx.backend, in[0].dtype());
    auto mixer = build(ctx, store, in);
    std::unique_ptr<model::MixerSaved> saved;
    mixer->forward(ctx, in[0], &saved);
    std::vector<Tensor> grads{mixer->backward(ctx, *saved, douts[0])};
    for (const model::Param* p : store.all()) grads.push_back(p->grad);
    return grads;
  }

 protected:
  // Called with the parameters loaded, before forward (MoE uses it to pin the expert choice).
  virtual void prepare(model::Mixer& mixer, Context& ctx, const std::vector<Tensor>& in) const {
    (void)mixer, (void)ctx, (void)in;
  }
  const model::ModelConfig& config() const { return cfg_; }

 private:
  std::unique_ptr<model::Mixer> build(Context& ctx, model::ParamStore& store, const std::vector<Tensor>& in) const {
    auto mixer = make_(cfg_, store);
    const auto& all = store.all();
    NM_CHECK(all.size() + 1 == in.size(), "mixer has {} parameters, case has {}", all.size(), in.size() - 1);
    for (size_t k = 0; k < all.size(); ++k) all[k]->value.copy_from(in[k + 1]);
    prepare(*mixer, ctx, in);
    return mixer;
  }

  std::string op_;
  model::ModelConfig cfg_;
  int64_t B_, T_;
  MixerFactory make_;
  ParamRange range_;
  std::vector<std::tuple<std::string, Shape, bool>> params_;  // name, shape, kept in stat_dtype
};

}  // namespace nemotron::testing
