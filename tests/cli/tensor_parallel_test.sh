#!/usr/bin/env bash
# Tensor parallelism (issue 23) under a real launcher (Open MPI's mpirun on this machine's cores):
# the tiny super3 recipe, whose trunk M*M-ME and MTP block *E hold every block kind of Nemotron 3
# (Mamba-2, GQA attention, the squared-ReLU MLP, MoE with a shared expert, a latent projection, the
# aux loss and expert-bias updates), for 4 steps with validation, as one process and with
# model.tensor_model_parallel_size = 2 and 4. Each rank of a tensor group holds 1/TP of the heads,
# KV groups, Mamba heads and groups (each block of in_proj and conv1d split on its own), MLP and
# expert widths; the router, norms and latent projections are whole on every rank; the layer stack
# sums the mixers' partial outputs and input gradients over the group (Megatron's row-parallel
# all-reduce and its adjoint).
# The layouts: TP 2, TP 4 (with 4 Mamba groups, which TP 4 must divide; the recipe's 2 KV groups,
# fewer than 4 ranks: each rank computes the one its query heads read, k/v whole), TP 2 x
# DP 2, TP 2 x EP 2 (DP 2, the experts split over the data ranks and by width), TP 2 x DP 2 with
# the distributed optimizer, and sequence parallelism at TP 2, TP 4 and TP 2 x EP 2 (+ ZeRO). Every loss (train, MTP, grad norm, validation) and the weights at
# iteration 4 must equal the single process's within float32 rounding of another summation order
# (cli.data_parallel's tolerances). Then a TP 2 checkpoint continues in one process and at TP 4
# (with the TP 4 model) as the uninterrupted single process; then the layouts that cannot run.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
source "$(dirname "${BASH_SOURCE[0]}")/mpi_lib.sh"

wide=(model.n_groups=4)  # divisible by 4: the TP 4 model (2 KV groups shared by 2 ranks each)
run=("${tiny_run[@]}")

# The uninterrupted single processes (checkpoints at 2, 4, 6), of the recipe's model and of the
# TP 4 one: the references of same_run ($TMP/dp1 is same_run's).
expect_ok "one process" '^ iteration +6/ +6 ' "${run[@]}" checkpoint.save="$TMP/dp1" checkpoint.save_interval=2
expect_ok "one process, 4 Mamba groups" '^ iteration +6/ +6 ' "${run[@]}" "${wide[@]}" \
  checkpoint.save="$TMP/wide1" checkpoint.save_interval=2

# same_run_as (mpi_lib.sh) against another single process's run. Weights get an absolute tolerance
# of 1e-4 (2e-4 for the TP 4 model): the partial sums over 2 or 4 ranks move the float32 gradients
# by ~1e-7 relative, which AdamW's m / sqrt(v) turns into up to ~5e-5 (TP 2) and ~9e-5 (TP 4) on
# the few embedding entries whose gradient is near 0, while every loss stays within 5e-7.
same_run_wide() { same_run_as wide1 2e-4 "$@"; }

layout() {  # NAME NP REFERENCE OVERRIDES...
  local name=$1 np=$2 ref=$3
  shift 3
  if mpi "$np" "$name" checkpoint.save="$TMP/$name" train.exit_interval=4 "$@"; then
    [[ $(grep -cE '^ iteration +4/ +6 ' "$TMP/out.$name") -eq 1 ]] || fail "$name: not one log: $(tail -3 "$TMP/out.$name")"
    if [[ $ref == wide1 ]]; then same_run_wide "$name" "$TMP/$name" 4 0; else same_run "$name" "$TMP/$name" 4 0 1e-4; fi
  fi
}
layout tp2 2 dp1 model.tensor_model_parallel_size=2
layout tp4 4 wide1 model.tensor_model_parallel_size=4 "${wide[@]}"
layout tp2dp2 4 dp1 model.tensor_model_parallel_size=2
layout tp2ep2 4 dp1 model.tensor_model_parallel_size=2 model.expert_model_parallel_size=2
layout tp2dp2zero 4 dp1 model.tensor_model_parallel_size=2 "${zero[@]}"
# Small buckets: each reduce-scattered from the last backward's layer hook, after its parameters'
# partial sums over the tensor group.
layout tp2dp2zerob 4 dp1 model.tensor_model_parallel_size=2 "${zero[@]}" ddp.bucket_size=20000
# Sequence parallelism: between the split mixers each rank holds half (a quarter) of the rows;
# all-gathers and reduce-scatters replace the all-reduces; norms' gradients summed over the group.
layout tp2sp 2 dp1 model.tensor_model_parallel_size=2 model.sequence_parallel=true
layout tp4sp 4 wide1 model.tensor_model_parallel_size=4 model.sequence_parallel=true "${wide[@]}"
layout tp2spep2 4 dp1 model.tensor_model_parallel_size=2 model.sequence_parallel=true model.expert_model_parallel_size=2 \
  "${zero[@]}"
grep -q '^rank layout: DP 2 x EP 2 x TP 2 x CP 1 over 4 ranks' "$TMP/out.tp2ep2" ||
  fail "the run does not print its layout: $(head -20 "$TMP/out.tp2ep2")"

# DeciLM (super49b tiny: per-layer KV heads and FFN widths, no_op attention, RoPE, SwiGLU) at TP 2.
decilm=("$BIN" super49b pretrain -c tiny dataset.mock=true train.train_iters=4 train.global_batch_size=8
  train.micro_batch_size=2 train.eval_interval=2 train.eval_iters=1 logger.tensorboard_dir=null
  scheduler.lr_warmup_iters=1 scheduler.lr_wsd_decay_iters=3)
expect_ok "DeciLM, one process" '^ iteration +4/ +4 ' "${decilm[@]}" checkpoint.save="$TMP/decilm1" \
  checkpoint.save_interval=2
run=("${decilm[@]}")
ok=0
mpi 2 decilm_tp2 model.tensor_model_parallel_size=2 checkpoint.save="$TMP/decilm_tp2" checkpoint.save_interval=2 && ok=1
run=("${tiny_run[@]}")
[[ $ok -eq 1 ]] && same_run_as decilm1 1e-4 "DeciLM at TP 2" "$TMP/decilm_tp2" 4 0

# GRPO: the trainer and the generation engine tensor-parallel (every rank of a tensor group decodes
# the same rollouts in lockstep, the split layers summed over the group), at TP 2 (with and without
# sequence parallelism in the trainer) and TP 2 x DP 2
# (each data rank half of every step's prompts). Random initial weights with an overlong-length
# penalty, so the rows get different rewards and the update a gradient (cli.data_parallel's run).
grpo_setup
grpo_one "GRPO, one process"
for layout in "2 2 false" "2 2 true" "4 2 false"; do
  read -r np tp sp <<<"$layout"
  name="rl-tp$tp-np$np-sp$sp"
  run=("${grpo[@]}")
  ok=0
  mpi "$np" "$name" model.tensor_model_parallel_size=$tp model.sequence_parallel=$sp \
    checkpointing.checkpoint_dir="$TMP/$name" && ok=1
  run=("${tiny_run[@]}")
  [[ $ok -eq 1 ]] && grpo_same_as_one "GRPO at TP $tp (sequence parallel $sp) over $np ranks" "$TMP/$name"
done

# convert export gathers a TP 4 checkpoint (several row boxes per Mamba in_proj and conv1d) into
# the Hugging Face tensors the one-process run of that model exports.
expect_ok "convert export of TP 4" 'wrote' "$BIN" convert export --checkpoint "$TMP/tp4" --out "$TMP/hf_tp4"
expect_ok "convert export of one process" 'wrote' "$BIN" convert export --checkpoint "$TMP/wide1/iter_0000004" \
  --out "$TMP/hf_wide1"
if msg=$(python3 tests/cli/safetensors_diff.py "$TMP/hf_tp4/model.safetensors" "$TMP/hf_wide1/model.safetensors" 2e-4 1e-4); then
  echo "ok: the TP 4 export equals the single process's ($msg)"
else
  fail "the TP 4 export differs: $msg"
fi

# Checkpoints reshard across tensor-parallel layouts: TP 2 -> one process, TP 2 x DP 2 with the
# distributed optimizer -> TP 2 alone, and (the TP 4 model) TP 4 -> TP 2 -> ... each continuing
# with the uninterrupted single process's losses for iterations 5 and 6 and its final weights.
expect_ok "TP 2 checkpoint in one process" '^ iteration +6/ +6 ' "${run[@]}" checkpoint.load="$TMP/tp2" \
  checkpoint.save="$TMP/tp2to1" checkpoint.save_interval=0
same_run "TP 2 checkpoint resumed in one process" "$TMP/tp2to1" 6 5 1e-4
if mpi 2 tp2zto2 model.tensor_model_parallel_size=2 checkpoint.load="$TMP/tp2dp2zero" checkpoint.save="$TMP/tp2zto2" \
  checkpoint.save_interval=0; then
  same_run "TP 2 x DP 2 (distributed optimizer) checkpoint resumed at TP 2" "$TMP/tp2zto2" 6 5 1e-4
fi
if mpi 2 tp4to2 model.tensor_model_parallel_size=2 "${wide[@]}" checkpoint.load="$TMP/tp4" \
  checkpoint.save="$TMP/tp4to2" checkpoint.save_interval=0; then
  same_run_wide "TP 4 checkpoint resumed at TP 2" "$TMP/tp4to2" 6 5
fi
# One process's checkpoint continues at TP 4.
if mpi 4 wide1to4 model.tensor_model_parallel_size=4 "${wide[@]}" checkpoint.load="$TMP/wide1/iter_0000004" \
  checkpoint.save="$TMP/wide1to4" checkpoint.save_interval=0; then
  same_run_wide "one process's checkpoint resumed at TP 4" "$TMP/wide1to4" 6 5
fi

# Layouts that cannot run (mpi_lib.sh's bad_layout).
bad_layout "TP neither dividing the KV heads nor a multiple of them" 4 \
  "recipes/super3/pretrain/tiny.yaml: model.tensor_model_parallel_size: 4 neither divides model.num_key_value_heads = 3 nor is a multiple of it (tensor parallelism splits the KV groups, or gives each rank one of them)" \
  "${run[@]}" model.tensor_model_parallel_size=4 model.n_groups=4 model.num_attention_heads=12 model.num_key_value_heads=3
bad_layout "TP not dividing the Mamba groups" 4 \
  "recipes/super3/pretrain/tiny.yaml: model.tensor_model_parallel_size: 4 does not divide model.n_groups = 2 (tensor parallelism splits it)" \
  "${run[@]}" model.tensor_model_parallel_size=4
bad_layout "TP not dividing the world" 2 \
  "recipes/super3/pretrain/tiny.yaml: model.tensor_model_parallel_size: 4 x model.context_parallel_size 1 = 4 does not divide the world size 2 (ranks started by the launcher)" \
  "${run[@]}" model.tensor_model_parallel_size=4 "${wide[@]}"
bad_layout "SP not dividing the sequence" 2 \
  "recipes/super3/pretrain/tiny.yaml: model.sequence_parallel: true splits each sequence's 127 tokens (dataset.seq_length) over the 2 tensor-parallel ranks, which must divide it" \
  "${run[@]}" model.tensor_model_parallel_size=2 model.sequence_parallel=true dataset.seq_length=127

finish "tensor parallelism (TP 2, TP 4, TP 2 x DP 2, TP 2 x EP 2, with the distributed optimizer, with sequence parallelism; DeciLM at TP 2; GRPO at TP 2 and TP 2 x DP 2) equals one process, its checkpoints load at other layouts; layouts it cannot run refused"
