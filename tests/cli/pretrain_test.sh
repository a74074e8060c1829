#!/usr/bin/env bash
# `nemotron <family> pretrain` as a user runs it: --dry-run of every recipe (prints the plan, writes
# nothing), a few tiny steps on mock data with checkpoints, an interrupted run resumed from its
# checkpoint giving the uninterrupted run's losses bit for bit, and bad input (unknown or mistyped
# overrides, a checkpoint of another model shape, a model too big for this machine) as one
# `error:` line with exit 2 and nothing written. Usage: pretrain_test.sh path/to/nemotron
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

# The lm_loss of every train record of a metrics file, one per line, as JSON wrote it (all digits).
losses() { grep '"type":"train"' "$1" | sed -E 's/.*"lm_loss":([^,}]*).*/\1/'; }

# Small enough for a few seconds per run: 32 tokens, 4 sequences in 2 micro-batches, mock data.
small=(dataset.mock=true dataset.seq_length=32 train.global_batch_size=4 train.micro_batch_size=2 train.eval_interval=2
  scheduler.lr_warmup_iters=1 scheduler.lr_wsd_decay_iters=2 logger.log_interval=1)

# --- dry runs: the plan of every recipe, nothing run or written --------------------------------
mkdir -p "$TMP/cwd"
for family in super3 nano3; do
  for name in tiny default; do
    expect_ok "$family $name --dry-run" '^nothing was run \(--dry-run\)$' \
      bash -c "cd '$TMP/cwd' && '$BIN' $family pretrain -c $name --dry-run"
  done
done
[[ -z "$(ls -A "$TMP/cwd")" ]] || fail "--dry-run wrote files: $(ls -A "$TMP/cwd")"
expect_ok "super3 default size (with MTP: the published total)" '^  parameters +123,611,033,088  \(123\.61 B\)$' "$BIN" super3 pretrain --dry-run
grep -Eq '^  of which MTP +2,942,325,248  \(2 depths, loss weight 0\.3\)$' "$TMP/out" || fail "super3 dry-run: no MTP line"
expect_ok "super3 default schedule" 'anneal after 793729 iterations \| min_lr from iteration 992412 \| last \(993404\): 4\.5000E-06$' "$BIN" super3 pretrain --dry-run
expect_ok "nano3 default size" '^  parameters +31,577,940,288  \(31\.58 B\)$' "$BIN" nano3 pretrain --dry-run
expect_ok "dry-run shows overrides" '^  global_batch_size: 64$' "$BIN" super3 pretrain -c tiny --dry-run train.global_batch_size=64
expect_ok "dry-run memory" '^  total +[0-9.]+ MiB$' "$BIN" nano3 pretrain -c tiny --dry-run
expect_ok "-c PATH" '^recipe: recipes/nano3/pretrain/tiny.yaml' "$BIN" super3 pretrain -c recipes/nano3/pretrain/tiny.yaml -d

# --- a few tiny steps with checkpoints --------------------------------------------------------
expect_ok "tiny pretrain" '^ iteration +4/ +4 \| consumed samples: +16 \|.* lm loss: [0-9.]+E\+00 \|.* grad norm: [0-9.]+ \| tokens/s: [0-9]+ \| elapsed: 0:00:[0-9]{2} \| ETA: 0:00:00$' \
  "$BIN" super3 pretrain -c tiny "${small[@]}" train.train_iters=4 checkpoint.save="$TMP/a" checkpoint.save_interval=2
grep -q '^ validation loss at iteration 2 | lm loss value: ' "$TMP/out" || fail "tiny pretrain: no validation line"
[[ "$(cat "$TMP/a/latest_checkpointed_iteration.txt")" == 4 ]] || fail "tracker is not 4"
for f in model.safetensors optimizer.safetensors train_state.json config.yaml; do
  [[ -f "$TMP/a/iter_0000004/$f" ]] || fail "iter_0000004/$f missing"
done
[[ -d "$TMP/a/iter_0000002" ]] || fail "iter_0000002 missing (save_interval 2)"
[[ $(losses "$TMP/a/metrics.jsonl" | wc -l) -eq 4 ]] || fail "metrics.jsonl: expected 4 train records"

# TensorBoard (logger.tensorboard_dir, default <save>/tb_logs): one event file whose TFRecord frames
# tile it exactly: the file_version event, then one event per train and validation record.
tfrecords() {  # the number of frames when their lengths tile FILE exactly, else "bad"
  local f=$1 size off=0 n=0 len
  size=$(stat -c %s "$f")
  while ((off + 12 <= size)); do
    len=$(od -An -t u8 -j "$off" -N 8 "$f" | tr -d ' ')
    off=$((off + 12 + len + 4)) n=$((n + 1))
  done
  if ((off == size)); then echo "$n"; else echo bad; fi
}
tb=("$TMP"/a/tb_logs/events.out.tfevents.*)
want=$(($(grep -Ec '"type":"(train|validation)"' "$TMP/a/metrics.jsonl") + 1))
if [[ ${#tb[@]} -eq 1 && -f "${tb[0]}" && "$(tfrecords "${tb[0]}")" == "$want" ]] &&
  grep -aq 'brain.Event:2' "${tb[0]}" && grep -aq 'lm loss validation' "${tb[0]}" && grep -aq 'learning-rate' "${tb[0]}"; then
  echo "ok: tb_logs holds one event file of $want records"
else
  fail "tb_logs: ${tb[*]}: $(tfrecords "${tb[0]}") records, expected $want"
fi
grep -q "^tensorboard: ${tb[0]}$" "$TMP/out" || fail "the run does not print its event file"

# Multi-token prediction (off in the tiny recipe, on in default.yaml) by overrides: one "*E" block
# at 2 depths, each depth's loss in the log line and the metrics.
expect_ok "tiny pretrain with MTP" '^ iteration +2/ +2 .*\| lm loss: [0-9.]+E\+00 \| mtp_1 loss: [0-9.]+E\+00 \| mtp_2 loss: [0-9.]+E\+00 \|' \
  "$BIN" super3 pretrain -c tiny "${small[@]}" train.train_iters=2 checkpoint.save="$TMP/mtp" \
  model.num_nextn_predict_layers=1 'model.mtp_hybrid_override_pattern="*E"' model.mtp_num_layers=2
[[ $(grep -c '"mtp_1_loss":[0-9.e+-]*,"mtp_2_loss":' "$TMP/mtp/metrics.jsonl") -eq 2 ]] || fail "metrics.jsonl: no MTP losses"
expect_ok "tensorboard_dir moves it" '^tensorboard: '"$TMP"'/tbx/events\.out\.tfevents\.' \
  "$BIN" super3 pretrain -c tiny "${small[@]}" train.train_iters=2 checkpoint.save="$TMP/tb-moved" logger.tensorboard_dir="$TMP/tbx"
[[ ! -e "$TMP/tb-moved/tb_logs" && "$(tfrecords "$TMP"/tbx/events.out.tfevents.*)" == 4 ]] || fail "tensorboard_dir: not moved"
expect_ok "tensorboard_dir= turns it off" '^training done' \
  "$BIN" super3 pretrain -c tiny "${small[@]}" train.train_iters=2 checkpoint.save="$TMP/tb-off" logger.tensorboard_dir=
[[ ! -e "$TMP/tb-off/tb_logs" ]] && ! grep -q '^tensorboard:' "$TMP/out" || fail "tensorboard_dir=: still written"
"$BIN" super3 pretrain -c tiny "${small[@]}" train.train_iters=2 checkpoint.save="$TMP/tb-bad" \
  logger.tensorboard_dir="$TMP/a/metrics.jsonl/tb" >"$TMP/out" 2>"$TMP/err"
rc=$?
[[ $rc -eq 2 && "$(cat "$TMP/err")" == "error: $TMP/a/metrics.jsonl/tb: cannot create the TensorBoard directory: Not a directory" ]] &&
  echo "ok: an unwritable tensorboard_dir is one error line, exit 2" || fail "unwritable tensorboard_dir: exit $rc: $(cat "$TMP/err")"

# --- exact resume: 3 steps, exit, resume to 6 == 6 uninterrupted steps ---------------------------
run6=("$BIN" nano3 pretrain -c tiny "${small[@]}" train.train_iters=6)
expect_ok "uninterrupted 6 steps" '^ iteration +6/ +6 ' "${run6[@]}" checkpoint.save="$TMP/full"
expect_ok "exit_interval 3" '^exiting at iteration 3 \(train.exit_interval 3\)$' \
  "${run6[@]}" checkpoint.save="$TMP/part" train.exit_interval=3
expect_ok "resume from the checkpoint" "^resumed from $TMP/part/iter_0000003 at iteration 3 \(12 samples consumed\)$" \
  "${run6[@]}" checkpoint.save="$TMP/part" checkpoint.load="$TMP/part"
grep -Eq '^ iteration +4/ +6 ' "$TMP/out" || fail "the resumed run did not continue at iteration 4"
if [[ "$(losses "$TMP/full/metrics.jsonl")" == "$(losses "$TMP/part/metrics.jsonl")" &&
  $(losses "$TMP/full/metrics.jsonl" | wc -l) -eq 6 ]]; then
  echo "ok: resumed losses equal the uninterrupted run's bit for bit"
else
  fail "resumed losses differ: $(losses "$TMP/full/metrics.jsonl" | tr '\n' ' ') vs $(losses "$TMP/part/metrics.jsonl" | tr '\n' ' ')"
fi
cmp -s "$TMP/full/iter_0000006/model.safetensors" "$TMP/part/iter_0000006/model.safetensors" ||
  fail "final weights differ after resume"
tb=("$TMP"/part/tb_logs/events.out.tfevents.*)
[[ ${#tb[@]} -eq 2 ]] || fail "the resumed run did not add its own event file: ${tb[*]}"
# --- the pipeline: data prep writes .bin/.idx and blend.json, pretrain reads them; exact resume ---
expect_ok "data prep pretrain" 'blend: ' "$BIN" super3 data prep pretrain -c tiny output_dir="$TMP/dp"
real=("$BIN" super3 pretrain -c tiny dataset.per_split_data_args_path="$TMP/dp/blend.json" dataset.seq_length=32
  train.global_batch_size=4 train.micro_batch_size=2 train.eval_interval=2 train.train_iters=4
  scheduler.lr_warmup_iters=1 scheduler.lr_wsd_decay_iters=2)
expect_ok "pretrain on prepared data" '^data: train split: [0-9]+ samples of BlendedDataset' "${real[@]}" checkpoint.save="$TMP/rfull"
expect_ok "prepared data: exit at 2" '^exiting at iteration 2 ' "${real[@]}" checkpoint.save="$TMP/rpart" \
  train.exit_interval=2
expect_ok "prepared data: resume" '^ iteration +4/ +4 ' "${real[@]}" checkpoint.save="$TMP/rpart" \
  checkpoint.load="$TMP/rpart"
if [[ "$(losses "$TMP/rfull/metrics.jsonl")" == "$(losses "$TMP/rpart/metrics.jsonl")" &&
  $(losses "$TMP/rfull/metrics.jsonl" | wc -l) -eq 4 ]]; then
  echo "ok: prepared data: resumed losses equal the uninterrupted run's bit for bit"
else
  fail "prepared data: resumed losses differ"
fi
grep -q '"kind": "gpt"' "$TMP/rpart/iter_0000004/train_state.json" || fail "train_state.json: no .bin/.idx loader state"

expect_ok "load == save with no checkpoint yet starts fresh" 'no checkpoint there yet, starting from scratch' \
  "${run6[@]}" train.train_iters=1 scheduler.lr_wsd_decay_iters=1 checkpoint.save="$TMP/auto" checkpoint.load="$TMP/auto"

# --- bad input: one line, exit 2, nothing written -----------------------------------------------
tiny=recipes/super3/pretrain/tiny.yaml
expect_error "unknown override key" "$tiny: train.global_batch_sze: unknown key (did you mean \"global_batch_size\"?)" \
  "$BIN" super3 pretrain -c tiny train.global_batch_sze=8
expect_error "wrong override type" "$tiny: train.global_batch_size: expected a positive integer, got \"eight\"" \
  "$BIN" super3 pretrain -c tiny train.global_batch_size=eight
expect_error "conflicting batch sizes" "$tiny: train.global_batch_size: 12 is not a multiple of train.micro_batch_size 8" \
  "$BIN" super3 pretrain -c tiny train.global_batch_size=12
expect_error "unknown recipe name" \
  "-c tinny: no recipe super3/pretrain/tinny.yaml under recipes, $(cd "$(dirname "$BIN")/.." && pwd)/recipes, $(cd "$(dirname "$BIN")/../.." && pwd)/recipes, $(cd "$(dirname "$BIN")/.." && pwd)/share/nemotron/recipes (give a path to a YAML file, or set NEMOTRON_RECIPES)" \
  "$BIN" super3 pretrain -c tinny
before=$(find "$TMP/a" -type f -exec md5sum {} + | sort)
expect_error "checkpoint of another model shape" \
  "$TMP/a/iter_0000004/model.safetensors: tensor \"backbone.embeddings.weight\" has shape [1024, 64] but the model expects [1024, 32] (a checkpoint of another model shape?)" \
  "$BIN" super3 pretrain -c tiny "${small[@]}" model.hidden_size=32 checkpoint.load="$TMP/a" checkpoint.save="$TMP/b"
[[ ! -e "$TMP/b" ]] || fail "the refused run created $TMP/b"
[[ "$(find "$TMP/a" -type f -exec md5sum {} + | sort)" == "$before" ]] || fail "the refused run changed $TMP/a"
expect_error "missing checkpoint" "$TMP/nope: no such checkpoint directory" \
  "$BIN" super3 pretrain -c tiny dataset.mock=true checkpoint.load="$TMP/nope"
expect_error "missing blend.json" \
  "$tiny: dataset.per_split_data_args_path: $TMP/nope.json does not exist; write it with \`nemotron super3 data prep pretrain -c tiny\`, or train on synthetic tokens with dataset.mock=true" \
  "$BIN" super3 pretrain -c tiny dataset.per_split_data_args_path="$TMP/nope.json" checkpoint.save="$TMP/c"
[[ ! -e "$TMP/c" ]] || fail "the refused run created $TMP/c"
# Megatron's own .bin/.idx fixture holds ids up to 2^31 - 1: not data for a 1024-token vocabulary.
"$BIN" super3 pretrain -c tiny "${small[@]}" dataset.mock=false dataset.per_split_data_args_path= \
  dataset.blend="[tests/fixtures/megatron/ours_int32]" \
  dataset.split=1,0,0 train.train_iters=2 checkpoint.save= >"$TMP/out" 2>"$TMP/err"
rc=$?
if [[ $rc -eq 2 && "$(cat "$TMP/err")" == "error: data (train split): sample "*" holds token id "*", outside the model's vocabulary [0, 1024) (model.vocab_size; was the data tokenized for this model?)" ]]; then
  echo "ok: .bin/.idx data outside the vocabulary"
else
  fail ".bin/.idx data outside the vocabulary: exit $rc, stderr $(cat "$TMP/err")"
fi
# Sizes: an overflowing run length is one line naming the key; a run whose data indices
# (train_iters x global batch samples, built in host memory) cannot fit is refused before any work,
# with or without a GPU; seq_length 1 is refused by --dry-run as by the real run.
expect_error "train_iters that overflows" \
  "$tiny: train.train_iters: 576460752303423488 iterations x global batch 16 x 129 tokens is more than 2^62 tokens (a 64-bit count); expected a realistic run length" \
  "$BIN" super3 pretrain -c tiny train.train_iters=576460752303423488 --dry-run
for dev in cpu cuda; do
  "$BIN" super3 pretrain -c tiny device=$dev train.train_iters=100000000000 checkpoint.save="$TMP/huge" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  if [[ $rc -eq 2 ]] && grep -Eq "^error: $tiny: the data's sample indices \(1,600,000,000,064 samples: train.train_iters 100000000000 x train.global_batch_size 16, plus validation\) need about 49\.48 TiB of host memory, this machine has .*; lower train.train_iters \(see the plan with --dry-run\)$" "$TMP/err"; then
    echo "ok: device=$dev: data indices that cannot fit are refused up front"
  else
    fail "device=$dev: data indices that cannot fit: exit $rc, stderr $(cat "$TMP/err")"
  fi
  [[ ! -e "$TMP/huge" ]] || fail "the refused run created $TMP/huge"
done
expect_ok "dry-run counts the data indices" '^  data indices +49\.48 TiB  \(sample, shuffle and blend indices of 1,600,000,000,064 samples' \
  "$BIN" super3 pretrain -c tiny train.train_iters=100000000000 --dry-run
expect_error "seq_length 1 in a dry run" "$tiny: dataset.seq_length: expected an integer >= 2, got 1" \
  "$BIN" super3 pretrain -c tiny dataset.seq_length=1 --dry-run

default_mem=$("$BIN" super3 pretrain --dry-run | sed -nE 's/^  total +//p')
"$BIN" super3 pretrain >"$TMP/out" 2>"$TMP/err"
rc=$?
if [[ $rc -eq 2 ]] && grep -Eq "^error: recipes/super3/pretrain/default.yaml: training this model on the CPU needs about $default_mem \(123\.61 B parameters\), this machine has .*; see the plan with --dry-run, or use -c tiny$" "$TMP/err"; then
  echo "ok: default refuses to start on a CPU without the memory"
else
  fail "default without --dry-run: exit $rc, stderr $(cat "$TMP/err")"
fi
"$BIN" super3 pretrain -c tiny stray >"$TMP/out" 2>"$TMP/err" && fail "stray positional accepted"
grep -q 'expected key=value, got stray' "$TMP/err" && echo "ok: stray positional" || fail "stray positional: $(cat "$TMP/err")"

finish "pretrain CLI checks"
