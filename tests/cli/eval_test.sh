#!/usr/bin/env bash
# `nemotron <family> eval` as a user runs it: a tiny pretrained model (by artifact and by path) on
# the bundled tasks and on task files in our JSONL form and lm-eval's / GSM8K's layouts;
# results.json in lm-eval's layout with standard errors; two models side by side; the results
# published as an artifact; bad input as one line, exit 2.
# Usage: eval_test.sh path/to/nemotron
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

cd "$TMP"
expect_ok "data prep pretrain" 'artifact:  tiny-data:v1' "$BIN" super3 data prep pretrain -c tiny output_dir=runs/tiny/data
train=("$BIN" super3 pretrain -c tiny dataset.per_split_data_args_path=runs/tiny/data/blend.json train.eval_iters=0
  train.eval_interval=0 scheduler.lr_warmup_iters=1 scheduler.lr_wsd_decay_iters=1 checkpoint.save=runs/tiny/base)
expect_ok "pretrain 2 steps" '^ iteration +2/ +2 ' "${train[@]}" train.train_iters=2
TOK=runs/tiny/data/tokenizer/tokenizer.json
ev=("$BIN" super3 eval -c tiny tokenizer.model=$TOK evaluation.limit_samples=6 output_dir=runs/tiny/eval)

expect_ok "eval by artifact" '^arithmetic_facts +acc ↑ +[0-9.]+ ± [0-9.]+$' "${ev[@]}" run.model=tiny-base:latest
for t in 'arithmetic_chat +pass@1' 'arithmetic_text +token_perplexity ↓' '^results: runs/tiny/eval/results.json' \
  '^artifact: tiny-eval:v1 \(EvalResultsArtifact\)'; do
  grep -Eq "$t" "$TMP/out" || fail "eval: no line /$t/: $(tail -12 "$TMP/out")"
done
python3 - runs/tiny/eval/tiny-base-v1/results.json <<'PY' || fail "results.json malformed"
import json, sys
r = json.load(open(sys.argv[1]))
res = r["results"]
assert set(res) == {"arithmetic_facts", "arithmetic_chat", "arithmetic_onestep", "arithmetic_text"}, res
assert 0 <= res["arithmetic_facts"]["acc,none"] <= 1 and res["arithmetic_facts"]["acc_stderr,none"] >= 0
assert res["arithmetic_text"]["token_perplexity,none"] > 1
assert r["n-samples"]["arithmetic_facts"]["effective"] == 6
assert r["model"]["artifact"] == "tiny-base:v1"
PY
expect_ok "lineage of the results" '^  <- tiny-base:v1' "$BIN" artifacts lineage tiny-eval

# Two models side by side (a second checkpoint: 2 more steps), and a model given by path.
expect_ok "pretrain 4 steps" '^ iteration +4/ +4 ' "${train[@]}" train.train_iters=4 checkpoint.save=runs/tiny/longer
expect_ok "two models" '^arithmetic_facts +acc ↑ +[0-9.]+ ± [0-9.]+ +[0-9.]+ ± [0-9.]+$' "${ev[@]}" \
  run.model=tiny-base:latest,tiny-longer:latest
grep '^Task' "$TMP/out" | grep -q 'tiny-base:v1 .*tiny-longer:v1' || fail "two models: header $(grep '^Task' "$TMP/out")"
[[ -f runs/tiny/eval/tiny-longer-v1/results.json ]] || fail "two models: no results.json of the second"
expect_ok "by path" '^model iter_0000004: .*runs/tiny/longer/iter_0000004 \(native, iteration 4\)' "${ev[@]}" \
  deployment.checkpoint_path=runs/tiny/longer/iter_0000004 run.model=

# Task files: our form, lm-eval's ARC and HellaSwag rows, GSM8K, perplexity; few-shot from a pool.
cat >mc.jsonl <<'ROWS'
{"context": "1 + 1 =", "choices": ["2.", "3."], "gold": 0}
{"question": "2 + 2 =", "choices": {"text": ["4.", "5.", "6."], "label": ["A", "B", "C"]}, "answerKey": "A"}
{"ctx": "3 + 3 =", "endings": ["6.", "7."], "label": "0"}
ROWS
printf '%s\n' '{"question": "What is 2 + 3?", "answer": "2 + 3 = 5.\n#### 5"}' '{"question": "What is 1 + 3?", "answer": "#### 4"}' >gsm.jsonl
printf '%s\n' '{"text": "7 + 8 = 15."}' '{"text": "9 - 4 = 5."}' >ppl.jsonl
cat >tasks.yaml <<EOF2
run: {model: null}
deployment: {checkpoint_path: runs/tiny/base}
tokenizer: {model: $TOK}
evaluation:
  tasks:
    - {name: mc, type: multiple_choice, path: mc.jsonl, num_fewshot: 1}
    - {name: gsm, type: generate, path: gsm.jsonl, format: gsm8k, verifier: math, max_new_tokens: 8, num_fewshot: 1}
    - {name: ppl, type: perplexity, path: ppl.jsonl}
output_dir: runs/tiny/eval_files
EOF2
expect_ok "task files" '^mc +acc_norm ↑ ' "$BIN" super3 eval -c tasks.yaml
grep -Eq '^  gsm +2 items' "$TMP/out" || fail "task files: no gsm line: $(cat "$TMP/out")"
grep -Eq '^ +[0-9]+ forwards of [0-9.]+ rows x 512 tokens \([0-9]+% filled\), [0-9]+ tokens scored$' "$TMP/out" ||
  fail "task files: no scoring line: $(cat "$TMP/out")"
# Packed rows batched per forward (rows_per_forward, 8 by default) score as one row per forward.
grep -E '^(mc|ppl) ' "$TMP/out" >batched.txt && [[ $(wc -l <batched.txt) -ge 3 ]] || fail "task files: no mc/ppl rows"
expect_ok "one row per forward" '^mc +acc_norm ↑ ' "$BIN" super3 eval -c tasks.yaml evaluation.rows_per_forward=1
grep -E '^(mc|ppl) ' "$TMP/out" | diff batched.txt - >/dev/null ||
  fail "rows_per_forward=1 scored differently: $(grep -E '^(mc|ppl) ' "$TMP/out") vs $(cat batched.txt)"

# Bad input.
expect_error "unknown task type" \
  "tasks.yaml: evaluation.tasks[0].type: expected multiple_choice, generate or perplexity, got \"mcq\"" \
  "$BIN" super3 eval -c tasks.yaml 'evaluation.tasks.0.type=mcq'
expect_error "bf16 on the host" "tasks.yaml: deployment.dtype: bfloat16 needs device: cuda (the host computes in float32)" \
  "$BIN" super3 eval -c tasks.yaml deployment.dtype=bfloat16
expect_error "rows per forward" "tasks.yaml: evaluation.rows_per_forward: expected a positive integer, got 0" \
  "$BIN" super3 eval -c tasks.yaml evaluation.rows_per_forward=0
printf '%s\n' '{"context": "x", "choices": ["a"], "gold": 4}' >bad.jsonl
expect_error "gold out of range" "bad.jsonl:1: gold: expected an index of the 1 choices, got 4" \
  "$BIN" super3 eval -c tasks.yaml evaluation.tasks.0.path=bad.jsonl
expect_error "missing model artifact" "artifact tiny-rl:latest not found in $TMP/artifacts (have: tiny-base, tiny-data, tiny-eval, tiny-eval_files, tiny-longer)" \
  "${ev[@]}" run.model=tiny-rl:latest
expect_error "no checkpoint" "runs/nothing: no such checkpoint directory" "$BIN" super3 eval -c tasks.yaml \
  deployment.checkpoint_path=runs/nothing
[[ ! -e runs/tiny/eval_bad ]] || fail "bad input wrote something"

finish "eval: bundled tasks, task files in four layouts, results.json, models side by side, artifacts, bad input"
