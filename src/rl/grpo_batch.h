// Rollouts -> the training step's micro-batches and the GRPO loss's per-sample data
// (reference/pipeline-and-rl.md §2.1 step 6, §2.2, §2.6). A row is prompt + response; labels are
// the next tokens and the token mask is 1 exactly where the label is a generated (response) token.
// A row longer than policy.max_total_sequence_length is cut to it and gets sample mask 0 (NeMo
// RL's loss_multiplier 0 for an over-long sequence); so does a truncated row under
// grpo.overlong_filtering, a row the environment flagged and a row it could not score (unscored:
// its reward is unknown, so it must weigh nothing). The last micro-batch is filled up to
// train_micro_batch_size with padding rows (no label, sample mask 0). Rows are padded on the right
// to the micro-batch's longest row.
#pragma once
#include <cstdint>
#include <vector>

#include "core/context.h"
#include "model/hybrid_model.h"
#include "rl/grpo_loss.h"

namespace nemotron::rl {

struct Rollout {
  std::vector<int32_t> prompt;              // every token before the generated response
  std::vector<int32_t> response;            // the generated tokens
  std::vector<double> generation_logprobs;  // the engine's log-prob of each response token
  double reward = 0;
  bool truncated = false;    // stopped by max_new_tokens, not by a stop token/string
  bool mask_sample = false;  // the environment asked for the row to be dropped
  bool unscored = false;     // the environment could not score it: no loss, no baseline
};

struct GrpoBatchOptions {
  int64_t micro_batch_size = 4;            // policy.train_micro_batch_size
  int64_t max_total_sequence_length = 512;  // policy.max_total_sequence_length
  bool overlong_filtering = false;          // grpo.overlong_filtering
  int32_t pad_id = 0;
  DType mask_dtype = DType::f32;  // the loss mask's dtype: the model's compute dtype
  // Context parallelism (2C equal chunks per row): rows padded (ids pad_id, labels ignored) to a
  // multiple of this, and to at least min_length (a chunk's conv window and MTP look-ahead).
  int64_t length_multiple = 1, min_length = 1;
};

struct GrpoBatchCounts {
  int64_t rows = 0;           // rollouts given
  int64_t overlong = 0;       // cut to max_total_sequence_length, sample mask 0
  int64_t filtered = 0;       // truncated (overlong_filtering) or flagged by the environment
  int64_t unscored = 0;       // unscored by the environment, sample mask 0
  int64_t padding_rows = 0;   // added to fill the last micro-batch
  int64_t loss_tokens = 0;    // response tokens of rows with sample mask 1
};

struct GrpoMicroBatch {
  model::Batch batch;  // on the host
  GrpoTokenData data;  // prev/reference log-probs still empty: fill_policy_logprobs
};

// `advantages` has one value per rollout (grpo_advantages), broadcast over the row's tokens;
// `rewards` (empty: each rollout's own) are the scaled/shaped rewards the loss's
// positive_example_nll_weight reads (padding rows get 0).
std::vector<GrpoMicroBatch> build_grpo_micro_batches(const std::vector<Rollout>& rows,
                                                     const std::vector<double>& advantages,
                                                     const GrpoBatchOptions& opt, GrpoBatchCounts* counts = nullptr,
                                                     const std::vector<double>& rewards = {});

// Log-probs of the batch's labels under `net` (inference forward), into data.prev_logprobs (the
// policy before the update) or, with `reference`, data.reference_logprobs (the frozen initial
// policy), as whole rows. The batches stay on the host; each is copied to `net`'s device for its
// forward. Under context parallelism (ctx's context group of C > 1 ranks; rows padded by
// length_multiple) each rank runs the forward on its two chunks of every row only, as the
// training step does, and the chunks are gathered over the group. Returns the rows x tokens this
// rank's forward ran (B * T / C per micro-batch). ctx's workspace, if any, is reset after each
// micro-batch.
int64_t fill_policy_logprobs(Context& ctx, model::HybridModel& net, std::vector<GrpoMicroBatch>& micro, bool reference);

// What TrainStep::run and ClippedPGLoss::set_data take.
std::vector<model::Batch> batches_of(const std::vector<GrpoMicroBatch>& micro);
std::vector<GrpoTokenData> loss_data_of(const std::vector<GrpoMicroBatch>& micro);

}  // namespace nemotron::rl
