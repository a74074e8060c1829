#!/usr/bin/env bash
# `nemotron report` on a run directory made by a tiny pretrain (mock data) beside an RL stage's
# metrics and an evaluation results.json: the page is written atomically where asked, holds every
# stage's curves, config and the evaluation table, escapes what it shows, and bad input is one
# `error:` line with exit 2. Usage: report_test.sh path/to/nemotron
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

run="$TMP/run"
expect_ok "tiny pretrain" '^training done' "$BIN" super3 pretrain -c tiny dataset.mock=true dataset.seq_length=32 \
  train.global_batch_size=4 train.micro_batch_size=2 train.eval_interval=2 scheduler.lr_warmup_iters=1 \
  scheduler.lr_wsd_decay_iters=2 train.train_iters=4 checkpoint.save="$run/pretrain"
mkdir -p "$run/rl" "$run/eval" "$run/notes"
for i in 1 2 3; do
  echo "{\"type\":\"train\",\"iteration\":$i,\"reward_mean\":0.$i,\"accuracy\":0.${i}5}" >>"$run/rl/metrics.jsonl"
done
echo '{"gsm8k": {"accuracy": 0.5, "n": 100}, "note": "<script>alert(1)</script>"}' >"$run/eval/results.json"

expect_ok "report" "^report: $run/report.html \(2 stage\(s\): pretrain, rl; 1 results.json; [0-9.]+ KiB\)$" \
  "$BIN" report "$run"
page="$run/report.html"
for want in '<h2>pretrain</h2>' '<h2>rl</h2>' '<title>lm loss</title>' '<title>learning rate</title>' \
  '<title>grad norm</title>' '<title>reward_mean</title>' '<title>accuracy</title>' '>validation</text>' \
  '<summary>resolved config' 'hybrid_override_pattern' 'gsm8k.accuracy' '&lt;script&gt;alert(1)&lt;/script&gt;'; do
  grep -qF -- "$want" "$page" || fail "report.html lacks $want"
done
grep -qiE '<script|src=|https://|url\(' "$page" && fail "report.html loads or runs something"
[[ -z "$(find "$run" -maxdepth 1 -name 'report.html.tmp*')" ]] || fail "a temporary file was left"
expect_ok "report --output to a new directory" "^report: $TMP/reports/r.html " "$BIN" report "$run" --output "$TMP/reports/r.html"
[[ -s "$TMP/reports/r.html" ]] || fail "--output: nothing written"
expect_ok "report of one stage" "^report: $TMP/one.html \(1 stage\(s\): pretrain; 0 results.json" \
  "$BIN" report "$run/pretrain" -o "$TMP/one.html"

expect_error "missing run dir" "$TMP/nope: no such directory" "$BIN" report "$TMP/nope"
mkdir -p "$TMP/empty"
expect_error "run dir without stages" \
  "$TMP/empty: no training stage found (expected metrics.jsonl or checkpoints in it or in its subdirectories, as in runs/super3/tiny/pretrain) and no results.json" \
  "$BIN" report "$TMP/empty"
[[ -z "$(ls -A "$TMP/empty")" ]] || fail "the refused report wrote into $TMP/empty"

finish "report CLI checks"
