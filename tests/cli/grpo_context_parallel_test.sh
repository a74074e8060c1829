#!/usr/bin/env bash
# GRPO under context parallelism (issue 23; NeMo RL's Megatron policy with context_parallel_size):
# the generator decodes whole rows at its own layout (the trainer's tensor size, every rank a data
# rank), the log-prob pass runs whole rows, and the training step gives each context rank its two
# chunks of every row (rows padded to a multiple of 2C), with the per-token loss terms (ratios,
# KL, masks, advantages) cut alike and the per-row sums and the normaliser summed over the
# context group. mpi_lib.sh's grpo_setup run (random initial weights, an overlong-length penalty so
# the update has a gradient) at CP 2, CP 2 x DP 2 and CP 4, and GSPO (terms over whole rows) at
# CP 4: losses, grad norms, rewards, generated tokens, the ratio extrema and the final weights
# equal one process's.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
source "$(dirname "${BASH_SOURCE[0]}")/mpi_lib.sh"

grpo_setup
expect_ok "GRPO, one process" '^step 2/2 ' "${grpo[@]}" checkpointing.checkpoint_dir="$TMP/rl1"
grpo_metrics "$TMP/rl1/metrics.jsonl" >"$TMP/rl1.m"
awk '{ if ($2 + 0 <= 0) bad = 1 } END { exit bad }' "$TMP/rl1.m" || fail "GRPO: a step without a gradient: $(cat "$TMP/rl1.m")"

cp_run() {  # NAME NP CP GENERATOR_LAYOUT OVERRIDES...: against $TMP/rl1
  local name=$1 np=$2 cp=$3 line=$4
  shift 4
  run=("${grpo[@]}")
  mpi "$np" "$name" model.context_parallel_size="$cp" checkpointing.checkpoint_dir="$TMP/$name" "$@" || return
  grep -qF "generator layout: $line" "$TMP/out.$name" ||
    fail "$name: no [generator layout: $line] line: $(grep -m3 'layout' "$TMP/out.$name")"
  grpo_same_as_one "GRPO $name" "$TMP/$name"
}
cp_run cp2 2 2 "DP 2 x EP 1 x TP 1 x CP 1 over 2 ranks (the trainer's: DP 1 x EP 1 x TP 1 x CP 2 over 2 ranks)"
cp_run cp2dp2 4 2 "DP 4 x EP 1 x TP 1 x CP 1 over 4 ranks (the trainer's: DP 2 x EP 1 x TP 1 x CP 2 over 4 ranks)"
cp_run cp4 4 4 "DP 4 x EP 1 x TP 1 x CP 1 over 4 ranks (the trainer's: DP 1 x EP 1 x TP 1 x CP 4 over 4 ranks)"

# GSPO, whose terms sum over whole rows (the per-row ratio and importance weight, their gradient
# through the row, the per-sequence loss mean), against its own one-process run at CP 4: 8 chunks
# of a row, so each row's response tokens lie on several ranks.
gspo=(loss_fn.sequence_level_importance_ratios=true loss_fn.token_level_loss=false)
rm -rf "$TMP/rl1"
expect_ok "GRPO (GSPO), one process" '^step 2/2 ' "${grpo[@]}" "${gspo[@]}" checkpointing.checkpoint_dir="$TMP/rl1"
grpo_metrics "$TMP/rl1/metrics.jsonl" >"$TMP/rl1.m"
cp_run cp4-gspo 4 4 "DP 4 x EP 1 x TP 1 x CP 1 over 4 ranks (the trainer's: DP 1 x EP 1 x TP 1 x CP 4 over 4 ranks)" "${gspo[@]}"

finish "GRPO at CP 2, CP 2 x DP 2 and CP 4 (GSPO too) equals one process"
