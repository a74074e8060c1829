#include "train/train_step.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/op_profiler.h"
#include "ops/elementwise.h"
#include "train/compute_device.h"
#include "train/context_batch.h"

namespace nemotron::train {

namespace {

// d numerator / d log p as head weights: w = -dlogprob in the head's weight dtype, on the device.
Tensor head_weights_from(Context& ctx, const Tensor& dlogprob, int64_t N) {
  NM_CHECK(dlogprob.defined() && dlogprob.numel() == N, "loss gradient {} for {} tokens",
           dlogprob.defined() ? dlogprob.shape().str() : std::string("(none)"), N);
  const DType wt = stat_dtype(ctx.compute_dtype);
  Tensor w = dlogprob.dtype() == wt && dlogprob.device() == ctx.backend->device()
                 ? dlogprob.clone()
                 : dlogprob.to_host(wt).to(*ctx.backend);
  w = w.view({N});
  ops::scale_inplace(ctx, w, -1.0);
  return w;
}

double sum_on_host(const Tensor& t) {
  double s = 0;
  for (double v : t.to_f64_vector()) s += v;
  return s;
}

}  // namespace

MtpWeights mtp_weights(const model::HybridModel& net, const std::vector<model::Batch>& micro, const LossFn& loss,
                       double normaliser, parallel::Communicator* group) {
  MtpWeights w;
  const int64_t D = net.mtp_depths();
  Tensor c;
  if (D == 0 || micro.empty() || !loss.linear_weights(micro.front(), &c)) return w;
  w.tokens.assign(static_cast<size_t>(D), 0.0);
  for (const model::Batch& mb : micro) {
    loss.linear_weights(mb, &c);
    for (int64_t k = 1; k <= D; ++k)
      w.tokens[static_cast<size_t>(k - 1)] += model::mtp_targets(mb, c, k, host_backend()).tokens;
  }
  if (group) group->all_reduce_host(w.tokens);
  const double alpha = net.config().mtp_loss_scaling_factor;
  for (double n : w.tokens) w.weight.push_back(n > 0 ? alpha / static_cast<double>(D) * normaliser / n : 0.0);
  return w;
}

namespace {
// The trunk's backward with the layer hook set for its duration only (the MTP blocks' backward,
// run before it, is not the trunk's).
void trunk_backward(Context& ctx, model::HybridModel& net, model::Activations& act, Tensor& dx,
                    const std::function<void(int64_t)>* trunk_layer_done) {
  ctx.on_layer_backward = trunk_layer_done;
  net.backward(ctx, act, dx);
  ctx.on_layer_backward = nullptr;
}
}  // namespace

MicroBatchResult forward_backward(Context& ctx, model::HybridModel& net, const model::Batch& mb, LossFn& loss,
                                  int64_t micro_index, double grad_scale, model::ForwardStats* stats,
                                  const MtpWeights* mtp, const std::function<void(int64_t)>* trunk_layer_done,
                                  bool defer_loss_read) {
  MicroBatchResult r;
  model::Activations act;
  Tensor x = net.forward(ctx, mb.input_ids, &act, stats, mb.layout());
  Tensor dx;
  Tensor c;
  if (loss.linear_weights(mb, &c)) {
    // One fused pass: value and gradient of grad_scale * sum_n c_n * -log p_n.
    Tensor values = net.head(ctx, x, mb.labels, c, grad_scale, &dx);
    if (mtp && mtp->on()) {  // the MTP depths add their gradient into dx before the trunk's backward
      std::vector<double> scales;
      for (double w : mtp->weight) scales.push_back(grad_scale * w);
      r.mtp_sums = net.mtp_loss(ctx, x, mb, c, scales, &dx, stats);
      for (size_t k = 0; k < r.mtp_sums.size(); ++k) r.mtp_objective += mtp->weight[k] * r.mtp_sums[k];
    }
    trunk_backward(ctx, net, act, dx, trunk_layer_done);
    if (defer_loss_read) r.loss_values = values.clone();  // its own buffer: the CPU's arena is reset per micro-batch
    else r.loss_sum = sum_on_host(values);  // read after the backward is queued
    return r;
  }
  const int64_t N = mb.labels.numel();
  Tensor logprobs = net.head(ctx, x, mb.labels, Tensor(), 1.0, nullptr);
  ops::scale_inplace(ctx, logprobs, -1.0);
  TokenLossGrad g = loss.per_token(ctx, micro_index, mb, logprobs);
  // d(grad_scale * numerator)/d log p_n = grad_scale * dlogprob_n = -grad_scale * w_n.
  Tensor w = head_weights_from(ctx, g.dlogprob, N);
  net.head(ctx, x, mb.labels, w, grad_scale, &dx);
  trunk_backward(ctx, net, act, dx, trunk_layer_done);
  r.loss_sum = g.loss_sum;
  r.metrics = std::move(g.metrics);
  return r;
}

double sum_loss_values(const std::vector<Tensor>& values) {
  if (values.empty()) return 0.0;
  int64_t total = 0;
  for (const Tensor& v : values) total += v.numel();
  Tensor all = Tensor::empty({total}, values.front().dtype(), values.front().backend());
  int64_t at = 0;
  for (const Tensor& v : values) {  // device-to-device copies: queued, no wait
    all.slice(at, at + v.numel()).copy_from(v.view({v.numel()}));
    at += v.numel();
  }
  const std::vector<double> host = all.to_f64_vector();
  double sum = 0;
  at = 0;
  for (const Tensor& v : values) {  // each micro-batch's sum first, as sum_on_host would give it
    double s = 0;
    for (int64_t i = 0; i < v.numel(); ++i) s += host[static_cast<size_t>(at + i)];
    sum += s;
    at += v.numel();
  }
  return sum;
}

double forward_loss(Context& ctx, model::HybridModel& net, const model::Batch& mb, LossFn& loss,
                    int64_t micro_index, const MtpWeights* mtp, double* mtp_objective) {
  Tensor x = net.forward(ctx, mb.input_ids, nullptr, nullptr, mb.layout());
  Tensor c;
  if (loss.linear_weights(mb, &c)) {
    if (mtp && mtp->on() && mtp_objective) {
      std::vector<double> sums = net.mtp_loss(ctx, x, mb, c, mtp->weight, nullptr);
      *mtp_objective = 0;
      for (size_t k = 0; k < sums.size(); ++k) *mtp_objective += mtp->weight[k] * sums[k];
    }
    return sum_on_host(net.head(ctx, x, mb.labels, c, 1.0, nullptr));
  }
  Tensor logprobs = net.head(ctx, x, mb.labels, Tensor(), 1.0, nullptr);
  ops::scale_inplace(ctx, logprobs, -1.0);
  return loss.per_token(ctx, micro_index, mb, logprobs).loss_sum;
}

LossSum cross_entropy_loss(Context& ctx, model::HybridModel& net, const model::Batch& batch) {
  MaskedCrossEntropy ce;
  const double tokens = count_loss_tokens(batch);
  const MtpWeights mtp = mtp_weights(net, {batch}, ce, tokens);
  double mtp_objective = 0;
  const double main = forward_loss(ctx, net, batch, ce, 0, &mtp, &mtp_objective);
  return {main + mtp_objective, tokens};
}

LossSum cross_entropy_backward(Context& ctx, model::HybridModel& net, const model::Batch& batch, double grad_scale) {
  MaskedCrossEntropy ce;
  const double tokens = count_loss_tokens(batch);
  const MtpWeights mtp = mtp_weights(net, {batch}, ce, tokens);
  MicroBatchResult r = forward_backward(ctx, net, batch, ce, 0, grad_scale, nullptr, &mtp);
  return {r.loss_sum + r.mtp_objective, tokens};
}

TrainStep::TrainStep(model::HybridModel& net, AdamW& opt, StepConfig cfg)
    : net_(net),
      opt_(opt),
      cfg_(std::move(cfg)),
      balancer_(net, cfg_.moe),
      ws_(net.params().backend()),
      ctx_{&net.params().backend(), net.params().backend().device().is_cpu() ? &ws_ : nullptr, net.params().dtype()} {
  ctx_.groups = cfg_.groups.get();
  NM_CHECK(opt_.shard_count() == 1 || opt_.shard_count() == groups().data->size(),
           "an optimizer sharded over {} ranks in a data group of {}", opt_.shard_count(), groups().data->size());
  // Context parallelism folds into the gradient sum (Megatron's dp-cp group): the whole buffer over
  // data x context; a sharded optimizer's reduce-scatter stays over the data ranks, after the sum
  // over context.
  const bool sharded = opt_.shard_grads().defined();
  if (opt_.shards_grads()) {
    slots_ = std::make_unique<GradSlots>(net_, opt_, *groups().data, ctx_);
  } else {
    reducer_ = std::make_unique<GradReducer>(net_, sharded ? *groups().data : *groups().data_context,
                                           cfg_.grad_bucket_elements, sharded ? &opt_ : nullptr, groups().expert_data.get(),
                                           groups().tensor.get(), sharded ? groups().context.get() : nullptr);
  }
  if (opt_.shards_values()) gather_ = std::make_unique<ParamGather>(net_, opt_, *groups().data);
  if (slots_ && gather_) slots_->set_after_wait([g = gather_.get()] { g->pending_waited(); });
}

std::vector<model::Batch> TrainStep::context_rows(const std::vector<model::Batch>& micro) const {
  const parallel::Communicator& cp = *groups().context;
  if (cp.size() == 1) return micro;
  std::vector<model::Batch> mine;
  for (const model::Batch& mb : micro) mine.push_back(context_shard(mb, cp.rank(), cp.size(), net_.mtp_depths()));
  return mine;
}

StepResult TrainStep::run(const std::vector<model::Batch>& whole, LossFn& loss, double lr, int64_t iteration) {
  NM_CHECK(!whole.empty(), "a training step needs at least one micro-batch");
  // Context parallelism: this rank's chunks of every row; its sums are then reduced over data x
  // context, as a data rank's are over data.
  const std::vector<model::Batch> micro = context_rows(whole);
  parallel::Communicator& dc = *groups().data_context;
  const int64_t data_ranks = groups().data->size();
  // The global batch is every data-parallel rank's micro-batches: its normaliser is their sum.
  const double local_normaliser = loss.normaliser(micro);
  loss.reduce_counts(dc);
  const double normaliser = dc.all_reduce_host(local_normaliser);
  const bool empty = !(normaliser > 0);
  if (empty && !loss.zero_when_empty())
    throw InputError(fmt::format("iteration {}: the global batch has no token with a label", iteration));
  // Nothing to train (a loss that allows it): every micro-batch still runs, scaled by 0, so every
  // rank takes the same collectives; the numerator is 0 there too.
  const double inv_normaliser = empty ? 0.0 : 1.0 / normaliser;
  if (slots_) slots_->begin_step();
  else net_.params().zero_grads();
  balancer_.begin_step(static_cast<int64_t>(micro.size()) * data_ranks);
  StepResult r;
  r.normaliser = normaliser;
  Backend& backend = net_.params().backend();
  // Every micro-batch on the device before the first forward: an upload waits for the stream (its
  // host buffer may go right after), and a wait between micro-batches would empty the GPU's queue.
  std::vector<model::Batch> on_device;
  for (const model::Batch& mb : micro) on_device.push_back(batch_on(mb, backend));
  const MtpWeights mtp = mtp_weights(net_, micro, loss, normaliser, &dc);
  std::vector<double> mtp_sums(mtp.weight.size(), 0.0);
  double mtp_objective = 0;
  std::vector<Tensor> loss_values;  // linear losses: read once after the last micro-batch
  for (size_t k = 0; k < micro.size(); ++k) {
    model::ForwardStats stats;
    // Keyed by the micro-batch's index in the global batch (data rank r holds r, r + D, ...:
    // train/data_parallel.h), so each sample draws the masks it draws in one process.
    const int64_t global_micro = static_cast<int64_t>(k) * data_ranks + groups().data->rank();
    ctx_.dropout = {true, cfg_.seed, static_cast<uint64_t>(iteration), static_cast<uint64_t>(global_micro),
                    micro[k].context_split ? micro[k].input_ids.dim(0) : 0};
    // The last micro-batch's backward completes each layer's gradients: their buckets start
    // their reduction over the data group while the earlier layers' backward runs. Sharded
    // gradients: every micro-batch's (each reduce-scattered into the slices it adds to).
    const bool last = k + 1 == micro.size();
    const std::function<void(int64_t)>* hook =
        slots_ ? slots_->layer_hook() : last ? reducer_->layer_hook() : nullptr;
    MicroBatchResult m = forward_backward(ctx_, net_, on_device[k], loss, static_cast<int64_t>(k),
                                          inv_normaliser, &stats, &mtp, hook, /*defer_loss_read=*/true);
    if (slots_) {
      OpScope scope(ctx_, OpPhase::optimizer, "data_parallel_grad_reduce");
      slots_->finish_micro_batch();
    }
    if (m.loss_values.defined()) loss_values.push_back(std::move(m.loss_values));
    ctx_.dropout = {};  // evaluation and whatever else runs on this context drop nothing
    ws_.reset();
    balancer_.add(stats);
    r.loss_sum += m.loss_sum;
    for (const auto& [name, v] : m.metrics) {
      auto [it, added] = r.metrics.try_emplace(name, v);
      if (added) continue;
      const parallel::ReduceOp op = loss.metric_op(name);
      it->second = op == parallel::ReduceOp::min ? std::min(it->second, v)
                   : op == parallel::ReduceOp::max ? std::max(it->second, v)
                                                   : it->second + v;
    }
    for (size_t d = 0; d < m.mtp_sums.size(); ++d) mtp_sums[d] += m.mtp_sums[d];
    mtp_objective += m.mtp_objective;
  }
  {
    OpScope scope(ctx_, OpPhase::optimizer, "data_parallel_grad_reduce");
    if (reducer_) reducer_->finish();  // all-reduced, or this rank's range reduce-scattered (distributed optimizer)
  }
  r.loss_sum += sum_loss_values(loss_values);
  if (dc.size() > 1) {  // the step's sums over the whole global batch
    std::vector<double> sums{r.loss_sum, mtp_objective};
    for (double v : mtp_sums) sums.push_back(v);
    std::vector<std::string> names;
    for (const auto& [name, v] : r.metrics)
      if (loss.metric_op(name) == parallel::ReduceOp::sum) names.push_back(name), sums.push_back(v);
    dc.all_reduce_host(sums);
    r.loss_sum = sums[0], mtp_objective = sums[1];
    for (size_t d = 0; d < mtp_sums.size(); ++d) mtp_sums[d] = sums[2 + d];
    for (size_t i = 0; i < names.size(); ++i) r.metrics[names[i]] = sums[2 + mtp_sums.size() + i];
    for (parallel::ReduceOp op : {parallel::ReduceOp::min, parallel::ReduceOp::max}) {  // the extrema
      std::vector<std::string> ext;
      std::vector<double> v;
      for (const auto& [name, x] : r.metrics)
        if (loss.metric_op(name) == op) ext.push_back(name), v.push_back(x);
      if (v.empty()) continue;  // the same names on every rank (the same loss)
      dc.all_reduce_host(v, op);
      for (size_t i = 0; i < ext.size(); ++i) r.metrics[ext[i]] = v[i];
    }
    balancer_.reduce(dc);
  }
  if (grad_hook_) grad_hook_(net_.params());
  r.loss = empty ? 0.0 : r.loss_sum / normaliser;
  for (size_t d = 0; d < mtp_sums.size(); ++d)
    r.mtp_losses.push_back(mtp.tokens[d] > 0 ? mtp_sums[d] / mtp.tokens[d] : 0.0);
  r.mtp_loss = empty ? 0.0 : mtp_objective / normaliser;
  r.aux_loss = balancer_.step_aux_loss();
  {
    OpScope scope(ctx_, OpPhase::optimizer, "clip_grad_norm+adamw");  // the optimizer runs on the store's context
    r.grad_norm = opt_.clip_grad_norm(cfg_.clip_grad);
    if (!std::isfinite(r.loss) || !std::isfinite(r.mtp_loss) || !std::isfinite(r.grad_norm))
      throw Error(
          fmt::format("iteration {}: {} {} / grad norm {} is not finite; stopping before the update "
                      "(try a lower optimizer.lr)",
                      iteration, loss.name(), r.loss, r.grad_norm));
    r.lr = lr;
    opt_.step(lr);
    if (gather_) gather_->refresh();  // full parameter sharding: the outer unit's new values
  }
  balancer_.end_step();
  r.moe_max_load = balancer_.step_max_load();
  return r;
}

LossSum TrainStep::evaluate(const model::Batch& batch, LossFn& loss) {
  balancer_.for_evaluation();
  LossSum s;
  const model::Batch mine = context_rows({batch}).front();
  s.loss_sum = forward_loss(ctx_, net_, batch_on(mine, net_.params().backend()), loss);
  s.token_count = loss.normaliser({mine});
  ws_.reset();
  return s;
}

LossSum TrainStep::reduce(LossSum local) {
  std::vector<double> v{local.loss_sum, local.token_count};
  groups().data_context->all_reduce_host(v);
  return {v[0], v[1]};
}

std::string fsdp_state_lines(TrainStep& step, const std::string& strategy_key) {
  const double mib = 1.0 / (1 << 20);
  const AdamW& opt = step.optimizer();
  std::string out;
  if (const ParamGather* g = step.param_gather())
    out += fmt::format(
        "full parameter sharding ({}=optim_grads_params): {} weights 1/{} per rank: {:.2f} MiB of {:.2f} MiB, + "
        "{:.2f} MiB gathered (embedding, head, MTP whole; 2 layer slots of {:.2f} MiB)\n",
        strategy_key, dtype_name(step.model().params().dtype()), opt.shard_count(),
        static_cast<double>(g->shard_bytes()) * mib, static_cast<double>(g->sharded_bytes()) * mib,
        static_cast<double>(g->buffer_bytes()) * mib, static_cast<double>(g->layer_bytes()) * mib);
  if (const GradSlots* gs = step.grad_slots())
    out += fmt::format(
        "sharded gradients ({}={}): fp32 gradients 1/{} per rank: {:.2f} MiB of {:.2f} MiB, + {:.2f} MiB whole "
        "(embedding, head, MTP; 2 layer slots of {:.2f} MiB; receive buffers)\n",
        strategy_key, opt.shards_values() ? "optim_grads_params" : "optim_grads", opt.shard_count(),
        static_cast<double>(gs->slice_bytes()) * mib, static_cast<double>(gs->whole_bytes()) * mib,
        static_cast<double>(gs->buffer_bytes()) * mib, static_cast<double>(gs->layer_bytes()) * mib);
  return out;
}

}  // namespace nemotron::train
