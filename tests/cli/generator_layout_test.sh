#!/usr/bin/env bash
# GRPO with the generator split otherwise than the trainer (issue 23 §4; NeMo RL's
# policy.generation.vllm_cfg.tensor_parallel_size against the Megatron policy's
# model.tensor_model_parallel_size) under mpirun, against one process (mpi_lib.sh's grpo_setup
# run, random initial weights with an overlong-length penalty so the update has a gradient):
#  - trainer TP 2 -> generator TP 1: each rank gathers the whole policy from the tensor group
#    and rolls out half of every step's prompts with it; the rows then go to both trainer ranks;
#  - trainer TP 1 x DP 2 -> generator TP 2: each rank cuts its half of every split tensor from
#    its whole copy; both decode every prompt in lockstep, each trainer rank trains its half;
#  - trainer TP 2 x DP 2 -> generator TP 1 over 4 ranks (one prompt per generator rank);
#  - with the experts split (policy.generation.vllm_cfg.expert_parallel_size against
#    model.expert_model_parallel_size): trainer EP 2 -> generator EP 1, EP 1 (DP 2) -> EP 2, and
#    TP 2 -> TP 1 x EP 2 over 2 ranks, TP 2 x EP 2 -> TP 1 x EP 2 over 4.
# Losses, grad norms, rewards, generated tokens and the final weights must equal one process's;
# each step logs the refit (the reshard) time. Then the settings that cannot run, one line each.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
source "$(dirname "${BASH_SOURCE[0]}")/mpi_lib.sh"

grpo_setup
grpo_one "GRPO, one process"

gen_layout() {  # NAME NP LAYOUT_LINE WHAT OVERRIDES...
  local name=$1 np=$2 line=$3 what=$4
  shift 4
  run=("${grpo[@]}")
  mpi "$np" "$name" "$@" checkpointing.checkpoint_dir="$TMP/$name" || return
  grep -qF "generator layout: $line" "$TMP/out.$name" ||
    fail "$name: no [generator layout: $line] line: $(grep -m3 'layout' "$TMP/out.$name")"
  [[ $(grep -cE '^step [12]/2 .*\| refit [0-9.]+ s' "$TMP/out.$name") -eq 2 ]] ||
    fail "$name: not one refit time per step: $(grep '^step' "$TMP/out.$name")"
  python3 -c 'import json,sys
steps = [json.loads(l) for l in open(sys.argv[1]) if "\"train\"" in l]
assert len(steps) == 2 and all(s["refit_bytes"] >= 0 and s["refit_seconds"] > 0 for s in steps), steps' \
    "$TMP/$name/metrics.jsonl" || fail "$name: metrics.jsonl lacks the refit's time and bytes"
  grpo_same_as_one "GRPO, $what over $np ranks" "$TMP/$name"
  cp "$TMP/out.$name" "${GEN_LAYOUT_LOGS:-$TMP}/$name.log" 2>/dev/null || true
}
tp_ep() {  # TRAINER_TP GENERATOR_TP [TRAINER_EP GENERATOR_EP]: the overrides
  echo model.tensor_model_parallel_size="$1" policy.generation.vllm_cfg.tensor_parallel_size="$2" \
    model.expert_model_parallel_size="${3:-1}" policy.generation.vllm_cfg.expert_parallel_size="${4:-1}"
}
# shellcheck disable=SC2046  # tp_ep's words are the overrides
{
gen_layout tp2-gen1 2 "DP 2 x EP 1 x TP 1 x CP 1 over 2 ranks (the trainer's: DP 1 x EP 1 x TP 2 x CP 1 over 2 ranks)" \
  "trainer TP 2 -> generator TP 1" $(tp_ep 2 1)
gen_layout dp2-gen2 2 "DP 1 x EP 1 x TP 2 x CP 1 over 2 ranks (the trainer's: DP 2 x EP 1 x TP 1 x CP 1 over 2 ranks)" \
  "trainer TP 1 -> generator TP 2" $(tp_ep 1 2)
gen_layout tp2dp2-gen1 4 "DP 4 x EP 1 x TP 1 x CP 1 over 4 ranks (the trainer's: DP 2 x EP 1 x TP 2 x CP 1 over 4 ranks)" \
  "trainer TP 2 -> generator TP 1" $(tp_ep 2 1)
# Experts split (issue 23 §4): trainer EP 2 -> generator EP 1 all-gathers every expert over the
# trainer's expert group (each rank generates half the prompts with all 4 experts); trainer EP 1
# (DP 2) -> generator EP 2 keeps each rank's 2 experts of the whole set (nothing gathered; the
# engines of the expert group then exchange tokens by all-to-all); trainer TP 2 -> generator TP 1
# x EP 2 gathers the tensor parts and keeps the rank's experts; over 4 ranks trainer TP 2 x EP 2
# -> generator TP 1 x EP 2 moves experts to other ranks (rank 1's trainer holds tensor parts of
# experts 0-1, its generator whole experts 2-3): both gathers.
gen_layout ep2-gen1 2 "DP 2 x EP 1 x TP 1 x CP 1 over 2 ranks (the trainer's: DP 2 x EP 2 x TP 1 x CP 1 over 2 ranks)" \
  "trainer EP 2 -> generator EP 1" $(tp_ep 1 1 2 1)
gen_layout dp2-genep2 2 "DP 2 x EP 2 x TP 1 x CP 1 over 2 ranks (the trainer's: DP 2 x EP 1 x TP 1 x CP 1 over 2 ranks)" \
  "trainer EP 1 -> generator EP 2" $(tp_ep 1 1 1 2)
gen_layout tp2-genep2 2 "DP 2 x EP 2 x TP 1 x CP 1 over 2 ranks (the trainer's: DP 1 x EP 1 x TP 2 x CP 1 over 2 ranks)" \
  "trainer TP 2 -> generator TP 1 x EP 2" $(tp_ep 2 1 1 2)
gen_layout tp2ep2-gen1 4 "DP 4 x EP 2 x TP 1 x CP 1 over 4 ranks (the trainer's: DP 2 x EP 2 x TP 2 x CP 1 over 4 ranks)" \
  "trainer TP 2 x EP 2 -> generator TP 1 x EP 2" $(tp_ep 2 1 2 2)
}
# TP 2 -> 1 gathers every split tensor: a rank's refit moves the other half of the policy.
python3 -c 'import json,sys
b = [json.loads(l)["refit_bytes"] for l in open(sys.argv[1]) if "\"train\"" in l]
assert b[0] > 0 and b[0] == b[1], b' "$TMP/tp2-gen1/metrics.jsonl" || fail "TP 2 -> 1 gathered no bytes"

# The refit says what it moves; EP 2 -> 1 gathers the other rank's experts, EP 1 -> 2 nothing.
grep -qE '^step 1/2 .*\| refit [0-9.]+ s \(EP 2 -> 1 reshard, [0-9.]+ MiB gathered per rank' "$TMP/out.ep2-gen1" &&
  grep -qE '^step 1/2 .*\| refit [0-9.]+ s \(EP 1 -> 2 reshard, 0 MiB gathered per rank' "$TMP/out.dp2-genep2" &&
  grep -qE '^step 1/2 .*\| refit [0-9.]+ s \(TP 2 -> 1, EP 1 -> 2 reshard' "$TMP/out.tp2-genep2" &&
  grep -qE '^step 1/2 .*\| refit [0-9.]+ s \(TP 2 -> 1, EP 2 -> 2 \(experts to other ranks\) reshard' "$TMP/out.tp2ep2-gen1" &&
  echo "ok: the step line names the refit's change of layout" ||
  fail "refit lines: $(grep -h '^step 1/2' "$TMP"/out.ep2-gen1 "$TMP"/out.dp2-genep2 "$TMP"/out.tp2-genep2 "$TMP"/out.tp2ep2-gen1 | grep -oE 'refit .*')"
python3 -c 'import json,sys
b = [[json.loads(l)["refit_bytes"] for l in open(f) if "\"train\"" in l] for f in sys.argv[1:]]
assert b[0][0] > 0 and b[1] == [0, 0], b' "$TMP/ep2-gen1/metrics.jsonl" "$TMP/dp2-genep2/metrics.jsonl" ||
  fail "EP 2 -> 1 gathered nothing or EP 1 -> 2 gathered something"

# The dry run plans the generator: its layout and its copy of the weights (1/TP per rank).
run=("${grpo[@]}")
if mpi 2 dry model.tensor_model_parallel_size=2 policy.generation.vllm_cfg.tensor_parallel_size=1 --dry-run; then
  grep -qE '^generator layout: DP 2 x EP 1 x TP 1 x CP 1 over 2 ranks' "$TMP/out.dry" &&
    grep -qE 'the generator \(policy.generation.vllm_cfg.tensor_parallel_size 1, expert_parallel_size 1\) holds its own copy of the weights, .* per rank, only while it generates' "$TMP/out.dry" &&
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
ekey="policy.generation.vllm_cfg.expert_parallel_size"
expect_error "a generator EP not dividing the experts" \
  "$src: $ekey: 3 does not divide model.n_routed_experts (4): the generator splits the experts over its expert-parallel ranks" \
  "${grpo[@]}" "$ekey=3" --dry-run
bad_layout "a generator EP not dividing its data ranks" 2 \
  "$src: $ekey: 2 does not divide the generator's 1 data-parallel ranks (the 2 ranks of the run over its tensor-parallel size 2); the experts are split within them" \
  "${grpo[@]}" "$key=2" "$ekey=2"
expect_error "a generator TP of 0" "$src: $key: expected a positive integer, got 0" "${grpo[@]}" "$key=0" --dry-run

finish "generator layout checks"
