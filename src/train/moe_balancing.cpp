#include "train/moe_balancing.h"

#include <algorithm>


namespace nemotron::train {

void update_expert_bias(model::Param& bias, const std::vector<int64_t>& counts, double rate) {
  const int64_t E = bias.value.numel();
  NM_CHECK(static_cast<int64_t>(counts.size()) == E, "expert bias [{}] with {} counts", E, counts.size());
  double mean = 0;
  for (int64_t c : counts) mean += static_cast<double>(c);
  mean /= static_cast<double>(E);
  // E values: updated on the host in float64 and written back in the bias's own dtype (float32
  // in a bf16 store, so steps of 1e-3 are not rounded away), wherever it lives.
  Tensor& truth = bias.truth();
  std::vector<double> b = truth.to_f64_vector();
  for (int64_t i = 0; i < E; ++i) {
    const double offset = mean - static_cast<double>(counts[i]);
    b[i] += (offset > 0 ? 1.0 : offset < 0 ? -1.0 : 0.0) * rate;
  }
  truth.copy_from(Tensor::from_vector<double>(truth.shape(), b).to_host(truth.dtype()));
  bias.refresh_value();
}

MoeBalancer::MoeBalancer(model::HybridModel& net, const MoeSection& cfg) : cfg_(cfg) {
  for (const auto& m : net.mixers())
    if (auto* moe = dynamic_cast<model::MoeMixer*>(m.get())) layers_.push_back(moe);
  trunk_layers_ = static_cast<int64_t>(layers_.size());
  std::vector<size_t> first_of_block;  // each MTP block's first index in layers_
  for (const auto& block : net.mtp_blocks()) {
    first_of_block.push_back(layers_.size());
    for (const auto& m : block->stack().mixers())
      if (auto* moe = dynamic_cast<model::MoeMixer*>(m.get())) layers_.push_back(moe);
  }
  // mtp_loss reports depth k's block's MoE layers in order, for k = 1..D.
  for (int64_t k = 1; k <= net.mtp_depths(); ++k) {
    const size_t b = static_cast<size_t>(net.config().mtp_block_of_depth(k));
    const size_t end = b + 1 < first_of_block.size() ? first_of_block[b + 1] : layers_.size();
    for (size_t l = first_of_block[b]; l < end; ++l) mtp_slots_.push_back(l);
  }
  counts_.resize(layers_.size());
}

void MoeBalancer::begin_step(int64_t micro_batches) {
  micro_batches_ = micro_batches;
  aux_sum_ = 0;
  for (size_t l = 0; l < layers_.size(); ++l) {
    counts_[l].assign(static_cast<size_t>(layers_[l]->router_params().num_experts), 0);
    layers_[l]->set_seq_aux_loss(cfg_.seq_aux_loss() ? cfg_.moe_aux_loss_coeff : 0.0,
                                 1.0 / static_cast<double>(micro_batches));
  }
}

void MoeBalancer::add(const model::ForwardStats& stats) {
  NM_CHECK(static_cast<int64_t>(stats.moe.size()) == trunk_layers_,
           "moe balancing: statistics of {} MoE layers for a trunk of {}", stats.moe.size(), trunk_layers_);
  // The MTP depths run only under a loss with linear token weights; without them, none reported.
  NM_CHECK(stats.mtp_moe.empty() || stats.mtp_moe.size() == mtp_slots_.size(),
           "moe balancing: statistics of {} MTP MoE forwards for {} expected", stats.mtp_moe.size(), mtp_slots_.size());
  auto take = [&](size_t l, const model::MoeLayerStats& s) {
    const auto& c = s.tokens_per_expert;
    NM_CHECK(c.size() == counts_[l].size(), "moe balancing: layer {}: {} counts for {} experts", l, c.size(),
             counts_[l].size());
    for (size_t e = 0; e < c.size(); ++e) counts_[l][e] += c[e];
    aux_sum_ += s.aux_loss;
  };
  for (size_t l = 0; l < stats.moe.size(); ++l) take(l, stats.moe[l]);
  for (size_t j = 0; j < stats.mtp_moe.size(); ++j) take(mtp_slots_[j], stats.mtp_moe[j]);
}

void MoeBalancer::reduce(parallel::Communicator& group) {
  if (group.size() == 1) return;
  std::vector<double> v{aux_sum_};
  for (const auto& c : counts_)
    for (int64_t n : c) v.push_back(static_cast<double>(n));
  group.all_reduce_host(v);
  aux_sum_ = v[0];
  size_t i = 1;
  for (auto& c : counts_)
    for (int64_t& n : c) n = static_cast<int64_t>(v[i++]);
}

void MoeBalancer::end_step() {
  if (!cfg_.moe_router_enable_expert_bias) return;
  for (size_t l = 0; l < layers_.size(); ++l)
    update_expert_bias(layers_[l]->correction_bias(), counts_[l], cfg_.moe_router_bias_update_rate);
}

void MoeBalancer::for_evaluation() {
  for (auto* l : layers_) l->set_seq_aux_loss(0.0, 1.0);
}

double MoeBalancer::step_max_load() const {
  double worst = 0;
  for (const auto& c : counts_) {
    if (c.empty()) continue;
    double sum = 0, mx = 0;
    for (int64_t v : c) sum += static_cast<double>(v), mx = std::max(mx, static_cast<double>(v));
    if (sum > 0) worst = std::max(worst, mx / (sum / static_cast<double>(c.size())));
  }
  return worst;
}

}  // namespace nemotron::train
