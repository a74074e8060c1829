// GRPO in one process (reference/pipeline-and-rl.md §2.1): the policy's parameters are trained and
// read by the generation engine in place, so a step has no refit. Per step: the next
// num_prompts_per_step prompts of a seeded per-epoch shuffle, num_generations_per_prompt rollouts
// each (rollout.h), rewards, micro-batches of every update with the trainer's log-probs of the
// generated tokens before the step's first update (grpo_batch.h; their gap to the engine's is
// logged as NeMo RL's token_mult_prob_error; computed also under force_on_policy_ratio, where
// NeMo RL skips that pass, for max_logprob_error) and optionally a frozen reference policy's,
// the advantages of grpo.adv_estimator (grpo_advantages.h: GRPO's per row, reinforce++'s per token
// after the log-probs), then ClippedPGLoss through the shared training step (train/train_step.h),
// one optimizer step per train_global_batch_size rows. It is a TrainingJob of the loop every stage shares
// (train/training_loop.h), which maps grpo.max_num_steps, val_period and checkpointing.* into its
// options. Validation (greedy, accuracy on the val rows) every val_period steps; checkpoints every
// save_period steps in the trainer's Megatron layout
// (<checkpoint_dir>/iter_XXXXXXX, train/checkpoint.h) holding the weights, AdamW moments, the step
// and the data cursor; every sampling stream is keyed by (grpo.seed, step, row), so a resumed run
// repeats an uninterrupted one bit for bit on the CPU.
// Megatron FSDP (rl/rl_config.h: use_custom_fsdp with a sharding strategy) runs the trainer as
// pretraining does (train/param_gather.h, train/grad_slots.h: the log-prob passes and the update
// gather each layer where it runs). Under full parameter sharding no rank holds whole weights
// between steps, so the engine gets its own: before each step's rollouts (and each validation) a
// frozen whole copy is gathered layer by layer from the data ranks' slices, and freed after them
// (the refit, timed and counted as the resharding generator's is). A choice: one whole copy per
// rank while it generates, as vLLM holds, rather than a gather per layer per decoded token.
#pragma once
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "model/hybrid_model.h"
#include "rl/grpo_loss.h"
#include "rl/rl_config.h"
#include "rl/rollout.h"
#include "train/adamw.h"
#include "train/metrics.h"
#include "train/train_step.h"
#include "train/training_loop.h"

namespace nemotron::rl {

struct GrpoStepRecord {
  int64_t step = 0;
  double reward_mean = 0, accuracy = 0;
  double loss = 0, grad_norm = 0, lr = 0;
  double kl = 0;                     // kl_penalty (KL / beta), 0 without a reference
  double clip_fraction = 0;          // tokens whose ratio was clipped (below + above)
  double token_mult_prob_error = 0;  // mean exp|gen_lp - train_lp| over trained tokens (1 = equal)
  double max_logprob_error = 0;      // max |gen_lp - train_lp| over trained tokens
  // Every metric ClippedPGLoss returns (NeMo RL's names), averaged over the step's updates; the
  // extrema (probs_ratio_min ...) over them, -1 when no token had one.
  std::map<std::string, double> loss_metrics;
  double generation_seconds = 0, logprob_seconds = 0, train_seconds = 0, total_seconds = 0;
  // Rows x tokens (padding included) the log-prob pass's policy forward ran on this rank (the
  // reference's runs as many): its rows' share, cut by the context ranks (grpo_batch.h).
  int64_t logprob_tokens = 0;
  // Weight transfer to the generator: 0 when it is laid out as the trainer, since the engine reads
  // the tensors the optimizer step wrote (no copy). At another tensor- or expert-parallel size, the
  // time to build its copy and reshard the weights into it on the devices (refit_bytes gathered
  // per rank, routed experts included); under full parameter sharding, to build the engine's whole
  // copy and gather the layers into it.
  // What also takes time before the first token is the engine's setup, the KV/SSM cache
  // allocation, logged beside it.
  double refit_seconds = 0;
  int64_t refit_bytes = 0;
  double engine_setup_seconds = 0;
  // The policy's weights as the trainer holds them: the compute-dtype values the optimizer step
  // writes (bf16 on a GPU by default; the fp32 masters are optimizer state, counted apart); under
  // full parameter sharding the rank's slices and the gather buffers.
  int64_t weight_bytes = 0;
  // On a GPU (0 on the CPU): the device allocator's bytes held by live tensors after the step, and
  // its peak so far (the rollouts' KV/SSM cache and the training activations included).
  int64_t device_bytes_in_use = 0, device_peak_bytes = 0;
  int64_t generated_tokens = 0, overlong_prompts = 0, masked_rows = 0, loss_tokens = 0;
  // The rollouts' prompt tokens prefilled, and those not (policy.generation.prefix_sharing: the G
  // generations of a prompt prefill it once); the engine's prefill steps' time, of generation_seconds.
  int64_t prefill_tokens = 0, shared_prefill_tokens = 0;
  int64_t engine_idle_steps = 0;  // summed over the data ranks (expert parallelism's lockstep)
  double prefill_seconds = 0;
  // Rows the environment could not score (left out of the loss and the baselines), and how many
  // of each kind of fault ({"unreachable": 8}; empty when none).
  int64_t unscored_rows = 0;
  nlohmann::json unscored_reasons = nlohmann::json::object();
  // grpo.use_dynamic_sampling (rl/grpo_dynamic_sampling.h), NeMo RL's metrics: the generation
  // rounds the step took, the kept rows cut off past the batch, and the mean reward of the trained
  // rows (reward_mean and accuracy are then over every generated row, as NeMo RL's total_reward).
  int64_t dynamic_sampling_num_gen_batches = 0, dynamic_sampling_num_discarded_valid_samples = 0;
  double filtered_reward = 0;
  double generated_reward_mean = 0, generated_accuracy = 0;  // every generated row's (every rank's)
  double tokens_per_second() const { return generation_seconds > 0 ? generated_tokens / generation_seconds : 0; }
};

struct GrpoValRecord {
  int64_t step = 0;
  double accuracy = 0, reward_mean = 0, seconds = 0;  // accuracy and reward over the scored rows
  int64_t samples = 0;
  int64_t unscored_rows = 0;  // rows the environment could not score
};

struct GrpoRunResult {
  std::vector<GrpoStepRecord> steps;
  std::vector<GrpoValRecord> validations;
  std::string last_checkpoint;
  int64_t final_step = 0;
  std::string stop_reason;      // what stop_requested answered, when it stopped the run
  double first_step_seconds = -1;  // from GrpoTrainerOptions::start to the end of this run's first step
};

// The loop's hooks (log, stop_requested, stop_after, on_saved, the rank seam: train/training_loop.h)
// and GRPO's own.
struct GrpoTrainerOptions : train::LoopHooks {
  bool progress = true;  // the rollout progress bar (stderr; never where writes_logs is false)
  // The generator's groups when policy.generation.vllm_cfg.tensor_parallel_size or
  // expert_parallel_size differs from the trainer's, or the trainer splits context (the same
  // world, laid out with those sizes); null: the engine runs on the trainer's parameters in place.
  std::shared_ptr<const parallel::ProcessGroups> generator_groups;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

class GrpoTrainer : private train::TrainingJob {
 public:
  // `net` must be initialised; restore() then loads the starting or resumed weights.
  GrpoTrainer(const RlConfig& cfg, model::HybridModel& net, const data::Tokenizer& tok, std::vector<RlPrompt> train,
              std::vector<RlPrompt> val, GrpoTrainerOptions opts = {});
  ~GrpoTrainer();

  // Resumes from checkpointing.checkpoint_dir when it holds a checkpoint (weights, moments, step,
  // data cursor); otherwise loads policy.model_name's weights (when set). Builds the reference
  // policy from policy.model_name when the KL penalty is on. Writes nothing.
  void restore();
  GrpoRunResult run();

  // One step, counted, outside run(): no record, line or save.
  GrpoStepRecord train_step();
  GrpoValRecord validate();
  int64_t step() const { return loop_.iteration(); }
  // The frozen reference policy's parameters (null without a KL penalty or before restore()).
  const model::ParamStore* reference_params() const { return reference_ ? &reference_->params() : nullptr; }
  const std::string& resumed_from() const { return resumed_from_; }
  nlohmann::json cursor() const;

 private:
  // Request ids of the sampling streams: step s (1-based) uses [s * kIdsPerStep, ...), validation
  // at step s the stream block below it with the top bit set, so no two rollouts share a stream.
  static constexpr uint64_t kIdsPerStep = uint64_t{1} << 32;
  static constexpr uint64_t kValidationBit = uint64_t{1} << 63;
  // TrainingJob
  std::string banner() override;
  std::string exhausted() override;
  train::LoopReport run_step(int64_t step, const train::LoopClock& clock) override;
  train::LoopReport run_validation(int64_t step) override;
  train::CheckpointContent checkpoint(int64_t step) override;
  std::string summary(const train::LoopResult& r, nlohmann::json& record) override;

  GrpoStepRecord rollout_and_train();  // the step train_step() and the loop run
  // One generation round of the step (round 0 is the step's only one without dynamic sampling):
  // `prompts` (every rank's), this rank's share of them generated on its own sampling streams and
  // scored, unscored rows noted (throws past env.max_unscored_fraction).
  RolloutBatch generate_round(GrpoStepRecord& r, int64_t round, const std::vector<const RlPrompt*>& prompts);
  // grpo.use_dynamic_sampling: rounds until num_prompts_per_step groups with a reward spread are
  // kept (every rank filters every rank's rows, so a data-parallel run keeps what one process
  // keeps); this rank's share of them. Throws past grpo.dynamic_sampling_max_gen_batches.
  RolloutBatch dynamically_sampled_rollouts(GrpoStepRecord& r);
  // The refit (rl/grpo_refit.cpp). The step's rollouts of this rank's trainer share, generated at
  // the generator's layout: a copy of the policy resharded from the trainer's (timed into
  // r.refit_seconds), this generator data rank's prompts generated on it, the copy freed, and the
  // rows exchanged.
  RolloutBatch rollouts_on_generator(GrpoStepRecord& r, const std::vector<const RlPrompt*>& prompts,
                                     RolloutOptions ro);
  // What the refit changes: "TP 2 -> 1", "EP 2 -> 1", "TP 2 -> 1, EP 2 -> 2 (experts to other ranks)".
  std::string refit_sizes() const;
  // Checkpoint weights into the policy (collective under the distributed optimizer and FSDP).
  void load_weights(const std::string& dir);
  // Full parameter sharding: a frozen whole copy of the policy for the engine, gathered layer by
  // layer from the data ranks' slices (collective over the data group); its time and the bytes
  // this rank gathered into *seconds and *bytes when given.
  std::unique_ptr<model::HybridModel> gathered_policy(double* seconds, int64_t* bytes);
  std::vector<const RlPrompt*> next_prompts(int64_t count);  // the next `count` of the shuffled prompts
  std::vector<size_t> epoch_order(int64_t epoch) const;
  // Logs the unscored rows of a rollout batch once per kind of fault ("step 3", "validation at
  // step 2"); past env.max_unscored_fraction records an "env_fault" and throws Error (`training`:
  // the rows of a step about to be trained). Returns the rows per kind.
  nlohmann::json note_unscored(const std::string& what, int64_t step, const RolloutBatch& rb, bool training);
  template <class... Args>
  void print(fmt::format_string<Args...> f, Args&&... args) {
    loop_.printf(f, std::forward<Args>(args)...);
  }

  const RlConfig& cfg_;
  model::HybridModel& net_;
  const data::Tokenizer& tok_;
  // Data parallelism: rank r of D generates prompts [r P/D, (r+1) P/D) of every step (whole
  // groups, so baselines are over whole groups) and trains on their rows; the step's gradients,
  // normaliser and loss metrics are summed over the data group (train/train_step.h).
  std::shared_ptr<const parallel::ProcessGroups> groups_;
  std::vector<RlPrompt> train_, val_;
  GrpoTrainerOptions opts_;
  // With a generator of its own: every rank's generator holds the experts its trainer part holds,
  // so the refit gathers experts over no expert group (only the tensor group's parts).
  bool experts_stay_ = true;
  train::AdamW opt_;
  train::TrainStep step_runner_;
  ClippedPGLoss loss_;
  const int64_t weight_bytes_;  // GrpoStepRecord::weight_bytes, fixed for the run
  std::unique_ptr<model::HybridModel> reference_;
  train::TrainingLoop loop_;  // counts the steps done
  int64_t epoch_ = 0, index_ = 0;  // data cursor: epoch and position in its order
  GrpoStepRecord last_step_;
  GrpoRunResult run_;  // this run's steps and validations
  std::vector<size_t> order_;
  std::string resumed_from_;
};

}  // namespace nemotron::rl
