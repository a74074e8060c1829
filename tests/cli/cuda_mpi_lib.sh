# Shared by the multi-GPU CLI tests (source after lib.sh, once $BIN and $gpus are known): mpirun
# with every rank's environment (NCCL_NVLS_ENABLE=0 kept), the tiny super3 run they compare with
# one GPU, and how they read and compare its losses.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
MPIRUN=(mpirun --oversubscribe -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM)
run=("$BIN" super3 pretrain -c tiny dataset.mock=true device=cuda train.train_iters=6 train.global_batch_size=16
  train.micro_batch_size=2 train.eval_interval=3 train.eval_iters=1 checkpoint.save_interval=0
  logger.tensorboard_dir=null scheduler.lr_warmup_iters=1 scheduler.lr_wsd_decay_iters=2)

losses() {
  python3 -c 'import json,sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") in ("train", "validation"): print(repr(r["lm_loss"]))' "$1"
}
gap() {
  python3 -c 'import sys
a, b = open(sys.argv[1]).read().split(), open(sys.argv[2]).read().split()
assert len(a) == len(b) and a, (a, b)
w = max(abs(float(x) - float(y)) / abs(float(y)) for x, y in zip(a, b))
print(f"{w:.3e}"); sys.exit(0 if w <= float(sys.argv[3]) else 1)' "$1" "$2" "$3"
}

# same_as_one_gpu WHAT DIR REF: the run in DIR gives the one-GPU run REF's losses (2e-3 relative)
# and its weights at iteration 6 (2e-2 absolute): bf16 rounding in another summation order.
same_as_one_gpu() {
  local what=$1 dir=$2 ref=$3 g msg
  losses "$dir/metrics.jsonl" >"$dir.l"
  losses "$ref/metrics.jsonl" >"$ref.l"
  if g=$(gap "$dir.l" "$ref.l" 2e-3); then echo "ok: $what: losses within $g of one GPU's"; else
    fail "$what: losses differ by $g: $(paste -d' ' "$dir.l" "$ref.l" | tr '\n' ';')"; fi
  if msg=$(python3 tests/cli/safetensors_diff.py "$dir/iter_0000006/model.safetensors" \
    "$ref/iter_0000006/model.safetensors" 2e-2 0); then echo "ok: $what weights: $msg"; else
    fail "$what weights: $msg"; fi
}

# resumed_on_one_gpu WHAT NAME OVERRIDES...: the run under `mpirun -np 2` with OVERRIDES stopped at
# iteration 3, its checkpoint continued on one GPU to the end: the weights equal the uninterrupted
# one-GPU run's ($TMP/g1) within the bf16 tolerance.
resumed_on_one_gpu() {
  local what=$1 name=$2
  shift 2
  "${MPIRUN[@]}" -np 2 "${run[@]}" "$@" train.exit_interval=3 checkpoint.save="$TMP/$name" \
    >"$TMP/out$name" 2>"$TMP/err$name" || fail "$what to iteration 3: $(tail -5 "$TMP/err$name")"
  if "${run[@]}" checkpoint.load="$TMP/$name" checkpoint.save="$TMP/${name}r" >"$TMP/out${name}r" 2>"$TMP/err${name}r"; then
    if msg=$(python3 tests/cli/safetensors_diff.py "$TMP/${name}r/iter_0000006/model.safetensors" \
      "$TMP/g1/iter_0000006/model.safetensors" 2e-2 0); then echo "ok: $what checkpoint resumed on one GPU: weights $msg"; else
      fail "$what checkpoint resumed on one GPU: weights $msg"; fi
  else
    fail "$what checkpoint on one GPU: $(tail -5 "$TMP/err${name}r")"
  fi
}

# cuda_grpo_setup: the tiny GRPO run the multi-GPU tests compare with one GPU (super3 rl on the
# bundled RL data and tokenizer, prepared under $TMP/data): 3 steps of 8 prompts x 4 generations
# in bf16, an overlong-length penalty so the rows' rewards differ, and grpo_setup's pinned sampling,
# format reward and baseline. Sets the array `grpo`.
cuda_grpo_setup() {
  expect_ok "data prep pretrain (tokenizer)" 'blend: ' "$BIN" super3 data prep pretrain -c tiny output_dir="$TMP/data/pretrain"
  expect_ok "data prep rl" 'manifest: ' "$BIN" super3 data prep rl -c tiny output_dir="$TMP/data/rl" \
    sources.0.generator.num_examples=64 val_rows=8
  grpo=("$BIN" super3 rl -c tiny device=cuda policy.model_name= policy.tokenizer.name="$TMP/data/pretrain/tokenizer/tokenizer.json"
    data.train_jsonl_fpath="$TMP/data/rl/train.jsonl" data.validation_jsonl_fpath="$TMP/data/rl/val.jsonl"
    grpo.num_prompts_per_step=8 grpo.num_generations_per_prompt=4 policy.train_global_batch_size=32
    policy.train_micro_batch_size=4 policy.generation.max_new_tokens=16 policy.max_total_sequence_length=96
    grpo.max_num_steps=3 grpo.val_period=0 grpo.val_at_start=false checkpointing.save_period=3 policy.generation.top_k=
    grpo.reward_shaping.enabled=true grpo.reward_shaping.overlong_buffer_length=12
    grpo.reward_shaping.overlong_buffer_penalty=1.0 grpo.reward_shaping.max_response_length=16
    env.format_reward=0.2 policy.generation.temperature=1.0 grpo.use_leave_one_out_baseline=true policy.optimizer.lr=1e-4)
}
