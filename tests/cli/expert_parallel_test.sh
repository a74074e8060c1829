#!/usr/bin/env bash
# Expert parallelism under a real launcher (Open MPI's mpirun on this machine's cores): the tiny
# super3 recipe (4 routed experts top-2 with a latent projection and a shared expert, aux loss,
# expert-bias updates, an MoE layer in the MTP block too) for 4 steps with validation, as one
# process and with model.expert_model_parallel_size = 2 and 4. Each rank then holds E / EP experts,
# routes its own micro-batches over all of them and exchanges the routed rows with the experts'
# ranks by all-to-all (model/expert_exchange.h); the experts' gradients are summed over their
# copies (the expert-data group) and the gradient norm over every expert once. The layouts:
#   EP 2 over 2 ranks, EP 4 over 4 ranks, EP 2 in DP 4 (4 ranks: two copies of each expert; the
#   experts fold into the data ranks as Megatron's do), and that with the distributed optimizer
#   (the dense state sharded over 4, the experts' whole on their ranks).
# Every loss (train, MTP, grad norm, validation) and the weights at iteration 4 must equal the
# single process's within float32 rounding of another summation order (cli.data_parallel's
# tolerances; seen: 4e-8 for the losses). Then the sharded checkpoints of EP 4 and of EP 2 in DP 4
# continue at EP 2, in one process and at DP 2, again as the uninterrupted single process.
# Then the layouts that cannot run: one line naming the key, exit 2, before anything starts; and
# GRPO at EP 2, EP 2 in DP 4 and TP 2 x EP 2 against one process.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
source "$(dirname "${BASH_SOURCE[0]}")/mpi_lib.sh"

run=("${tiny_run[@]}")

# The uninterrupted single process (checkpoints at 2, 4, 6): the reference of same_run.
expect_ok "one process" '^ iteration +6/ +6 ' "${run[@]}" checkpoint.save="$TMP/dp1" checkpoint.save_interval=2

# Each layout (mpi_lib.sh) trains to iteration 4: its losses and its weights (each expert written
# once, by the first of its copies) are the single process's.
layout ep2 2 model.expert_model_parallel_size=2
layout ep4 4 model.expert_model_parallel_size=4
layout ep2dp4 4 model.expert_model_parallel_size=2
layout ep2dp4zero 4 model.expert_model_parallel_size=2 "${zero[@]}"
grep -q '^rank layout: DP 4 x EP 2 x TP 1 x CP 1 over 4 ranks' "$TMP/out.ep2dp4" ||
  fail "the run does not print its layout: $(head -20 "$TMP/out.ep2dp4")"

# A checkpoint written at one layout continues at another: EP 4 -> EP 2, EP 4 -> one process,
# EP 2 in DP 4 with the distributed optimizer -> DP 2 without experts split (EP 1), each with the
# uninterrupted single process's losses for iterations 5 and 6 and its final weights.
if mpi 2 ep4to2 model.expert_model_parallel_size=2 checkpoint.load="$TMP/ep4" checkpoint.save="$TMP/ep4to2" \
  checkpoint.save_interval=0; then
  grep -q "resumed from $TMP/ep4/iter_0000004 at iteration 4" "$TMP/out.ep4to2" || fail "EP 4 -> EP 2: not resumed at 4"
  same_run "EP 4 checkpoint resumed at EP 2" "$TMP/ep4to2" 6 5
fi
expect_ok "EP 4 checkpoint in one process" '^ iteration +6/ +6 ' "${run[@]}" checkpoint.load="$TMP/ep4" \
  checkpoint.save="$TMP/ep4to1" checkpoint.save_interval=0
same_run "EP 4 checkpoint resumed in one process" "$TMP/ep4to1" 6 5
if mpi 2 ep2zto1 "${zero[@]}" checkpoint.load="$TMP/ep2dp4zero" checkpoint.save="$TMP/ep2zto1" checkpoint.save_interval=0; then
  same_run "EP 2 in DP 4 (distributed optimizer) checkpoint resumed at DP 2, EP 1" "$TMP/ep2zto1" 6 5
fi

# Layouts that cannot run (mpi_lib.sh's bad_layout).
bad_layout "EP on a model without routed experts" 2 \
  "recipes/nano3/pretrain/tiny.yaml: model.expert_model_parallel_size: 2: the model has no routed experts (no E layer in hybrid_override_pattern)" \
  "$BIN" nano3 pretrain -c tiny dataset.mock=true model.hybrid_override_pattern='M*M' model.expert_model_parallel_size=2

# GRPO with the experts split: each data rank generates and trains its share of every step's
# prompts, and the engines of an expert group step together (one host all-reduce a step; a rank
# whose rollouts are done extends a one-token dummy so its MoE layers still serve the others'
# tokens: engine::StepModel::group_has_work / idle_step). EP 2 over 2 ranks, EP 2 in DP 4 and
# TP 2 x EP 2 must give one process's losses, grad norms, rewards, generated tokens and weights.
# A stop string the random model's text often holds ends rows at different steps, so some ranks'
# engines idle while others decode (metrics' engine_idle_steps, summed over the ranks, must be > 0).
grpo_setup
grpo+=('policy.generation.stop_strings=["1"]')
grpo_one "GRPO, one process"
for layout in "2 1 2" "4 1 2" "4 2 2"; do
  read -r np tp ep <<<"$layout"
  name="rl-ep$ep-tp$tp-np$np"
  run=("${grpo[@]}")
  ok=0
  mpi "$np" "$name" model.expert_model_parallel_size=$ep model.tensor_model_parallel_size=$tp \
    checkpointing.checkpoint_dir="$TMP/$name" && ok=1
  run=("${tiny_run[@]}")
  [[ $ok -eq 1 ]] || continue
  what="GRPO at EP $ep, TP $tp over $np ranks"
  idle=$(python3 -c 'import json,sys; print(sum(json.loads(l).get("engine_idle_steps", 0) for l in open(sys.argv[1])))' \
    "$TMP/$name/metrics.jsonl")
  [[ $idle -gt 0 ]] && echo "ok: $what: $idle idle engine steps (ranks whose rollouts ended first)" ||
    fail "$what: no engine ever idled, so the lockstep was not exercised"
  grpo_same_as_one "$what" "$TMP/$name"
done
finish "expert parallelism (EP 2, EP 4, EP 2 in DP 4, with the distributed optimizer; GRPO at EP 2, EP 2 in DP 4, TP 2 x EP 2) equals one process, its checkpoints load at other layouts; layouts it cannot run refused"
