#!/usr/bin/env bash
# The checkpoint directory rules (src/train/run_dir.h) with the real binary, as a user and as
# Slurm treat it: a fresh run over another run's checkpoint.save is refused with nothing touched
# and load = save resumes; a second run while one trains is refused naming it; kill -9 mid-run
# then resume ends bit for bit where an uninterrupted run does; SIGTERM saves at the step boundary
# and exits 143, and the resumed run's losses equal the uninterrupted run's; SIGINT twice exits
# at once (130) with nothing half-written; an interrupted prune is finished at the next start; a
# half-deleted or mislabelled iteration is refused by resume and export; an empty checkpoint.save
# warns; a metrics file that cannot be written says "not writable"; records logged past the
# checkpoint a run resumes from are dropped from metrics.jsonl, not kept twice.
# Usage: checkpoint_dir_test.sh path/to/nemotron
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

# The lm_loss of every train record of a metrics file, one per line, as JSON wrote it (all digits).
losses() { grep '"type":"train"' "$1" | sed -E 's/.*"lm_loss":([^,}]*).*/\1/'; }
records() {
  local n
  n=$(grep -c '"type":"train"' "$1" 2>/dev/null)
  echo "${n:-0}"
}
# wait_for N FILE: until FILE has N train records (30 s at most).
wait_for() {
  for _ in $(seq 600); do
    [[ $(records "$2") -ge $1 ]] && return 0
    sleep 0.05
  done
  return 1
}
# wait_grep PATTERN FILE: until FILE has a line matching PATTERN (60 s at most).
wait_grep() {
  for _ in $(seq 1200); do
    grep -Eq -- "$1" "$2" 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}
same_files() { cmp -s "$1/model.safetensors" "$2/model.safetensors" && cmp -s "$1/optimizer.safetensors" "$2/optimizer.safetensors"; }

# Tiny steps (tens of ms) with a constant rate after one warmup step: how far a run is told to go
# (train.train_iters) then changes nothing of its first steps, so a run told to go far and stopped
# early continues exactly into a shorter uninterrupted one.
small=(dataset.mock=true dataset.seq_length=32 train.global_batch_size=4 train.micro_batch_size=2 train.eval_iters=0
  train.eval_interval=0 scheduler.lr_decay_style=constant scheduler.lr_wsd_decay_iters=0 scheduler.lr_warmup_iters=1 logger.log_interval=1)
run=("$BIN" super3 pretrain -c tiny "${small[@]}")

expect_ok "uninterrupted reference run, 12 steps" '^ iteration +12/ +12 ' "${run[@]}" train.train_iters=12 \
  checkpoint.save="$TMP/ref"

# --- 1. a fresh run over another run's directory is refused; load = save resumes ---------------
expect_ok "run A, 6 steps" '^checkpoint: ' "${run[@]}" train.train_iters=6 checkpoint.save="$TMP/a" checkpoint.save_interval=2
before=$(find "$TMP/a" -type f ! -name run.lock -exec md5sum {} + | sort)
expect_error "run B into A's directory" \
  "checkpoint.save $TMP/a holds iteration 6 of an earlier run; resume it with checkpoint.load=$TMP/a, or pick another checkpoint.save" \
  "${run[@]}" train.train_iters=4 checkpoint.save="$TMP/a"
expect_error "fine-tuning into A's directory" \
  "checkpoint.save $TMP/a holds iteration 6 of an earlier run, and checkpoint.finetune=true would start over at iteration 0 there, replacing it: pick another checkpoint.save for the fine-tuned run" \
  "${run[@]}" train.train_iters=4 checkpoint.save="$TMP/a" checkpoint.load="$TMP/a" checkpoint.finetune=true
[[ "$(find "$TMP/a" -type f ! -name run.lock -exec md5sum {} + | sort)" == "$before" ]] || fail "a refused run changed $TMP/a"
expect_ok "load = save resumes A" "^resumed from $TMP/a/iter_0000006 at iteration 6 \(24 samples consumed\)$" \
  "${run[@]}" train.train_iters=8 checkpoint.save="$TMP/a" checkpoint.load="$TMP/a"
[[ $(records "$TMP/a/metrics.jsonl") -eq 8 ]] || fail "resumed A: metrics.jsonl should hold 8 train records"

# --- 1b. records logged past the checkpoint a run resumes from are dropped, not logged twice -----
expect_ok "6 steps, checkpoints every 2" '^ iteration +6/ +6 ' "${run[@]}" train.train_iters=6 checkpoint.save="$TMP/m" \
  checkpoint.save_interval=2
# As if killed after logging iteration 6 (and mid-line in 7) but before saving it: 5, 6, the
# summary of 6 and the torn line go.
rm -r "$TMP/m/iter_0000006" && echo 4 >"$TMP/m/latest_checkpointed_iteration.txt"
printf '{"type":"train","iteration":7,"lm_lo' >>"$TMP/m/metrics.jsonl"
expect_ok "resume from iteration 4" '^metrics: dropped 4 record\(s\) past iteration 4, logged after the checkpoint this run resumes from$' \
  "${run[@]}" train.train_iters=8 checkpoint.save="$TMP/m" checkpoint.load="$TMP/m" checkpoint.save_interval=2
iters=$(grep '"type":"train"' "$TMP/m/metrics.jsonl" | sed -E 's/.*"iteration":([0-9]+).*/\1/' | tr '\n' ' ')
[[ "$iters" == "1 2 3 4 5 6 7 8 " ]] || fail "metrics.jsonl after the resume: train iterations $iters, expected 1..8 once each"
[[ "$(losses "$TMP/m/metrics.jsonl")" == "$(losses "$TMP/ref/metrics.jsonl" | head -8)" ]] ||
  fail "metrics.jsonl after the resume: losses differ from the uninterrupted run's"
echo "ok: metrics.jsonl holds each iteration once after a resume"

# --- 2. kill -9 mid-run; a second run meanwhile is refused; resume is bit for bit ---------------
"${run[@]}" train.train_iters=100000 checkpoint.save="$TMP/k" checkpoint.save_interval=1 checkpoint.most_recent_k=2 \
  >"$TMP/k.out" 2>&1 &
victim=$!
wait_for 3 "$TMP/k/metrics.jsonl" || fail "kill -9: the run did not start: $(tail -3 "$TMP/k.out")"
kill -STOP $victim  # hold it mid-run while a second run tries the same directory
"${run[@]}" train.train_iters=12 checkpoint.save="$TMP/k" checkpoint.load="$TMP/k" >"$TMP/out" 2>"$TMP/err"
rc=$?
if [[ $rc -eq 2 && ! -s "$TMP/out" ]] && grep -Eq "^error: checkpoint.save $TMP/k is in use by another run \(pid $victim on host [^,]+, started [0-9T:-]+Z: nemotron super3 pretrain -c tiny .*; lock $TMP/k/run.lock\): wait for it to end, or pick another checkpoint.save$" "$TMP/err"; then
  echo "ok: a second run while one trains is refused, naming it"
else
  fail "second run: exit $rc, stderr $(cat "$TMP/err")"
fi
kill -KILL $victim
wait $victim 2>/dev/null
expect_ok "resume after kill -9" "^resumed from $TMP/k/iter_[0-9]+ at iteration [0-9]+ " \
  "${run[@]}" train.train_iters=12 checkpoint.save="$TMP/k" checkpoint.load="$TMP/k" checkpoint.save_interval=1 \
  checkpoint.most_recent_k=2
same_files "$TMP/k/iter_0000012" "$TMP/ref/iter_0000012" && echo "ok: kill -9 then resume: final weights and moments bit for bit" ||
  fail "kill -9 then resume: iteration 12 differs from the uninterrupted run"
[[ -z "$(find "$TMP/k" -maxdepth 1 -name '.pruning-*' -o -maxdepth 1 -name '*.tmp-*')" ]] || fail "leftovers in $TMP/k: $(ls -a "$TMP/k")"

# --- 3. SIGTERM saves at the step boundary, exits 143; the resumed run repeats the reference ----
"${run[@]}" train.train_iters=100000 checkpoint.save="$TMP/t" >"$TMP/t.out" 2>"$TMP/t.err" &
pid=$!
wait_for 3 "$TMP/t/metrics.jsonl" || fail "SIGTERM: the run did not start: $(tail -3 "$TMP/t.err")"
kill -STOP $pid  # then SIGTERM lands mid-run however fast the steps are (well before iteration 12)
kill -TERM $pid
kill -CONT $pid
wait $pid
rc=$?
n=$(cat "$TMP/t/latest_checkpointed_iteration.txt" 2>/dev/null)
if [[ $rc -eq 143 && -n "$n" && $n -lt 12 ]] &&
  [[ "$(tail -1 "$TMP/t.out")" == "received SIGTERM: saved iteration $n to $TMP/t/$(printf 'iter_%07d' "$n"); resume with checkpoint.load=$TMP/t" ]] &&
  [[ $(records "$TMP/t/metrics.jsonl") -eq $n ]]; then
  echo "ok: SIGTERM saved iteration $n and exited 143"
else
  fail "SIGTERM: exit $rc, tracker '$n', stdout $(tail -4 "$TMP/t.out"), stderr $(cat "$TMP/t.err")"
fi
expect_ok "resume after SIGTERM" "^resumed from $TMP/t/iter_[0-9]+ " \
  "${run[@]}" train.train_iters=12 checkpoint.save="$TMP/t" checkpoint.load="$TMP/t"
[[ "$(losses "$TMP/t/metrics.jsonl")" == "$(losses "$TMP/ref/metrics.jsonl")" && $(records "$TMP/t/metrics.jsonl") -eq 12 ]] &&
  echo "ok: SIGTERM then resume: the 12 losses equal the uninterrupted run's bit for bit" ||
  fail "SIGTERM then resume: losses differ: $(losses "$TMP/t/metrics.jsonl" | tr '\n' ' ')"
same_files "$TMP/t/iter_0000012" "$TMP/ref/iter_0000012" || fail "SIGTERM then resume: iteration 12 differs"

# --- 4. SIGINT twice: the second exits at once, during a step, with nothing saved --------------
# Steps of seconds (64 sequences of 512 tokens), so the second signal lands inside the first step.
# A script's background job starts with SIGINT ignored (and nemotron leaves an ignored signal
# ignored), so env gives it the default disposition first, as an interactive shell would.
env --default-signal=INT "$BIN" super3 pretrain -c tiny dataset.mock=true dataset.seq_length=512 train.global_batch_size=64 train.micro_batch_size=8 \
  train.eval_iters=0 train.eval_interval=0 scheduler.lr_wsd_decay_iters=0 scheduler.lr_warmup_iters=0 train.train_iters=3 \
  checkpoint.save="$TMP/i" >"$TMP/i.out" 2>"$TMP/i.err" &
pid=$!
wait_grep '^pretraining ' "$TMP/i.out" || fail "SIGINT: the run did not start: $(cat "$TMP/i.err")"
kill -INT $pid
wait_grep '^received SIGINT: saving and stopping after this step' "$TMP/i.err" || fail "SIGINT: no reply to the first signal"
kill -INT $pid
wait $pid
rc=$?
if [[ $rc -eq 130 ]] && grep -qx 'received SIGINT again: exiting at once' "$TMP/i.err" &&
  ! grep -q 'saved' "$TMP/i.out" && [[ ! -e "$TMP/i/latest_checkpointed_iteration.txt" ]] &&
  [[ -z "$(ls -A "$TMP/i" | grep -v -e '^run.lock$' -e '^metrics.jsonl$' -e '^tb_logs$')" ]]; then
  echo "ok: SIGINT twice exits at once (130) in the middle of a step, nothing half-written"
else
  fail "SIGINT twice: exit $rc, stderr $(cat "$TMP/i.err"), files $(ls -A "$TMP/i")"
fi
expect_ok "after SIGINT twice the directory is free again" 'no checkpoint there yet, starting from scratch' \
  "${run[@]}" train.train_iters=1 checkpoint.save="$TMP/i" checkpoint.load="$TMP/i"
env --default-signal=INT "${run[@]}" train.train_iters=100000 checkpoint.save="$TMP/j" >"$TMP/j.out" 2>"$TMP/j.err" &
pid=$!
wait_for 2 "$TMP/j/metrics.jsonl" || fail "one SIGINT: the run did not start"
kill -INT $pid
wait $pid
rc=$?
[[ $rc -eq 130 ]] && grep -Eq "^received SIGINT: saved iteration [0-9]+ to $TMP/j/iter_[0-9]+; resume with checkpoint.load=$TMP/j$" "$TMP/j.out" &&
  echo "ok: one SIGINT saves and exits 130" || fail "one SIGINT: exit $rc, stdout $(tail -3 "$TMP/j.out")"

# --- 5. interrupted prunes, half-deleted and mislabelled iterations -----------------------------
mkdir -p "$TMP/a/.pruning-iter_0000002/half"  # what a kill during most_recent_k's delete leaves
expect_ok "the next start finishes an interrupted prune" "^note: $TMP/a: finished the interrupted removal of iter_0000002$" \
  "${run[@]}" train.train_iters=9 checkpoint.save="$TMP/a" checkpoint.load="$TMP/a"
[[ ! -e "$TMP/a/.pruning-iter_0000002" ]] || fail "the interrupted prune was not finished"
mkdir -p "$TMP/h" && cp -r "$TMP/a/iter_0000009" "$TMP/a/latest_checkpointed_iteration.txt" "$TMP/h/"
rm "$TMP/h/iter_0000009/model.safetensors"  # half deleted by an earlier build's prune
expect_error "resume from a half-deleted iteration" \
  "$TMP/h/latest_checkpointed_iteration.txt names iteration 9, but $TMP/h/iter_0000009 is incomplete (missing model.safetensors)" \
  "${run[@]}" train.train_iters=10 checkpoint.save="$TMP/h2" checkpoint.load="$TMP/h"
expect_error "export of a half-deleted iteration" \
  "$TMP/h/iter_0000009: incomplete checkpoint (missing model.safetensors; an interrupted save or prune): load another iteration" \
  "$BIN" convert export --checkpoint "$TMP/h" --out "$TMP/hf"
[[ ! -e "$TMP/hf" ]] || fail "the refused export wrote $TMP/hf"
mkdir -p "$TMP/m" && cp -r "$TMP/a/iter_0000009" "$TMP/m/iter_0000007"
expect_error "an iteration whose train_state.json says another" \
  "$TMP/m/iter_0000007/train_state.json: iteration 9 does not match its directory iter_0000007 (iteration 7); the file was copied or edited: load a directory whose name and train_state.json agree" \
  "${run[@]}" train.train_iters=10 checkpoint.save="$TMP/m2" checkpoint.load="$TMP/m/iter_0000007"

# --- 6. an empty checkpoint.save warns; an unwritable metrics file says so -------------------------
expect_ok "empty checkpoint.save warns" '^warning: checkpoint.save is empty: this run saves no checkpoint \(set checkpoint.save=DIR to keep one\)$' \
  "${run[@]}" train.train_iters=1 checkpoint.save=
if [[ $(id -u) -eq 0 ]]; then ro=/sys; else ro=$TMP/ro && mkdir -p "$ro" && chmod 555 "$ro"; fi
expect_error "metrics file in a directory that is not writable" \
  "$ro/sub/metrics.jsonl: cannot create the metrics file's directory: $ro is not writable" \
  "${run[@]}" train.train_iters=1 checkpoint.save="$TMP/w" logger.metrics_path="$ro/sub/metrics.jsonl"
expect_error "checkpoint.save that is not writable" "checkpoint.save $ro/run: cannot create it: $ro is not writable" \
  "${run[@]}" train.train_iters=1 checkpoint.save="$ro/run"
[[ $ro == /sys ]] || chmod 755 "$ro"

finish "checkpoint directory checks"
