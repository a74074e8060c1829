#!/usr/bin/env bash
# GRPO's dynamic sampling (grpo.use_dynamic_sampling, rl/grpo_dynamic_sampling.h) under data
# parallelism: each rank generates half of every round's prompts, every rank then filters every
# rank's groups (the rows are shared), so 2 ranks keep and train on the groups one process keeps.
# grpo_setup's run (random weights; an overlong-length penalty gives the rows of a group different
# rewards unless every row of it is cut at the same length: those groups are dropped) with rounds
# of int(4 x 1.5) = 6 prompts: each step's losses, grad norm, reward, tokens, its rounds, kept rows
# discarded and filtered_reward, and the final weights, must equal the single process's.
# A run stopped after step 1 and resumed repeats the uninterrupted one (bit for bit in one process,
# within the DP tolerances at DP 2). Then bad values: one line naming the key, exit 2.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
source "$(dirname "${BASH_SOURCE[0]}")/mpi_lib.sh"

grpo_setup
ds=(grpo.use_dynamic_sampling=true grpo.batch_multiplier=1.5 grpo.dynamic_sampling_max_gen_batches=10)
ds_metrics() {
  python3 -c 'import json,sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") == "train":
        print(r["dynamic_sampling_num_gen_batches"], r["dynamic_sampling_num_discarded_valid_samples"],
              repr(r["filtered_reward"]))' "$1"
}
grpo_one "GRPO with dynamic sampling, one process" "${ds[@]}"
grpo_trains
grep -qE '^step 1/2 .* dynamic sampling: [0-9]+ round' "$TMP/out" &&
  echo "ok: the step lines give the rounds" || fail "no rounds in the step lines: $(grep '^step' "$TMP/out" | head -2)"
grep -q '^dynamic sampling: generation rounds of 6 prompts x 4; groups whose rewards are all equal are dropped until 4 groups' "$TMP/out" "$TMP/err" &&
  echo "ok: the start-up line states the rounds" || fail "no dynamic sampling start-up line: $(grep -i dynamic "$TMP/out" | head -2)"
ds_metrics "$TMP/rl1/metrics.jsonl" >"$TMP/rl1.ds"
if grpo_mpi "GRPO with dynamic sampling" rl2 "${ds[@]}"; then
  ds_metrics "$TMP/rl2/metrics.jsonl" >"$TMP/rl2.ds"
  awk '{ if ($1 + 0 < 1) bad = 1 } END { exit bad }' "$TMP/rl1.ds" && [[ -s $TMP/rl1.ds ]] ||
    fail "no dynamic sampling metrics: $(cat "$TMP/rl1.ds")"
  if cmp -s "$TMP/rl1.ds" "$TMP/rl2.ds"; then
    echo "ok: DP 2 took the single process's rounds, discarded as many kept rows, same filtered_reward ($(tr '\n' ';' <"$TMP/rl1.ds"))"
  else
    fail "DP 2's dynamic sampling differs: $(paste -d' ' "$TMP/rl2.ds" "$TMP/rl1.ds" | tr '\n' ';')"
  fi
  grpo_same_as_one "GRPO DP 2 with dynamic sampling" "$TMP/rl2"
fi

# Exact resume: a run stopped after step 1 (its checkpoint holds the prompt cursor, which the
# step's 7 rounds of 6 prompts carried past the 32 training prompts into epoch 1) and resumed
# for step 2 repeats the uninterrupted run: in one process bit for bit (metrics and weights), at
# DP 2 (stopped and resumed at DP 2) within grpo_same_as_one's tolerances. The rounds' sampling
# streams are keyed by (step, round, row), not by anything a restart resets.
resumed() {  # NAME LAUNCH...: the run stopped at step 1 and resumed to step 2 in $TMP/NAME
  local name=$1 rc
  shift
  for steps in 1 2; do
    "$@" "${grpo[@]}" "${ds[@]}" grpo.max_num_steps=$steps checkpointing.save_period=1 \
      checkpointing.checkpoint_dir="$TMP/$name" >"$TMP/out.$name$steps" 2>"$TMP/err.$name$steps"
    rc=$?
    [[ $rc -eq 0 ]] || { fail "$name: the run to step $steps: exit $rc: $(tail -3 "$TMP/err.$name$steps")"; return 1; }
  done
  grep -q "^resumed from $TMP/$name/iter_0000001 at step 1 (epoch 1, " "$TMP/out.${name}2" ||
    { fail "$name: not resumed at step 1 in epoch 1: $(grep -m1 '^resumed' "$TMP/out.${name}2")"; return 1; }
  ds_metrics "$TMP/$name/metrics.jsonl" >"$TMP/$name.ds"
  if cmp -s "$TMP/$name.ds" "$TMP/rl1.ds"; then
    echo "ok: $name: resumed at step 1 with the uninterrupted run's rounds, discarded rows and filtered_reward"
  else
    fail "$name: dynamic sampling differs after the resume: $(paste -d' ' "$TMP/$name.ds" "$TMP/rl1.ds" | tr '\n' ';')"
  fi
}
if resumed rs1; then
  cmp -s <(grpo_metrics "$TMP/rs1/metrics.jsonl") "$TMP/rl1.m" &&
    python3 tests/cli/safetensors_diff.py "$TMP/rs1/iter_0000002/model.safetensors" \
      "$TMP/rl1/iter_0000002/model.safetensors" 0 0 >/dev/null &&
    echo "ok: one process resumed at step 1: losses, grad norms, rewards, tokens and final weights bit for bit" ||
    fail "one process resumed at step 1 differs: $(grpo_metrics "$TMP/rs1/metrics.jsonl" | paste -d' ' - "$TMP/rl1.m" | tr '\n' ';')"
fi
resumed rs2 "${MPIRUN[@]}" -np 2 && grpo_same_as_one "GRPO DP 2 with dynamic sampling, stopped at step 1 and resumed" "$TMP/rs2"

expect_exit2() {  # WHAT NEEDLE ARGS...: exit 2 with NEEDLE in one line of stderr
  local what=$1 needle=$2
  shift 2
  "$@" >"$TMP/out2" 2>"$TMP/err2"
  local rc=$?
  if [[ $rc -eq 2 ]] && grep -qF -- "$needle" "$TMP/err2"; then
    echo "ok: $what: exit 2, $(grep -F -- "$needle" "$TMP/err2" | head -1)"
  else
    fail "$what: exit $rc, stderr: $(tail -3 "$TMP/err2")"
  fi
}
expect_exit2 "batch_multiplier without dynamic sampling" "grpo.batch_multiplier: 2 needs use_dynamic_sampling: true" \
  "${grpo[@]}" grpo.batch_multiplier=2 checkpointing.checkpoint_dir="$TMP/bad1"
expect_exit2 "batch_multiplier below 1" "grpo.batch_multiplier: 0.5 must be" \
  "${grpo[@]}" grpo.use_dynamic_sampling=true grpo.batch_multiplier=0.5 checkpointing.checkpoint_dir="$TMP/bad2"
expect_exit2 "a zero rounds cap" "grpo.dynamic_sampling_max_gen_batches" \
  "${grpo[@]}" grpo.use_dynamic_sampling=true grpo.dynamic_sampling_max_gen_batches=0 checkpointing.checkpoint_dir="$TMP/bad3"
"${MPIRUN[@]}" -np 2 "${grpo[@]}" grpo.use_dynamic_sampling=true grpo.batch_multiplier=1.25 \
  checkpointing.checkpoint_dir="$TMP/bad4" >"$TMP/outb4" 2>"$TMP/errb4"
rc=$?
[[ $rc -eq 2 ]] && grep -q 'grpo.batch_multiplier: 1.25 x grpo.num_prompts_per_step 4 = 5 prompts' "$TMP/errb4" &&
  echo "ok: a round that does not split over 2 ranks: exit 2" || fail "odd round over 2 ranks: exit $rc: $(tail -3 "$TMP/errb4")"
finish "GRPO dynamic sampling under data parallelism (equal to one process) and its bad values"
