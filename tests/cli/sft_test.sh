#!/usr/bin/env bash
# `nemotron <family> sft` as a user runs it, end to end on the tiny recipes: data prep pretrain
# (the tokenizer and tokens) -> a few pretraining steps (stage 0's checkpoint) -> data prep sft
# (packed chat rows) -> a few SFT steps from that checkpoint: the masked loss logged, the
# teacher-forced accuracy on the held-out prompts printed before and after (also for data rendered
# with a Jinja template, equal to the built-in's), checkpoints written,
# an interrupted run resumed with the uninterrupted run's losses bit for bit; bad input (a
# pretrained checkpoint of another model, a missing dataset directory or pretrained checkpoint) as
# one `error:` line, exit 2, nothing written.
# Usage: sft_test.sh path/to/nemotron
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

# The lm_loss of every train record of a metrics file, one per line, as JSON wrote it (all digits).
losses() { grep '"type":"train"' "$1" | sed -E 's/.*"lm_loss":([^,}]*).*/\1/'; }

# --- stage 0, briefly, and the SFT data ---------------------------------------------------------
sft_setup 3 200 20

sft=("$BIN" super3 sft -c tiny "${sft_data[@]}"
  train.global_batch_size=2 train.micro_batch_size=1 train.train_iters=4 train.eval_interval=2 train.eval_iters=1
  scheduler.lr_warmup_iters=1 checkpoint.save_interval=2 logger.log_interval=1)

# --- a short run: loss logged, accuracy before and after, checkpoints ----------------------------
expect_ok "sft 4 steps" '^ iteration +4/ +4 .*lm loss' "${sft[@]}" checkpoint.save="$TMP/a" checkpoint.load="$TMP/a"
grep -Eq "^checkpoint.pretrained_checkpoint: weights from $TMP/pre/iter_0000003 " "$TMP/out" ||
  fail "sft: the pretrained weights were not loaded: $(head -5 "$TMP/out")"
[[ $(grep -Ec '^held-out answers, teacher-forced, at iteration [04]: [0-9.]+% of [0-9]+ answer tokens right \(20 prompts\)$' \
  "$TMP/out") -eq 2 ]] || fail "sft: no teacher-forced accuracy before and after: $(grep held-out "$TMP/out")"
# The held-out lines at iteration 0, without the generated answers' timing (", 1.2 s)").
heldout_lines() { grep 'at iteration 0' "$1" | sed -E 's/, [0-9.]+ s\)$/)/'; }
heldout_at_0=$(heldout_lines "$TMP/out")
for f in model.safetensors optimizer.safetensors config.yaml train_state.json; do
  [[ -f "$TMP/a/iter_0000004/$f" ]] || fail "iter_0000004/$f missing"
done
[[ -d "$TMP/a/iter_0000002" ]] || fail "iter_0000002 missing (save_interval 2)"
[[ $(losses "$TMP/a/metrics.jsonl" | wc -l) -eq 4 ]] || fail "metrics.jsonl: expected 4 train records"
compgen -G "$TMP/a/tb_logs/events.out.tfevents.*" >/dev/null || fail "sft: no TensorBoard event file in $TMP/a/tb_logs"
grep -Eq '"kind": ?"packed_sft"' "$TMP/a/iter_0000004/train_state.json" || fail "train_state.json: no packed_sft cursor"

# --- data rendered with a Jinja template (nano3.jinja): the held-out accuracy is measured with it ---
expect_ok "data prep sft, chat_template=nano3.jinja" 'efficiency' "$BIN" super3 data prep sft -c tiny output_dir="$TMP/sftj" \
  tokenizer.model="$TMP/prep/tokenizer/tokenizer.json" sources.0.generator.num_examples=200 heldout_examples=20 \
  chat_template="$ROOT/tests/fixtures/jinja/nano3.jinja"
expect_ok "sft on it, 1 step" '^ iteration +1/ +1 ' "${sft[@]}" dataset.dataset_root="$TMP/sftj" checkpoint.save="$TMP/j" \
  checkpoint.load="$TMP/j" \
  train.train_iters=1 train.eval_interval=0 train.eval_iters=0
[[ -n "$heldout_at_0" && "$(heldout_lines "$TMP/out")" == "$heldout_at_0" ]] ||
  fail "held-out accuracy with nano3.jinja: [$(grep held-out "$TMP/out")], with the built-in nano3: [$heldout_at_0]"

# --- exact resume: 2 steps, exit, resume to 4 == 4 uninterrupted steps ---------------------------
expect_ok "exit at 2" '^exiting at iteration 2 ' "${sft[@]}" checkpoint.save="$TMP/part" checkpoint.load="$TMP/part" \
  train.exit_interval=2
expect_ok "resume" "^resumed from $TMP/part/iter_0000002 at iteration 2 " "${sft[@]}" checkpoint.save="$TMP/part" \
  checkpoint.load="$TMP/part"
grep -Eq '^ iteration +3/ +4 ' "$TMP/out" || fail "the resumed run did not continue at iteration 3"
if [[ "$(losses "$TMP/a/metrics.jsonl")" == "$(losses "$TMP/part/metrics.jsonl")" &&
  $(losses "$TMP/part/metrics.jsonl" | wc -l) -eq 4 ]]; then
  echo "ok: resumed losses equal the uninterrupted run's bit for bit"
else
  fail "resumed losses differ: $(losses "$TMP/a/metrics.jsonl" | tr '\n' ' ') vs $(losses "$TMP/part/metrics.jsonl" | tr '\n' ' ')"
fi
cmp -s "$TMP/a/iter_0000004/model.safetensors" "$TMP/part/iter_0000004/model.safetensors" ||
  fail "final weights differ after resume"

# --- bad input: one line, exit 2, nothing written --------------------------------------------------
expect_error "pretrained checkpoint of another model" \
  "$TMP/pre/iter_0000003: the checkpoint's model differs from recipes/super3/sft/tiny.yaml's: model.hidden_size is 64 there, 32 here (load a checkpoint of this model, or give the recipe its model: section)" \
  "${sft[@]}" checkpoint.save="$TMP/b" checkpoint.load="$TMP/b" model.hidden_size=32
expect_error "missing dataset directory" \
  "recipes/super3/sft/tiny.yaml: dataset.dataset_root: $TMP/nope does not exist; write it with \`nemotron <family> data prep sft\`" \
  "${sft[@]}" checkpoint.save="$TMP/b" checkpoint.load="$TMP/b" dataset.dataset_root="$TMP/nope"
expect_error "missing pretrained checkpoint" \
  "recipes/super3/sft/tiny.yaml: checkpoint.pretrained_checkpoint: $TMP/nope does not exist; pretrain first (\`nemotron super3 pretrain -c tiny\`) or point it at a checkpoint" \
  "${sft[@]}" checkpoint.save="$TMP/b" checkpoint.load="$TMP/b" checkpoint.pretrained_checkpoint="$TMP/nope"
[[ -e "$TMP/b" ]] && fail "a refused run wrote $TMP/b"

finish "sft checks"
