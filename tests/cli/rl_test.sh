#!/usr/bin/env bash
# `nemotron <family> rl` as a user runs it, end to end on the tiny recipe: data prep pretrain ->
# a few pretraining steps -> data prep sft -> a few SFT steps -> data prep rl -> a few GRPO steps
# from that SFT checkpoint: one log line per step (reward, accuracy, KL, clip fraction, the
# engine/trainer log-prob mismatch, seconds, tokens/s, refit), validation, checkpoints with the
# data cursor, the time to the first step, a model artifact whose lineage reaches the data; the
# chat template as a .jinja file (the built-in's prompts exactly) or auto; a run
# stopped halfway and resumed ends with the uninterrupted run's metrics and weights bit for bit;
# bad input (an unknown key, a missing SFT checkpoint, an overflowing rollout batch, a checkpoint_dir
# another run holds) as one `error:` line, exit 2, nothing written.
# Usage: rl_test.sh path/to/nemotron
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
cd "$TMP"  # artifact names come from paths below ./runs

# The fields of every train record of a metrics file that do not depend on timing.
records() { grep '"type":"train"' "$1" | sed -E 's/.*("accuracy":[^,]*).*("clip_fraction":[^,]*).*("generated_tokens":[^,]*).*("grad_norm":[^,]*).*("loss":[^,]*).*("reward":[^,]*).*("step":[^,}]*).*/\1 \2 \3 \4 \5 \6 \7/'; }

# --- the chain, briefly -----------------------------------------------------------------------
expect_ok "data prep pretrain" 'blend: ' "$BIN" super3 data prep pretrain -c tiny output_dir=runs/tiny/data/pretrain
expect_ok "pretrain 2 steps" '^ iteration +2/ +2 ' "$BIN" super3 pretrain -c tiny \
  dataset.per_split_data_args_path=runs/tiny/data/pretrain/blend.json train.train_iters=2 train.eval_iters=0 \
  train.eval_interval=0 scheduler.lr_warmup_iters=1 scheduler.lr_wsd_decay_iters=1 checkpoint.save=runs/tiny/pretrain
expect_ok "data prep sft" 'efficiency' "$BIN" super3 data prep sft -c tiny output_dir=runs/tiny/data/sft \
  tokenizer.model=runs/tiny/data/pretrain/tokenizer/tokenizer.json sources.0.generator.num_examples=100 heldout_examples=4
expect_ok "sft 1 step" '^ iteration +1/ +1 ' "$BIN" super3 sft -c tiny dataset.dataset_root=runs/tiny/data/sft \
  checkpoint.pretrained_checkpoint=runs/tiny/pretrain checkpoint.save=runs/tiny/sft checkpoint.load=runs/tiny/sft \
  train.global_batch_size=2 train.micro_batch_size=1 train.train_iters=1 train.eval_interval=0 train.eval_iters=0 \
  scheduler.lr_warmup_iters=0
expect_ok "data prep rl" 'manifest: ' "$BIN" super3 data prep rl -c tiny output_dir=runs/tiny/data/rl \
  sources.0.generator.num_examples=40 val_rows=8

rl=("$BIN" super3 rl -c tiny policy.model_name=runs/tiny/sft
  policy.tokenizer.name=runs/tiny/data/pretrain/tokenizer/tokenizer.json
  data.train_jsonl_fpath=runs/tiny/data/rl/train.jsonl data.validation_jsonl_fpath=runs/tiny/data/rl/val.jsonl
  grpo.num_prompts_per_step=2 grpo.num_generations_per_prompt=4 policy.train_global_batch_size=8
  policy.train_micro_batch_size=4 policy.generation.max_new_tokens=16 policy.max_total_sequence_length=96
  grpo.max_num_steps=4 grpo.val_period=2 grpo.max_val_samples=4 checkpointing.save_period=2
  policy.generation.top_k=)  # unfiltered sampling: the engine and the trainer then agree to rounding

# --- dry run: the plan -------------------------------------------------------------------------
expect_ok "dry run" '^engine memory \(fp32\): KV \+ SSM state .* per sequence at 96 tokens' "${rl[@]}" --dry-run
grep -Eq '^plan: 4 steps x \(2 prompts x 4 generations = 8 rollouts\)' "$TMP/out" || fail "dry run: no plan: $(cat "$TMP/out")"
[[ -e runs/tiny/rl ]] && fail "the dry run wrote runs/tiny/rl"

# --- a short run: a line per step, validation, checkpoints, artifact ----------------------------
step_line='^step 4/4 \| reward [0-9.]+ \| accuracy [0-9.]+ \| loss .* \| kl .* \| clip fraction [0-9.]+ \| ratio [0-9.]+ \[[0-9.]+, [0-9.]+\] \| token_mult_prob_error 1\.0000[0-9]+ .*\| gen [0-9.]+ s \(prefill [0-9.]+ s, [0-9]+ prompt tokens, [1-9][0-9]* shared\) \| logprobs [0-9.]+ s \([0-9]+ tokens per rank\) \| train [0-9.]+ s \| total [0-9.]+ s \| [0-9]+ gen tokens/s \| refit 0\.000 s'
expect_ok "rl 4 steps" "$step_line" "${rl[@]}" checkpointing.checkpoint_dir=runs/tiny/rl
grep -Eq '^policy: weights of runs/tiny/sft$' "$TMP/out" || fail "rl: the SFT weights were not loaded: $(head -3 "$TMP/out")"
grep -Eq '^time to first step: [0-9.]+ s from start' "$TMP/out" || fail "rl: no time to first step"
[[ $(grep -Ec '^validation at step [024]: accuracy [0-9.]+ \(greedy, 4 prompts\)' "$TMP/out") -eq 3 ]] ||
  fail "rl: expected validations at steps 0 (val_at_start), 2 and 4: $(grep validation "$TMP/out")"
for f in model.safetensors optimizer.safetensors config.yaml train_state.json; do
  [[ -f runs/tiny/rl/iter_0000004/$f ]] || fail "iter_0000004/$f missing"
done
[[ -d runs/tiny/rl/iter_0000002 ]] || fail "iter_0000002 missing (save_period 2)"
grep -Eq '"kind": ?"grpo_prompts"' runs/tiny/rl/iter_0000004/train_state.json || fail "train_state.json: no GRPO cursor"
[[ $(records runs/tiny/rl/metrics.jsonl | wc -l) -eq 4 ]] || fail "metrics.jsonl: expected 4 train records"
compgen -G "runs/tiny/rl/tb_logs/events.out.tfevents.*" >/dev/null || fail "rl: no TensorBoard event file"
expect_ok "lineage" '^tiny-rl:v2 \(model\)' "$BIN" artifacts lineage tiny-rl
for n in tiny-data-rl tiny-sft tiny-pretrain tiny-data-pretrain; do
  grep -q "<- $n:" "$TMP/out" || fail "lineage: no $n: $(cat "$TMP/out")"
done

# --- the chat template as a file (nano3.jinja) or auto: the built-in nano3's prompts ---------------
jinja="$ROOT/tests/fixtures/jinja/nano3.jinja"
expect_ok "rl 1 step, chat_template=nano3.jinja" "^chat template: $jinja\$" "${rl[@]}" checkpointing.checkpoint_dir=runs/tiny/jinja \
  grpo.max_num_steps=1 policy.tokenizer.chat_template="$jinja"
[[ -n "$(records runs/tiny/jinja/metrics.jsonl)" && "$(records runs/tiny/jinja/metrics.jsonl)" == "$(records runs/tiny/rl/metrics.jsonl | head -1)" ]] ||
  fail "step 1 with nano3.jinja differs from the built-in's: $(records runs/tiny/jinja/metrics.jsonl) vs $(records runs/tiny/rl/metrics.jsonl | head -1)"
expect_ok "rl, chat_template=auto (the SFT checkpoint has none: nano3)" '^chat template: nano3$' "${rl[@]}" \
  checkpointing.checkpoint_dir=runs/tiny/auto grpo.max_num_steps=1 policy.tokenizer.chat_template=auto
printf '{{ messages[0].content }}\n{%% if %%}\n' >"$TMP/broken.jinja"

# --- exact resume: 2 steps, then the same command to 4 == 4 uninterrupted steps -------------------
expect_ok "2 steps" '^step 2/2 ' "${rl[@]}" checkpointing.checkpoint_dir=runs/tiny/part grpo.max_num_steps=2
expect_ok "resume" '^resumed from runs/tiny/part/iter_0000002 at step 2 ' "${rl[@]}" checkpointing.checkpoint_dir=runs/tiny/part
grep -Eq '^step 3/4 ' "$TMP/out" || fail "the resumed run did not continue at step 3"
if [[ "$(records runs/tiny/rl/metrics.jsonl)" == "$(records runs/tiny/part/metrics.jsonl)" ]]; then
  echo "ok: resumed steps equal the uninterrupted run's bit for bit"
else
  fail "resumed records differ: $(records runs/tiny/rl/metrics.jsonl) vs $(records runs/tiny/part/metrics.jsonl)"
fi
cmp -s runs/tiny/rl/iter_0000004/model.safetensors runs/tiny/part/iter_0000004/model.safetensors ||
  fail "final weights differ after resume"

# --- bad input: one line, exit 2, nothing written --------------------------------------------------
recipe=$(cd "$ROOT" && pwd)/recipes/super3/rl/tiny.yaml
expect_error "unknown key" \
  "$recipe: grpo.num_prompts_per_stp: unknown key (did you mean \"num_prompts_per_step\"?)" \
  "${rl[@]}" checkpointing.checkpoint_dir=runs/tiny/b grpo.num_prompts_per_stp=3
expect_error "missing SFT checkpoint" \
  "$recipe: policy.model_name: runs/tiny/nope does not exist; run the SFT stage first (\`nemotron super3 sft -c tiny\`) or point it at a checkpoint" \
  "${rl[@]}" checkpointing.checkpoint_dir=runs/tiny/b policy.model_name=runs/tiny/nope
expect_error "a chat template with a syntax error" \
  "$recipe: policy.tokenizer.chat_template: $TMP/broken.jinja:2: expected an expression, got end of statement block" \
  "${rl[@]}" checkpointing.checkpoint_dir=runs/tiny/b policy.tokenizer.chat_template="$TMP/broken.jinja"
expect_error "unknown device" "$recipe: device: expected cpu, cuda or cuda:N, got \"gpu\"" \
  "${rl[@]}" checkpointing.checkpoint_dir=runs/tiny/b device=gpu
# A GPU this build or machine lacks (the GPU path itself: tests/cli/cuda_rl_test.sh).
expect_usage_error "cuda:7 unavailable" \
  "^error: $recipe: device: cuda:7 asked, but (this nemotron was built without CUDA|[0-7] CUDA device\\(s\\) are visible)" \
  "${rl[@]}" checkpointing.checkpoint_dir=runs/tiny/b device=cuda:7
[[ -e runs/tiny/b ]] && fail "a refused run wrote runs/tiny/b"
expect_error "a rollout batch that overflows" \
  "$recipe: grpo.num_generations_per_prompt: 4611686018427387904 x grpo.num_prompts_per_step 2 rollouts per step is more than 2147483648 (every rollout of a step is held in memory at once)" \
  "${rl[@]}" checkpointing.checkpoint_dir=runs/tiny/b grpo.num_generations_per_prompt=4611686018427387904 --dry-run
# A directory another run holds (here flock(1) holds its lock) is refused under RL's own key.
mkdir -p runs/tiny/held
flock runs/tiny/held/run.lock sleep 60 >/dev/null 2>&1 &
holder=$!
for _ in $(seq 50); do flock -n runs/tiny/held/run.lock true 2>/dev/null || break; sleep 0.1; done
expect_usage_error "a checkpoint_dir in use" \
  "^error: checkpointing.checkpoint_dir runs/tiny/held is in use by another run \(its details are not written yet; lock runs/tiny/held/run.lock\): wait for it to end, or pick another checkpointing.checkpoint_dir$" \
  "${rl[@]}" checkpointing.checkpoint_dir=runs/tiny/held
kill $(pgrep -P $holder) $holder 2>/dev/null  # sleep holds the lock, flock waits for it
wait $holder 2>/dev/null

finish "rl checks"
