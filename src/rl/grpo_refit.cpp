// GrpoTrainer's refit: the generator's own copy of the policy, built for one step's rollouts and
// freed after them — resharded to another tensor/expert layout (rollouts_on_generator), or
// gathered whole from the data ranks' slices under full parameter sharding (gathered_policy).
#include <fmt/format.h>

#include <chrono>

#include "model/shard_sizes.h"
#include "model/weight_reshard.h"
#include "rl/grpo_trainer.h"
#include "rl/rollout_exchange.h"

namespace nemotron::rl {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

RolloutBatch GrpoTrainer::rollouts_on_generator(GrpoStepRecord& r, const std::vector<const RlPrompt*>& prompts,
                                                RolloutOptions ro) {
  const parallel::ProcessGroups& gen_groups = *opts_.generator_groups;
  const parallel::RankCoords at = gen_groups.coords();
  Backend& backend = net_.params().backend();
  // The refit. The copy is built for this step and freed after it: between steps (the log-prob
  // pass, the update) the device holds the trainer's weights only, so a generator whole on every
  // rank (TP 2 -> 1) never sits beside the training activations; its cost is the allocation, not
  // a copy (its parameters are frozen: no gradients).
  const auto t_refit = std::chrono::steady_clock::now();
  auto gen = std::make_unique<model::HybridModel>(
      cfg_.model, backend, net_.params().dtype(),
      model::ModelShard{at.expert, gen_groups.layout.expert(), at.tensor, gen_groups.layout.tensor(), false},
      /*trainable=*/false);
  Context ctx{&backend, nullptr, net_.params().dtype()};
  ctx.groups = groups_.get();
  const model::ReshardSource source{net_.params(), *groups_->tensor,
                                    experts_stay_ ? nullptr : groups_->expert.get(), model::routed_experts(cfg_.model)};
  r.refit_bytes = model::reshard_values(ctx, source, gen->params());
  backend.synchronize();
  r.refit_seconds = seconds_since(t_refit);

  // This generator data rank's prompts (whole groups), each row on the sampling stream it has in
  // one process; the members of a generator tensor group decode the same rows in lockstep.
  const int64_t E = gen_groups.data->size(), per_rank = static_cast<int64_t>(prompts.size()) / E;
  const int64_t G = ro.generations, rows = static_cast<int64_t>(prompts.size()) * G;
  const std::vector<const RlPrompt*> mine(prompts.begin() + at.data * per_rank,
                                          prompts.begin() + (at.data + 1) * per_rank);
  ro.first_request_id = static_cast<uint64_t>(r.step) * kIdsPerStep + static_cast<uint64_t>(at.data * per_rank * G);
  ro.groups = &gen_groups;
  const RolloutBatch generated = collect_rollouts(*gen, tok_, *cfg_.environment, mine, ro);
  gen.reset();
  r.unscored_reasons = note_unscored(fmt::format("step {}", r.step), r.step, generated, true);  // throws past the bound

  // Every row to every rank, then this trainer data rank's share (whole groups, as without a
  // generator); the counts stay with data rank 0, so their sum over the data group is the step's.
  const RolloutBatch all =
      share_rollouts(generated, at.tensor == 0, at.data * per_rank * G, rows, *groups_->world);
  const int64_t D = groups_->data->size(), j = groups_->data->rank();
  return rollout_rows(all, j * rows / D, (j + 1) * rows / D, j == 0);
}

std::unique_ptr<model::HybridModel> GrpoTrainer::gathered_policy(double* seconds, int64_t* bytes) {
  const auto t0 = std::chrono::steady_clock::now();
  Backend& backend = net_.params().backend();
  auto whole = std::make_unique<model::HybridModel>(cfg_.model, backend, net_.params().dtype(), net_.shard(),
                                                    /*trainable=*/false);
  const int64_t n = step_runner_.param_gather()->copy_whole_to(whole->params());
  backend.synchronize();
  if (seconds) *seconds = seconds_since(t0);
  if (bytes) *bytes = n;
  return whole;
}

std::string GrpoTrainer::refit_sizes() const {
  const int64_t tp = cfg_.model.parallel.tensor, gtp = cfg_.generator_tensor_parallel;
  const int64_t ep = cfg_.model.parallel.expert, gep = cfg_.generator_expert_parallel;
  std::string out = gtp != tp || gep == ep ? fmt::format("TP {} -> {}", tp, gtp) : std::string();
  if (gep != ep || !experts_stay_)
    out += fmt::format("{}EP {} -> {}{}", out.empty() ? "" : ", ", ep, gep,
                       gep == ep ? " (experts to other ranks)" : "");
  return out;
}

}  // namespace nemotron::rl
