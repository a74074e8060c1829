#!/usr/bin/env bash
# GRPO with the generator split otherwise than the trainer (issue 23 §4; NeMo RL's
# policy.generation.vllm_cfg.tensor_parallel_size against the Megatron policy's
# model.tensor_model_parallel_size) under mpirun, against one process (mpi_lib.sh's grpo_setup
# run, random initial weights with an overlong-length penalty so the update has a gradient):
#  - trainer TP 2 -> generator TP 1: each rank gathers the whole policy from the tensor group
#    and rolls out half of every step's prompts with it; the rows then go to both trainer ranks;
#  - trainer TP 1 x DP 2 -> generator TP 2: each rank cuts its half of every split tensor from
#    its whole copy; both decode every prompt in lockstep, each trainer rank trains its half;
#  - trainer TP 2 x DP 2 -> generator TP 1 over 4 ranks (one prompt per generator rank).
# Losses, grad norms, rewards, generated tokens and the final weights must equal one process's;
# each step logs the refit (the reshard) time. Then the settings that cannot run, one line each.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
source "$(dirname "${BASH_SOURCE[0]}")/mpi_lib.sh"

grpo_setup
expect_ok "GRPO, one process" '^step 2/2 ' "${grpo[@]}" checkpointing.checkpoint_dir="$TMP/rl1"
grpo_metrics "$TMP/rl1/metrics.jsonl" >"$TMP/rl1.m"

gen_layout() {  # NAME NP TRAINER_TP GENERATOR_TP LAYOUT_LINE
  local name=$1 np=$2 tp=$3 gtp=$4 line=$5
  run=("${grpo[@]}")
  mpi "$np" "$name" model.tensor_model_parallel_size="$tp" policy.generation.vllm_cfg.tensor_parallel_size="$gtp" \
    checkpointing.checkpoint_dir="$TMP/$name" || return
  grep -qF "generator layout: $line" "$TMP/out.$name" ||
    fail "$name: no [generator layout: $line] line: $(grep -m3 'layout' "$TMP/out.$name")"
  [[ $(grep -cE '^step [12]/2 .*\| refit [0-9.]+ s' "$TMP/out.$name") -eq 2 ]] ||
    fail "$name: not one refit time per step: $(grep '^step' "$TMP/out.$name")"
  python3 -c 'import json,sys
steps = [json.loads(l) for l in open(sys.argv[1]) if "\"train\"" in l]
assert len(steps) == 2 and all(s["refit_bytes"] >= 0 and s["refit_seconds"] > 0 for s in steps), steps' \
    "$TMP/$name/metrics.jsonl" || fail "$name: metrics.jsonl lacks the refit's time and bytes"
  grpo_same_as_one "GRPO, trainer TP $tp -> generator TP $gtp over $np ranks" "$TMP/$name"
  cp "$TMP/out.$name" "${GEN_LAYOUT_LOGS:-$TMP}/$name.log" 2>/dev/null || true
}
gen_layout tp2-gen1 2 2 1 "DP 2 x EP 1 x TP 1 x CP 1 over 2 ranks (the trainer's: DP 1 x EP 1 x TP 2 x CP 1 over 2 ranks)"
gen_layout dp2-gen2 2 1 2 "DP 1 x EP 1 x TP 2 x CP 1 over 2 ranks (the trainer's: DP 2 x EP 1 x TP 1 x CP 1 over 2 ranks)"
gen_layout tp2dp2-gen1 4 2 1 "DP 4 x EP 1 x TP 1 x CP 1 over 4 ranks (the trainer's: DP 2 x EP 1 x TP 2 x CP 1 over 4 ranks)"
# TP 2 -> 1 gathers every split tensor: a rank's refit moves the other half of the policy.
python3 -c 'import json,sys
b = [json.loads(l)["refit_bytes"] for l in open(sys.argv[1]) if "\"train\"" in l]
assert b[0] > 0 and b[0] == b[1], b' "$TMP/tp2-gen1/metrics.jsonl" || fail "TP 2 -> 1 gathered no bytes"

# The dry run plans the generator: its layout and its copy of the weights (1/TP per rank).
run=("${grpo[@]}")
if mpi 2 dry model.tensor_model_parallel_size=2 policy.generation.vllm_cfg.tensor_parallel_size=1 --dry-run; then
  grep -qE '^generator layout: DP 2 x EP 1 x TP 1 x CP 1 over 2 ranks' "$TMP/out.dry" &&
    grep -qE 'the generator \(policy.generation.vllm_cfg.tensor_parallel_size 1\) holds its own copy of the weights, .* per rank, only while it generates' "$TMP/out.dry" &&
    echo "ok: the dry run plans the generator" || fail "dry run: $(grep -E 'generator|memory' "$TMP/out.dry")"
fi

# Settings that cannot run: one line naming the key, exit 2.
src="recipes/super3/rl/tiny.yaml"
key="policy.generation.vllm_cfg.tensor_parallel_size"
run=("${grpo[@]}")
bad_layout "a generator TP not dividing the Mamba groups" 2 \
  "$src: $key: 4 does not divide model.n_groups (2): the generator splits it over its tensor-parallel ranks" \
  "${grpo[@]}" "$key=4"
bad_layout "a generator TP not dividing the ranks" 3 "$src: $key: 2 does not divide the 3 ranks of the run" \
  "${grpo[@]}" "$key=2"
expect_error "a generator TP with experts split" \
  "$src: $key: 2: a generator split otherwise than the trainer (model.tensor_model_parallel_size = 1) needs model.expert_model_parallel_size 1 (experts are not resharded yet); set 1 or leave it out" \
  "${grpo[@]}" "$key=2" model.expert_model_parallel_size=2 --dry-run
expect_error "a generator TP of 0" "$src: $key: expected a positive integer, got 0" "${grpo[@]}" "$key=0" --dry-run

finish "generator layout checks"
