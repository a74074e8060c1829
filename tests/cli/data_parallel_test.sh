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
# different rewards and the update a gradient. Every step's loss, grad norm, reward and ratio
# extrema (the min and max over the ranks, not summed), and the final weights (to 5e-5 + 1e-4 |w|),
# must equal the single process's.
grpo_setup
grpo_one "GRPO, one process"
grpo_trains
if grpo_mpi "GRPO" rl2; then
  grpo_same_as_one "GRPO DP 2" "$TMP/rl2" 5e-5
  # An RL checkpoint carries its tokenizer (policy.tokenizer.name): generate needs no --tokenizer.
  cmp -s "$TMP/rl2/iter_0000002/tokenizer/tokenizer.json" "$TMP/data/pretrain/tokenizer/tokenizer.json" &&
    echo "ok: the GRPO checkpoint carries the run's tokenizer" || fail "GRPO checkpoint without its tokenizer"
  expect_ok "generate from the GRPO DP 2 checkpoint without --tokenizer" '.' "$BIN" generate \
    --checkpoint "$TMP/rl2" --prompt "2+2=" --max-new-tokens 2 --temperature 0
fi

# GRPO with the distributed optimizer (NeMo RL's policy.megatron_cfg.optimizer.use_distributed_optimizer):
# the float32 masters and moments sharded over the 2 data ranks give the one process's steps and
# weights; the sharded checkpoint resumes in one process and its third step equals the one
# process's own resumed third step (so the moments came back whole).
# third_step NAME WHAT [REF]: the 2-step checkpoint in $TMP/NAME, copied to $TMP/NAMEc, resumed in
# one process for a third step; its metrics in $TMP/NAMEc.m. With REF: that step and its weights
# equal $TMP/REF's own (the one process's resumed third step) within grpo_same_as_one's tolerances.
third_step() {
  local name=$1 what=$2 ref=${3:-} msg msg2
  rm -rf "$TMP/${name}c" && cp -r "$TMP/$name" "$TMP/${name}c"
  expect_ok "GRPO: the $what resumed in one process for a third step" '^step 3/3 ' "${grpo[@]}" grpo.max_num_steps=3 \
    checkpointing.save_period=1 checkpointing.checkpoint_dir="$TMP/${name}c"
  grpo_metrics "$TMP/${name}c/metrics.jsonl" | tail -1 >"$TMP/${name}c.m"
  [[ -n "$ref" ]] || return 0
  if msg=$(close "$TMP/${name}c.m" "$TMP/$ref.m" 1e-5) &&
    msg2=$(python3 tests/cli/safetensors_diff.py "$TMP/${name}c/iter_0000003/model.safetensors" \
      "$TMP/$ref/iter_0000003/model.safetensors" 1e-4 1e-4); then
    echo "ok: GRPO resumed from the $what: step 3 and its weights equal the one process's ($msg; $msg2)"
  else
    fail "GRPO resumed from the $what differs: $msg ${msg2:-}: $(cat "$TMP/${name}c.m" "$TMP/$ref.m" | tr '\n' ';')"
  fi
}
dist=(policy.megatron_cfg.optimizer.use_distributed_optimizer=true
  policy.megatron_cfg.distributed_data_parallel_config.data_parallel_sharding_strategy=optim_grads_params)
if grpo_mpi "GRPO with the distributed optimizer" rld "${dist[@]}"; then
  grep -qE 'distributed optimizer \(policy.megatron_cfg.optimizer.use_distributed_optimizer\): fp32 (masters \+ )?moments 1/2 per rank' "$TMP/out.rld" &&
    echo "ok: GRPO's start-up line shows the optimizer state split in 2" ||
    fail "GRPO DP 2 with the distributed optimizer: no sharding line: $(grep -i 'distributed\|optimizer' "$TMP/out.rld" | head -3)"
  grpo_same_as_one "GRPO DP 2 with the distributed optimizer" "$TMP/rld"
  third_step rl1 "one-process run"
  [[ -s "$TMP/rl1c.m" ]] && third_step rld "distributed optimizer's sharded checkpoint" rl1c
fi
# GRPO under Megatron FSDP (NeMo RL's use_custom_fsdp, newer Megatron's use_megatron_fsdp) at DP 2.
# optim_grads_params: each rank keeps 1/2 of the weights (the log-prob pass and the update gather
# each layer where it runs) and the engine decodes from a whole copy gathered before every step's
# rollouts and every validation; optim_grads: the gradients sharded, the weights whole. Both give
# the one process's steps and final weights (the second step's rollouts so prove the copy
# gathered after an update); the optim_grads_params checkpoint resumed in one process gives the
# one process's resumed third step; with a KL penalty its reference policy is gathered too. FSDP
# with tensor parallelism, or with a generator at another tensor-parallel size, is refused in one
# line naming the key.
ddpk=policy.megatron_cfg.distributed_data_parallel_config
fsdp=("$ddpk.use_custom_fsdp=true" "$ddpk.data_parallel_sharding_strategy=optim_grads_params")
if grpo_mpi "GRPO under FSDP optim_grads_params" rlf "${fsdp[@]}" grpo.val_period=1 grpo.val_at_start=true; then
  grep -E "^full parameter sharding|^sharded gradients|^refit: " "$TMP/out.rlf"
  grep -qE "^full parameter sharding \($ddpk.data_parallel_sharding_strategy=optim_grads_params\): float32 weights 1/2 per rank" "$TMP/out.rlf" &&
    grep -qE "^sharded gradients \($ddpk.data_parallel_sharding_strategy=optim_grads_params\): fp32 gradients 1/2 per rank" "$TMP/out.rlf" &&
    echo "ok: GRPO under FSDP: the start-up lines show the weights and gradients split in 2" ||
    fail "GRPO under FSDP: no sharding lines: $(head -12 "$TMP/out.rlf")"
  grep -qE "^refit: FSDP gather \($ddpk.use_custom_fsdp\): the engine decodes from a whole copy of the weights, [0-9.]+ MiB per rank" "$TMP/out.rlf" &&
    echo "ok: GRPO under FSDP: the start-up line says the engine decodes from a gathered whole copy" ||
    fail "GRPO under FSDP: no refit line: $(grep '^refit' "$TMP/out.rlf")"
  n=$(grep -cE '^step [12]/2 .*\| refit [0-9.]+ s \(FSDP gather, [0-9.]*[1-9][0-9.]* MiB gathered per rank; ' "$TMP/out.rlf")
  [[ $n -eq 2 ]] && echo "ok: GRPO under FSDP: every step line gives the gather's time and MiB per rank" ||
    fail "GRPO under FSDP: $n of 2 step lines with the FSDP gather: $(grep '^step' "$TMP/out.rlf" | head -2)"
  [[ $(grep -cE '^validation at step [012]: accuracy ' "$TMP/out.rlf") -eq 3 ]] &&
    echo "ok: GRPO under FSDP: validation at start and after each step ran on the gathered copy" ||
    fail "GRPO under FSDP: validation lines: $(grep '^validation' "$TMP/out.rlf")"
  grpo_same_as_one "GRPO DP 2 under FSDP optim_grads_params" "$TMP/rlf"
  [[ -s "$TMP/rl1c.m" ]] && third_step rlf "FSDP checkpoint" rl1c
fi
if grpo_mpi "GRPO under FSDP optim_grads" rlg "$ddpk.use_megatron_fsdp=true" "$ddpk.data_parallel_sharding_strategy=optim_grads"; then
  grep -qE "^sharded gradients \($ddpk.data_parallel_sharding_strategy=optim_grads\): fp32 gradients 1/2 per rank" "$TMP/out.rlg" &&
    ! grep -q "^full parameter sharding" "$TMP/out.rlg" && grep -q '^refit: none' "$TMP/out.rlg" &&
    echo "ok: GRPO under optim_grads: gradients split in 2, weights whole (no refit)" ||
    fail "GRPO under optim_grads: start-up lines: $(grep -E '^(full|sharded|refit|distributed)' "$TMP/out.rlg")"
  grpo_same_as_one "GRPO DP 2 under FSDP optim_grads (use_megatron_fsdp)" "$TMP/rlg"
fi
# The KL penalty's reference policy, a frozen copy of the starting weights, is gathered whole from
# the slices too: its KL is 0 at step 1 (the reference is the policy) and one process's at step 2.
kl=(loss_fn.reference_policy_kl_penalty=0.05)
expect_ok "GRPO with a KL penalty, one process" '^step 2/2 ' "${grpo[@]}" "${kl[@]}" checkpointing.checkpoint_dir="$TMP/rlk1"
if grpo_mpi "GRPO with a KL penalty under FSDP" rlkf "${fsdp[@]}" "${kl[@]}"; then
  kl_metrics() {
    python3 -c 'import json,sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") == "train":
        print(repr(r["loss"]), repr(r["grad_norm"]), repr(r["kl_penalty"]))' "$1"
  }
  kl_metrics "$TMP/rlk1/metrics.jsonl" >"$TMP/rlk1.m"
  kl_metrics "$TMP/rlkf/metrics.jsonl" >"$TMP/rlkf.m"
  # The KL (1.4e-5 at step 2) is a difference of nearly equal log-probs: the data ranks' float32
  # summation order moves it by 1.3e-5 of itself (plain DP 2 gives FSDP's value to the last bit),
  # so it is held to 1e-4, the losses and grad norms to 1e-5.
  if [[ $(awk 'NR == 1 {print $3}' "$TMP/rlkf.m") == 0.0 ]] && awk 'NR == 2 {exit !($3 > 0)}' "$TMP/rlk1.m" &&
    msg=$(close <(cut -d' ' -f1,2 "$TMP/rlkf.m") <(cut -d' ' -f1,2 "$TMP/rlk1.m") 1e-5) &&
    msg2=$(close <(cut -d' ' -f3 "$TMP/rlkf.m") <(cut -d' ' -f3 "$TMP/rlk1.m") 1e-4); then
    echo "ok: GRPO under FSDP with a KL penalty: the gathered reference gives KL 0 at step 1 and one process's losses, grad norms ($msg) and KL (${msg2/loss /})"
  else
    fail "GRPO under FSDP with a KL penalty differs (${msg:-}): $(paste -d' ' "$TMP/rlkf.m" "$TMP/rlk1.m" | tr '\n' ';')"
  fi
fi
rl_recipe=recipes/super3/rl/tiny.yaml
expect_error "GRPO: FSDP with tensor parallelism is refused" \
  "$rl_recipe: $ddpk.data_parallel_sharding_strategy: optim_grads_params with model.tensor_model_parallel_size 2 is not supported yet in GRPO (full parameter sharding runs with data parallelism only; use optim, the distributed optimizer)" \
  "${grpo[@]}" "${fsdp[@]}" model.tensor_model_parallel_size=2
expect_error "GRPO: FSDP with a generator at another tensor-parallel size is refused" \
  "$rl_recipe: $ddpk.data_parallel_sharding_strategy: optim_grads_params with policy.generation.vllm_cfg.tensor_parallel_size 2 is not supported yet (the engine's copy is gathered whole at the trainer's layout; set it to 1 or leave it out)" \
  "${grpo[@]}" "${fsdp[@]}" policy.generation.vllm_cfg.tensor_parallel_size=2

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

finish "data parallelism (pretraining over 2 and 4 ranks, GRPO over 2, also with the distributed optimizer and under FSDP) equals one process; bad layouts refused"
