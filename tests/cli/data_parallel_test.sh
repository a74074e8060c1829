#!/usr/bin/env bash
# Data and expert parallelism under a real launcher (Open MPI's mpirun on this machine's cores):
# `nemotron super3 pretrain -c tiny` (Mamba, attention, MLP, latent MoE with a shared expert,
# aux loss, expert-bias updates, MTP at 2 depths) for 4 steps with validation, run as one process
# and as 2 and 4 ranks of data parallelism. The global batch is the same 8 sequences in
# micro-batches of 2 (rank r of D takes micro-batches r, r + D, ...), so every loss and the final
# weights must equal the single process's within float32 rounding of a different summation order:
# losses to 1e-5 relative (seen: 3e-9), weights to 5e-5 + 1e-4 |w| (seen: 1.7e-5 at DP 4, on
# embedding rows whose near-zero gradients AdamW divides by their own small second moment; one
# step moves a weight by up to lr = 3e-3).
# Then the bad layouts: one line naming the key, exit 2, before anything starts.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
source "$(dirname "${BASH_SOURCE[0]}")/mpi_lib.sh"

run=("$BIN" super3 pretrain -c tiny dataset.mock=true train.train_iters=4 train.global_batch_size=8
  train.micro_batch_size=2 train.eval_interval=2 train.eval_iters=1 checkpoint.save_interval=0 logger.tensorboard_dir=null
  scheduler.lr_warmup_iters=1 scheduler.lr_wsd_decay_iters=2)

expect_ok "one process" '^ iteration +4/ +4 ' "${run[@]}" checkpoint.save="$TMP/dp1"
losses "$TMP/dp1/metrics.jsonl" >"$TMP/dp1.losses"

for np in 2 4; do
  "${MPIRUN[@]}" -np $np "${run[@]}" checkpoint.save="$TMP/dp$np" >"$TMP/out$np" 2>"$TMP/err$np"
  rc=$?
  if [[ $rc -ne 0 ]]; then fail "mpirun -np $np: exit $rc: $(tail -5 "$TMP/err$np")"; continue; fi
  # One log (rank 0's): each iteration line once.
  [[ $(grep -cE '^ iteration +4/ +4 ' "$TMP/out$np") -eq 1 ]] || fail "mpirun -np $np: not one log: $(tail -3 "$TMP/out$np")"
  grep -q "data-parallel rank 0 of $np" "$TMP/out$np" || fail "mpirun -np $np: the data line does not name the split"
  losses "$TMP/dp$np/metrics.jsonl" >"$TMP/dp$np.losses"
  if msg=$(close "$TMP/dp$np.losses" "$TMP/dp1.losses" 1e-5); then
    echo "ok: DP $np losses equal the single process's ($msg)"
  else
    fail "DP $np losses differ ($msg): $(paste -d' ' "$TMP/dp$np.losses" "$TMP/dp1.losses" | head -8)"
  fi
  if msg=$(python3 tests/cli/safetensors_diff.py "$TMP/dp$np/iter_0000004/model.safetensors" \
    "$TMP/dp1/iter_0000004/model.safetensors" 5e-5 1e-4); then
    echo "ok: DP $np final weights equal the single process's ($msg)"
  else
    fail "DP $np final weights differ: $msg"
  fi
  cmp -s <(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["data"])' "$TMP/dp$np/iter_0000004/train_state.json") \
    <(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["data"])' "$TMP/dp1/iter_0000004/train_state.json") &&
    echo "ok: DP $np checkpoint holds the single process's data cursor" || fail "DP $np data cursor differs"
done

# GRPO: each of 2 ranks generates half of every step's prompts (whole groups, so group baselines
# stay whole) with the sampling streams the single process gives those rows, then trains its rows
# data-parallel. Random initial weights (rewards 0), so an overlong-length penalty gives the rows
# different rewards and the update a gradient. Every step's loss, grad norm and reward, and the
# final weights, must equal the single process's.
grpo_setup
expect_ok "GRPO, one process" '^step 2/2 ' "${grpo[@]}" checkpointing.checkpoint_dir="$TMP/rl1"
"${MPIRUN[@]}" -np 2 "${grpo[@]}" checkpointing.checkpoint_dir="$TMP/rl2" >"$TMP/outrl" 2>"$TMP/errrl"
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "GRPO mpirun -np 2: exit $rc: $(tail -5 "$TMP/errrl")"
else
  grpo_metrics "$TMP/rl1/metrics.jsonl" >"$TMP/rl1.m"
  grpo_metrics "$TMP/rl2/metrics.jsonl" >"$TMP/rl2.m"
  awk '{ if ($2 + 0 <= 0) bad = 1 } END { exit bad }' "$TMP/rl1.m" || fail "GRPO: a step without a gradient: $(cat "$TMP/rl1.m")"
  if msg=$(close "$TMP/rl2.m" "$TMP/rl1.m" 1e-5); then
    echo "ok: GRPO DP 2: losses, grad norms, rewards, generated tokens, and the ratio extrema (min/max over ranks, not summed) equal one process's ($msg)"
  else
    fail "GRPO DP 2 differs ($msg): $(paste -d' ' "$TMP/rl2.m" "$TMP/rl1.m" | tr '\n' ';')"
  fi
  if msg=$(python3 tests/cli/safetensors_diff.py "$TMP/rl2/iter_0000002/model.safetensors" \
    "$TMP/rl1/iter_0000002/model.safetensors" 5e-5 1e-4); then
    echo "ok: GRPO DP 2 final weights equal one process's ($msg)"
  else
    fail "GRPO DP 2 final weights differ: $msg"
  fi
  # An RL checkpoint carries its tokenizer (policy.tokenizer.name): generate needs no --tokenizer.
  cmp -s "$TMP/rl2/iter_0000002/tokenizer/tokenizer.json" "$TMP/data/pretrain/tokenizer/tokenizer.json" &&
    echo "ok: the GRPO checkpoint carries the run's tokenizer" || fail "GRPO checkpoint without its tokenizer"
  expect_ok "generate from the GRPO DP 2 checkpoint without --tokenizer" '.' "$BIN" generate \
    --checkpoint "$TMP/rl2" --prompt "2+2=" --max-new-tokens 2 --temperature 0
fi

# GRPO with the distributed optimizer (NeMo RL's policy.megatron_cfg.optimizer.use_distributed_optimizer):
# the float32 masters and moments sharded over the 2 data ranks give the one process's steps and
# weights; the sharded checkpoint resumes in one process and its third step equals the one
# process's own resumed third step (so the moments came back whole); full parameter sharding is
# refused in one line naming the key.
dist=(policy.megatron_cfg.optimizer.use_distributed_optimizer=true
  policy.megatron_cfg.distributed_data_parallel_config.data_parallel_sharding_strategy=optim_grads_params)
"${MPIRUN[@]}" -np 2 "${grpo[@]}" "${dist[@]}" checkpointing.checkpoint_dir="$TMP/rld" >"$TMP/outrld" 2>"$TMP/errrld"
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "GRPO with the distributed optimizer, mpirun -np 2: exit $rc: $(tail -5 "$TMP/errrld")"
else
  grep -qE 'distributed optimizer \(policy.megatron_cfg.optimizer.use_distributed_optimizer\): fp32 (masters \+ )?moments 1/2 per rank' "$TMP/outrld" &&
    echo "ok: GRPO's start-up line shows the optimizer state split in 2" ||
    fail "GRPO DP 2 with the distributed optimizer: no sharding line: $(grep -i 'distributed\|optimizer' "$TMP/outrld" | head -3)"
  grpo_same_as_one "GRPO DP 2 with the distributed optimizer" "$TMP/rld"
  cp -r "$TMP/rl1" "$TMP/rl1c" && cp -r "$TMP/rld" "$TMP/rldc"
  expect_ok "GRPO: the one-process run resumed for a third step" '^step 3/3 ' "${grpo[@]}" grpo.max_num_steps=3 \
    checkpointing.save_period=1 checkpointing.checkpoint_dir="$TMP/rl1c"
  expect_ok "GRPO: the distributed optimizer's sharded checkpoint resumed in one process" '^step 3/3 ' "${grpo[@]}" \
    grpo.max_num_steps=3 checkpointing.save_period=1 checkpointing.checkpoint_dir="$TMP/rldc"
  grpo_metrics "$TMP/rl1c/metrics.jsonl" | tail -1 >"$TMP/rl1c.m"
  grpo_metrics "$TMP/rldc/metrics.jsonl" | tail -1 >"$TMP/rldc.m"
  if msg=$(close "$TMP/rldc.m" "$TMP/rl1c.m" 1e-5) &&
    msg2=$(python3 tests/cli/safetensors_diff.py "$TMP/rldc/iter_0000003/model.safetensors" \
      "$TMP/rl1c/iter_0000003/model.safetensors" 1e-4 1e-4); then
    echo "ok: GRPO resumed from the sharded checkpoint: step 3 and its weights equal the one process's ($msg; $msg2)"
  else
    fail "GRPO resumed from the sharded checkpoint differs: $msg ${msg2:-}: $(cat "$TMP/rldc.m" "$TMP/rl1c.m" | tr '\n' ';')"
  fi
fi
"${MPIRUN[@]}" -np 2 "${grpo[@]}" "${dist[@]}" policy.megatron_cfg.distributed_data_parallel_config.use_custom_fsdp=true \
  checkpointing.checkpoint_dir="$TMP/rlf" >"$TMP/out" 2>"$TMP/err"
rc=$?
[[ $rc -eq 2 && $(grep -c '^error: ' "$TMP/err") -eq 1 ]] &&
  grep -q 'policy.megatron_cfg.distributed_data_parallel_config.use_custom_fsdp: full parameter sharding is not available in GRPO' "$TMP/err" &&
  echo "ok: GRPO with full parameter sharding refused in one line naming the key" ||
  fail "GRPO use_custom_fsdp=true: exit $rc: $(grep '^error' "$TMP/err" | head -2)"

# Bad layouts: one line naming the key (rank 0's), exit 2, nothing trained.
bad_run_layout() {  # NAME NP MESSAGE OVERRIDES...: the tiny run with them refused, nothing trained
  local name=$1 np=$2 message=$3
  shift 3
  "${MPIRUN[@]}" -np $np "${run[@]}" checkpoint.save="$TMP/bad" "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [[ $rc -ne 2 ]]; then fail "$name: exit $rc, expected 2: $(head -3 "$TMP/err")"; return; fi
  [[ $(grep -c '^error: ' "$TMP/err") -eq 1 ]] || { fail "$name: not one error line: $(grep '^error' "$TMP/err")"; return; }
  grep -qF "error: $message" "$TMP/err" || { fail "$name: stderr was [$(grep '^error' "$TMP/err")], expected [error: $message]"; return; }
  [[ -e "$TMP/bad/iter_0000001" ]] && { fail "$name: trained before refusing"; return; }
  echo "ok: $name"
}
recipe=recipes/super3/pretrain/tiny.yaml
bad_run_layout "EP not dividing the experts" 3 \
  "$recipe: model.expert_model_parallel_size: 3 does not divide model.n_routed_experts 4" model.expert_model_parallel_size=3
bad_run_layout "EP larger than the data ranks" 2 \
  "$recipe: model.expert_model_parallel_size: 4 does not divide the 2 data x context parallel ranks (world size 2 / tensor 1); experts are split within them" \
  model.expert_model_parallel_size=4
bad_run_layout "a global batch that does not split over the ranks" 3 \
  "$recipe: train.global_batch_size: 8 is not a multiple of train.micro_batch_size 2 x 3 data-parallel ranks = 6 (every rank runs whole micro-batches; change either, or the number of ranks)"
bad_run_layout "sequence parallelism without tensor parallelism" 2 \
  "$recipe: model.sequence_parallel: true needs model.tensor_model_parallel_size > 1 (sequence parallelism splits the tensor-parallel group's activations)" \
  model.sequence_parallel=true

finish "data parallelism (pretraining over 2 and 4 ranks, GRPO over 2, also with the distributed optimizer) equals one process; bad layouts refused"
