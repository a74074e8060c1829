#!/usr/bin/env bash
# Full parameter sharding (Megatron FSDP's ddp.use_megatron_fsdp=true with
# ddp.data_parallel_sharding_strategy=optim_grads_params; train/param_gather.h) under mpirun on this
# machine's cores: `nemotron super3 pretrain -c tiny` (Mamba, attention, MLP, latent MoE with
# expert-bias updates, MTP) for 6 steps with validation. Each rank keeps 1/D of the weights, each
# trunk layer is all-gathered before its forward and its backward (the next one prefetched), and
# 1/D of the float32 gradients: each layer's accumulate in a reused layer slot, are reduce-scattered
# per micro-batch and added into the rank's slice (train/grad_slots.h); the update writes the
# rank's slices only, so:
#  - DP2 (2 micro-batches per rank: gradient accumulation), DP2 with full recomputation and DP4
#    equal the single process within the tolerances of cli.distributed_optimizer (losses 1e-5
#    relative, weights 5e-5 + 1e-4 |w|);
#  - the banner says each rank holds 1/D of the weights and of the gradients, and the summary that
#    layer gathers ran ahead of their layer (prefetched) and that every micro-batch reduce-scattered
#    every layer (DP2's 2 micro-batches per rank twice DP4's 1);
#  - optim_grads (the distributed optimizer with the gradients sharded, weights whole) at DP2 with
#    full recomputation equals the single process, and its checkpoint resumes with optim_grads at
#    DP4 (1 micro-batch per rank) to the same losses and weights;
#  - the DP2 checkpoint (each rank writes its weight slices) resumes in one process and under the
#    distributed optimizer (ddp.use_distributed_optimizer) at DP2, and the DP4 one with FSDP at DP2,
#    each continuing with the losses and final weights of the uninterrupted single-process run;
#  - SFT under optim_grads at DP2 (its model built without gradients) equals one process;
#  - on one process the keys change nothing (bit-identical losses); a bad strategy, a strategy without use_megatron_fsdp and FSDP with tensor
#    parallelism are one line naming the key.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
source "$(dirname "${BASH_SOURCE[0]}")/mpi_lib.sh"

run=("${tiny_run[@]}")
fsdp=(ddp.use_megatron_fsdp=true ddp.data_parallel_sharding_strategy=optim_grads_params)
recipe=recipes/super3/pretrain/tiny.yaml

# per_rank NAME WHAT D PATTERN: the banner line matching PATTERN says "WHAT 1/D per rank: X MiB of
# Y MiB" with X = Y / D (to the padding of every parameter to 64 D elements, a few percent of the
# tiny model's small tensors).
per_rank() {
  local name=$1 what=$2 d=$3 line msg
  line=$(grep -E "$4" "$TMP/out.$name")
  [[ -n "$line" ]] || { fail "$name: no line for $what 1/$d: $(head -8 "$TMP/out.$name")"; return; }
  if msg=$(python3 -c 'import re,sys
x, y = map(float, re.search(r"per rank: ([0-9.]+) MiB of ([0-9.]+) MiB", sys.argv[1]).groups())
d = int(sys.argv[2])
print(f"{x} MiB of {y} MiB per rank, x {d} = {x * d / y:.4f} of the whole")
sys.exit(0 if y > 0 and 0.999 <= x * d / y <= 1.1 else 1)' "$line" "$d"); then
    echo "ok: $name: $what 1/$d per rank ($msg)"
  else
    fail "$name: $what are not 1/$d per rank: $line ($msg)"
  fi
}

# weights NAME D: 1/D of the weights and of the gradients per rank (grads), layer gathers prefetched.
weights() {
  local name=$1 d=$2 line
  per_rank "$name" weights "$d" \
    "^full parameter sharding \(ddp.data_parallel_sharding_strategy=optim_grads_params\): float32 weights 1/$d per rank: "
  grads "$name" "$d" optim_grads_params
  line=$(grep -E '^layer weights gathered [0-9]+ time' "$TMP/out.$name")
  if [[ "$line" =~ gathered\ ([0-9]+)\ time.*\ ([0-9]+)\ of\ them\ prefetched ]] && ((BASH_REMATCH[2] > 0)); then
    echo "ok: $name: ${BASH_REMATCH[2]} of ${BASH_REMATCH[1]} layer gathers queued during the previous layer"
  else
    fail "$name: no layer gather was prefetched: ${line:-no summary line}"
  fi
}

# grads NAME D STRATEGY: 1/D of the float32 gradients per rank (the banner's line, printed), and the
# summary's layer reduce-scatters of the last step (kept in $TMP/scatters.NAME).
grads() {
  local name=$1 d=$2 strategy=$3 line
  grep -E '^sharded gradients' "$TMP/out.$name"
  per_rank "$name" gradients "$d" \
    "^sharded gradients \(ddp.data_parallel_sharding_strategy=$strategy\): fp32 gradients 1/$d per rank: "
  line=$(grep -E '^gradients reduce-scattered per layer and micro-batch' "$TMP/out.$name")
  [[ "$line" =~ :\ ([0-9]+)\ layer\ reduce-scatter ]] && echo "${BASH_REMATCH[1]}" >"$TMP/scatters.$name" ||
    fail "$name: no per-layer reduce-scatter summary: ${line:-none}"
}

# The uninterrupted single process (checkpoints at 2, 4, 6): the reference.
expect_ok "one process" '^ iteration +6/ +6 ' "${run[@]}" checkpoint.save="$TMP/dp1" checkpoint.save_interval=2
expect_ok "one process with the FSDP keys" '^ iteration +6/ +6 ' "${run[@]}" "${fsdp[@]}" checkpoint.save="$TMP/dp1f" \
  checkpoint.save_interval=0
grep -q "full parameter sharding" "$TMP/out" && fail "one process: a full-sharding line without data parallelism"
cmp -s <(losses "$TMP/dp1f/metrics.jsonl") <(losses "$TMP/dp1/metrics.jsonl") &&
  echo "ok: one process: the FSDP keys change nothing" || fail "one process: the FSDP keys changed the losses"

if mpi 2 dp2 "${fsdp[@]}" checkpoint.save="$TMP/dp2" checkpoint.save_interval=2; then
  weights dp2 2
  same_run "FSDP DP2 (2 micro-batches per rank)" "$TMP/dp2" 6 0
fi
if mpi 4 dp4 "${fsdp[@]}" checkpoint.save="$TMP/dp4" train.exit_interval=4; then
  weights dp4 4
  same_run "FSDP DP4" "$TMP/dp4" 4 0
fi

if [[ -s "$TMP/scatters.dp2" && -s "$TMP/scatters.dp4" ]]; then
  n2=$(<"$TMP/scatters.dp2") n4=$(<"$TMP/scatters.dp4")
  ((n4 > 0 && n2 == 2 * n4)) && echo "ok: every micro-batch reduce-scatters every layer ($n2 at DP2, 2 per rank; $n4 at DP4)" ||
    fail "layer reduce-scatters per step: $n2 at DP2 (2 micro-batches per rank), $n4 at DP4 (1)"
fi

# Full recomputation: the backward reruns each layer's forward on the weights gathered for it.
if mpi 2 rc "${fsdp[@]}" model.recompute_granularity=full checkpoint.save="$TMP/rc" train.exit_interval=4; then
  same_run "FSDP DP2 with model.recompute_granularity=full" "$TMP/rc" 4 0
fi

# optim_grads: the distributed optimizer with sharded gradients, whole weights; DP2 (2 micro-batches
# per rank) with full recomputation, its checkpoint resumed at DP4.
og=(ddp.use_megatron_fsdp=true ddp.data_parallel_sharding_strategy=optim_grads)
if mpi 2 og "${og[@]}" model.recompute_granularity=full checkpoint.save="$TMP/og" train.exit_interval=4; then
  grep -q "^distributed optimizer (ddp.use_distributed_optimizer): fp32 moments 1/2 per rank" "$TMP/out.og" &&
    ! grep -q "full parameter sharding" "$TMP/out.og" && echo "ok: optim_grads runs the distributed optimizer, weights whole" ||
    fail "optim_grads: not the distributed optimizer: $(head -8 "$TMP/out.og")"
  grads og 2 optim_grads
  same_run "optim_grads DP2 with model.recompute_granularity=full" "$TMP/og" 4 0
fi
if mpi 4 og4 "${og[@]}" checkpoint.load="$TMP/og" checkpoint.save="$TMP/og4" checkpoint.save_interval=0; then
  grads og4 4 optim_grads
  same_run "optim_grads DP2 checkpoint resumed with optim_grads at DP4" "$TMP/og4" 6 5
fi

# The FSDP DP2 checkpoint at iteration 4 in one process and under the distributed optimizer at DP2;
# the FSDP DP4 one with FSDP at DP2.
expect_ok "FSDP DP2 checkpoint in one process" '^ iteration +6/ +6 ' "${run[@]}" checkpoint.load="$TMP/dp2/iter_0000004" \
  checkpoint.save="$TMP/r1" checkpoint.save_interval=0
same_run "FSDP DP2 checkpoint resumed in one process" "$TMP/r1" 6 5
if mpi 2 rz ddp.use_distributed_optimizer=true checkpoint.load="$TMP/dp2/iter_0000004" checkpoint.save="$TMP/rz" \
  checkpoint.save_interval=0; then
  same_run "FSDP DP2 checkpoint resumed by the distributed optimizer at DP2" "$TMP/rz" 6 5
fi
if mpi 2 rf "${fsdp[@]}" checkpoint.load="$TMP/dp4" checkpoint.save="$TMP/rf" checkpoint.save_interval=0; then
  grep -q "resumed from $TMP/dp4/iter_0000004 at iteration 4" "$TMP/out.rf" || fail "FSDP DP4 -> DP2: not resumed at 4"
  same_run "FSDP DP4 checkpoint resumed with FSDP at DP2" "$TMP/rf" 6 5
fi

# SFT under optim_grads at DP2 (the model built without gradients: the optimizer lays them out
# from shapes, train/grad_slots.h) against one process: the same losses and gradient norms.
sft_setup 1 60 4
sft=("$BIN" super3 sft -c tiny "${sft_data[@]}"
  train.global_batch_size=4 train.micro_batch_size=1 train.train_iters=3 train.eval_interval=0 train.eval_iters=0
  scheduler.lr_warmup_iters=1 logger.tensorboard_dir=null)
expect_ok "SFT one process" '^ iteration +3/ +3 ' "${sft[@]}" checkpoint.save="$TMP/s1" checkpoint.load="$TMP/s1"
if "${MPIRUN[@]}" -np 2 "${sft[@]}" "${og[@]}" checkpoint.save="$TMP/s2" checkpoint.load="$TMP/s2" \
  >"$TMP/out.s2" 2>"$TMP/err.s2"; then
  grep -qE "^sharded gradients \(ddp.data_parallel_sharding_strategy=optim_grads\): fp32 gradients 1/2 per rank" "$TMP/out.s2" ||
    fail "SFT under optim_grads: no sharded-gradients line"
  losses "$TMP/s2/metrics.jsonl" >"$TMP/s2.losses"
  losses "$TMP/s1/metrics.jsonl" >"$TMP/s1.losses"
  if msg=$(close "$TMP/s2.losses" "$TMP/s1.losses" 1e-5); then echo "ok: SFT DP2 under optim_grads: losses equal one process's ($msg)"; else
    fail "SFT DP2 under optim_grads: losses differ ($msg)"; fi
else
  fail "SFT DP2 under optim_grads: exit $?: $(tail -5 "$TMP/err.s2")"
fi

expect_error "an unknown strategy names the key" \
  "$recipe: ddp.data_parallel_sharding_strategy: expected one of no_shard, optim, optim_grads, optim_grads_params, got \"zero3\"" \
  "${run[@]}" ddp.use_megatron_fsdp=true ddp.data_parallel_sharding_strategy=zero3
expect_error "a strategy without use_megatron_fsdp names the key" \
  "$recipe: ddp.data_parallel_sharding_strategy: \"optim_grads_params\" applies under Megatron FSDP only (set ddp.use_megatron_fsdp=true)" \
  "${run[@]}" ddp.data_parallel_sharding_strategy=optim_grads_params
bad_layout "FSDP with tensor parallelism is refused" 4 \
  "$recipe: ddp.data_parallel_sharding_strategy: optim_grads_params with model.tensor_model_parallel_size 2 is not supported yet (full parameter sharding runs with data parallelism only; use optim, the distributed optimizer)" \
  "${run[@]}" "${fsdp[@]}" model.tensor_model_parallel_size=2
bad_layout "gradient sharding with tensor parallelism is refused" 4 \
  "$recipe: ddp.data_parallel_sharding_strategy: optim_grads with model.tensor_model_parallel_size 2 is not supported yet (gradient sharding runs with data parallelism only; use optim, the distributed optimizer)" \
  "${run[@]}" "${og[@]}" model.tensor_model_parallel_size=2

finish "full parameter sharding at DP2 and DP4 equals one process with 1/D of the weights and gradients per rank, prefetched layer gathers and per-micro-batch layer reduce-scatters; optim_grads too; their checkpoints resume in one process, under the distributed optimizer and at another D"
