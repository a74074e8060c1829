#!/usr/bin/env bash
# GRPO under context parallelism (issue 23; NeMo RL's Megatron policy with context_parallel_size):
# the generator decodes whole rows at its own layout (the trainer's tensor size, every rank a data
# rank), the log-prob pass and the training step give each context rank its two chunks of every
# row (rows padded to a multiple of 2C; the log-probs gathered back into whole rows), with the
# per-token loss terms (ratios, KL, masks, advantages) cut alike and the per-row sums and the
# normaliser summed over the context group. mpi_lib.sh's grpo_setup run (random initial weights,
# an overlong-length penalty so the update has a gradient) at CP 2, CP 2 x DP 2 and CP 4, and GSPO
# (terms over whole rows) at CP 4: losses, grad norms, rewards, generated tokens, the ratio
# extrema and the final weights equal one process's; the log-prob pass's own figures (the
# policy's log-probs against the generator's: token_mult_prob_error, max |dlogp|) too, with each
# rank's forward over 1/(C x D) of the rows' tokens. With a KL penalty (the reference policy's
# log-probs, split the same way) at CP 2 x DP 2; a generator at another tensor size than a
# CP 2 x TP 2 trainer's (the refit gathers over the trainer's tensor group); CP 2 x EP 2 with the
# generator at EP 2 and EP 1.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
source "$(dirname "${BASH_SOURCE[0]}")/mpi_lib.sh"

grpo_setup
grpo_one "GRPO, one process"
grpo_trains

# logprob_same NAME DIR N: DIR's log-prob pass figures equal one process's ($TMP/rl1): per step
# token_mult_prob_error and max |gen_lp - prev_lp| within 1e-5 absolute (the trainer's float32
# sums in another order move them by ~1e-6; a chunk's log-probs placed at another chunk's tokens
# move them by ~1) and kl_penalty within 1e-3 relative; and its rank 0 ran the forward over 1/N of
# the (padded) rows' tokens (N = C x D): at least one process's / N, and well under the C / N of
# them every rank ran before the pass was split (C >= 2).
logprob_same() {
  local name=$1 dir=$2 n=$3 msg
  if msg=$(python3 -c 'import json,sys
steps = lambda f: [json.loads(l) for l in open(f) if "\"train\"" in l]
mine, one, n = steps(sys.argv[1]), steps(sys.argv[2]), int(sys.argv[3])
bad = []
for s, (a, b) in enumerate(zip(mine, one), 1):
    for k in ("token_mult_prob_error", "max_logprob_error"):
        if abs(a[k] - b[k]) > 1e-5: bad.append(f"step {s} {k} {a[k]!r} vs {b[k]!r}")
    ka, kb = a["kl_penalty"], b["kl_penalty"]
    if abs(ka - kb) > 1e-3 * abs(kb) + 1e-12: bad.append(f"step {s} kl_penalty {ka!r} vs {kb!r}")
    t, o = a["logprob_tokens_per_rank"], b["logprob_tokens_per_rank"]
    if not (n * t >= o and n * t < 1.5 * o): bad.append(f"step {s}: {t} rows x tokens per rank, one process {o}")
print("; ".join(bad) if bad else "rows x tokens per rank: one process %s, here %s; token_mult_prob_error %s vs %s" % (
    [b["logprob_tokens_per_rank"] for b in one], [a["logprob_tokens_per_rank"] for a in mine],
    [a["token_mult_prob_error"] for a in mine], [b["token_mult_prob_error"] for b in one]))
sys.exit(1 if bad or len(mine) != len(one) or not mine else 0)' "$dir/metrics.jsonl" "$TMP/rl1/metrics.jsonl" "$n"); then
    echo "ok: $name: the log-prob pass split over the ranks, its figures one process's ($msg)"
  else
    fail "$name: the log-prob pass: $msg"
  fi
}

cp_run() {  # NAME NP CP GENERATOR_LAYOUT OVERRIDES...: against $TMP/rl1
  local name=$1 np=$2 cp=$3 line=$4
  shift 4
  run=("${grpo[@]}")
  mpi "$np" "$name" model.context_parallel_size="$cp" checkpointing.checkpoint_dir="$TMP/$name" "$@" || return
  grep -qF "generator layout: $line" "$TMP/out.$name" ||
    fail "$name: no [generator layout: $line] line: $(grep -m3 'layout' "$TMP/out.$name")"
  grpo_same_as_one "GRPO $name" "$TMP/$name"
  local tp=1 a  # the rows split over context x data: the world over the tensor size
  for a in "$@"; do [[ $a == model.tensor_model_parallel_size=* ]] && tp=${a#*=}; done
  logprob_same "GRPO $name" "$TMP/$name" $((np / tp))
}
cp_run cp2 2 2 "DP 2 x EP 1 x TP 1 x CP 1 over 2 ranks (the trainer's: DP 1 x EP 1 x TP 1 x CP 2 over 2 ranks)"
cp_run cp2dp2 4 2 "DP 4 x EP 1 x TP 1 x CP 1 over 4 ranks (the trainer's: DP 2 x EP 1 x TP 1 x CP 2 over 4 ranks)"
cp_run cp4 4 4 "DP 4 x EP 1 x TP 1 x CP 1 over 4 ranks (the trainer's: DP 1 x EP 1 x TP 1 x CP 4 over 4 ranks)"

# GSPO, whose terms sum over whole rows (the per-row ratio and importance weight, their gradient
# through the row, the per-sequence loss mean), against its own one-process run at CP 4: 8 chunks
# of a row, so each row's response tokens lie on several ranks. Seed 26: at the setup's seed 42
# GSPO's second step sampled every row to the 16-token limit (equal rewards, no gradient, nothing
# to compare); at 26 both steps have rows that end early (248 and 237 of 256 tokens generated) and
# a gradient (norms 0.69, 1.40), which grpo_trains checks.
gspo=(loss_fn.sequence_level_importance_ratios=true loss_fn.token_level_loss=false grpo.seed=26)
grpo_one "GRPO (GSPO), one process" "${gspo[@]}"
grpo_trains
cp_run cp4-gspo 4 4 "DP 4 x EP 1 x TP 1 x CP 1 over 4 ranks (the trainer's: DP 1 x EP 1 x TP 1 x CP 4 over 4 ranks)" "${gspo[@]}"

# A KL penalty: the reference policy's log-probs come from the split pass too (step 2's policy has
# moved from it, so the KL is not 0 there).
kl=(loss_fn.reference_policy_kl_penalty=0.05)
grpo_one "GRPO (KL), one process" "${kl[@]}"
grpo_trains
python3 -c 'import json,sys
k = [json.loads(l)["kl_penalty"] for l in open(sys.argv[1]) if "\"train\"" in l]
sys.exit(0 if k[-1] > 0 else 1)' "$TMP/rl1/metrics.jsonl" || fail "GRPO (KL): no KL at step 2"
cp_run cp2dp2-kl 4 2 "DP 4 x EP 1 x TP 1 x CP 1 over 4 ranks (the trainer's: DP 2 x EP 1 x TP 1 x CP 2 over 4 ranks)" "${kl[@]}"

# A generator split otherwise than a trainer with context split: trainer CP 2 x TP 2 -> generator
# TP 1 (each rank gathers the whole policy over its trainer tensor group; a context rank holds its
# tensor group's parts whole, so nothing is gathered over context).
grpo_one "GRPO, one process"
cp_run cp2tp2-gen1 4 2 "DP 4 x EP 1 x TP 1 x CP 1 over 4 ranks (the trainer's: DP 1 x EP 1 x TP 2 x CP 2 over 4 ranks)" \
  model.tensor_model_parallel_size=2 model.sequence_parallel=true policy.generation.vllm_cfg.tensor_parallel_size=1
grep -qE '^step 2/2 .*\| refit [0-9.]+ s \(TP 2 -> 1 reshard' "$TMP/out.cp2tp2-gen1" ||
  fail "cp2tp2-gen1: no refit on the step line: $(grep '^step 2/2' "$TMP/out.cp2tp2-gen1")"

# Experts split over the context ranks (they fold into data x context): CP 2 x EP 2 over 2 ranks.
# The generator (every rank a data rank) keeps each rank's experts at its default EP 2, so its
# refit gathers nothing; at EP 1 it gathers the other rank's experts (this aborted in the refit
# before the generator had an expert-parallel size of its own).
cp_run cp2ep2 2 2 "DP 2 x EP 2 x TP 1 x CP 1 over 2 ranks (the trainer's: DP 1 x EP 2 x TP 1 x CP 2 over 2 ranks)" \
  model.expert_model_parallel_size=2
grep -qE '^step 2/2 .*\| refit [0-9.]+ s \(TP 1 -> 1 reshard, 0 MiB gathered' "$TMP/out.cp2ep2" ||
  fail "cp2ep2: the refit gathered: $(grep -oE 'refit [0-9.]+ s \([^;]*' "$TMP/out.cp2ep2")"
cp_run cp2ep2-gen1 2 2 "DP 2 x EP 1 x TP 1 x CP 1 over 2 ranks (the trainer's: DP 1 x EP 2 x TP 1 x CP 2 over 2 ranks)" \
  model.expert_model_parallel_size=2 policy.generation.vllm_cfg.expert_parallel_size=1
grep -qE '^step 2/2 .*\| refit [0-9.]+ s \(EP 2 -> 1 reshard, [0-9.]*[1-9][0-9.]* MiB gathered' "$TMP/out.cp2ep2-gen1" ||
  fail "cp2ep2-gen1: no expert gather: $(grep -oE 'refit [0-9.]+ s \([^;]*' "$TMP/out.cp2ep2-gen1")"

finish "GRPO at CP 2, CP 2 x DP 2 and CP 4 (GSPO, KL, a TP 2 -> 1 generator too) and CP 2 x EP 2 (generator EP 2 and 1) equals one process"
