#!/usr/bin/env bash
# `nemotron <family> data prep rl` as a user runs it: the tiny recipe's bundled problems as NeMo Gym
# rows in train.jsonl / val.jsonl (the last val_rows held out) with manifest.json and metadata.json;
# skip-if-up-to-date; refusal to overwrite another output without --force; --sample; NeMo Gym,
# placeholder, input/output and messages rows converted (from JSONL or Parquet), bad rows dropped
# and counted by reason;
# an invalid JSONL line, a missing file and a bad key as one `error:` line, exit 2, nothing written.
# Usage: rl_data_prep_test.sh path/to/nemotron
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

# expect_prep_error NAME MESSAGE CMD...: exit 2 and the last line of stderr is "error: MESSAGE".
expect_prep_error() {
  local name=$1 message=$2
  shift 2
  "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [[ $rc -ne 2 ]]; then fail "$name: exit $rc, expected 2 (stderr: $(cat "$TMP/err"))"; return; fi
  local got
  got=$(tail -n 1 "$TMP/err")
  [[ "$got" == "error: $message" ]] || { fail "$name: last stderr line was [$got], expected [error: $message]"; return; }
  echo "ok: $name"
}

tiny=recipes/super3/data_prep/rl/tiny.yaml
rl=("$BIN" super3 data prep rl -c tiny output_dir="$TMP/rl")

# --- the tiny recipe ----------------------------------------------------------------------------
expect_ok "data prep rl" "^wrote $TMP/rl: 2000 rows \(0 dropped\) -> 1900 train, 100 val in " "${rl[@]}"
grep -q 'converting arithmetic .*2000/2000 rows' "$TMP/err" || fail "no progress bar on stderr"
[[ $(wc -l <"$TMP/rl/train.jsonl") -eq 1900 && $(wc -l <"$TMP/rl/val.jsonl") -eq 100 ]] || fail "train/val row counts"
grep -q "\"train\": \"$TMP/rl/train.jsonl\"" "$TMP/rl/manifest.json" || fail "manifest.json: no absolute train path"
grep -q "\"val\": \"$TMP/rl/val.jsonl\"" "$TMP/rl/manifest.json" || fail "manifest.json: no absolute val path"
grep -q '"type": "SplitJsonlDataArtifact"' "$TMP/rl/metadata.json" || fail "metadata.json: not a SplitJsonlDataArtifact"
head -n 1 "$TMP/rl/train.jsonl" | grep -Eq '^\{"responses_create_params":\{"input":\[\{"role":"user","content":"[^"]+"\}\]\},"question":"[^"]+","expected_answer":"-?[0-9]+",.*"task_name":"arithmetic"\}$' ||
  fail "train.jsonl: the first row is not a NeMo Gym row: $(head -n 1 "$TMP/rl/train.jsonl")"
# Held out: the last 100 generated problems (2001900 .. 2001999), in order.
head -n 1 "$TMP/rl/val.jsonl" | grep -q '"problem_index":2001900,' || fail "val.jsonl does not start at the 1901st problem"
echo "ok: outputs of the tiny recipe"

# --- skip if up to date, refuse another output, --force, --sample --------------------------------
stamp=$(stat -c %Y "$TMP/rl/metadata.json")
expect_ok "second run is up to date" '^up to date: .*1900 train, 100 val\); nothing to do \(--force rebuilds\)$' "${rl[@]}"
expect_prep_error "another config needs --force" \
  "$TMP/rl: exists and was made from another configuration or inputs; pass --force to overwrite it" "${rl[@]}" val_rows=50
[[ $(stat -c %Y "$TMP/rl/metadata.json") == "$stamp" ]] || fail "the refused run touched metadata.json"
expect_ok "--force rebuilds" '-> 1950 train, 50 val' "${rl[@]}" val_rows=50 --force
expect_ok "--sample" "^wrote $TMP/rl/sample-40: 40 rows \(0 dropped\) -> 20 train, 20 val" "${rl[@]}" val_rows=50 --sample 40
grep -q 'note: arithmetic has 40 rows; 20 held out for validation instead of val_rows=50' "$TMP/err" || fail "--sample: no note on the smaller val split"
expect_ok "sample=40 (Nemotron's key) is --sample 40" "^up to date: $TMP/rl/sample-40 " "${rl[@]}" val_rows=50 sample=40

# --- every input format; bad rows dropped and counted ---------------------------------------------
cat >"$TMP/rows.jsonl" <<'ROWS'
{"responses_create_params": {"input": [{"role": "user", "content": "Solve 30 + 2 inside \\boxed{}."}]}, "question": "30 + 2", "expected_answer": "32", "agent_ref": {"type": "responses_api_agents", "name": "math_with_judge_simple_agent"}}
{"input": "What is 2 + 3?", "output": "5"}
{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 4 * 4?"}, {"role": "assistant", "content": "16"}]}
{"_hf_placeholder": {"row": 7, "question_template": "Solve: {question} Put the answer in \\boxed{}."}, "dataset": "Skywork", "question": "1 + 1?", "expected_answer": "\"2\""}
{"_hf_placeholder": {"row": 8, "question_template": "Solve: {question}"}, "dataset": "DAPO"}
{"responses_create_params": {"input": "hi", "max_tokens": 5}}
{"text": "not an RL row"}
{"input": "What is 1 + 1?", "output": "2"}
ROWS
rows=("$BIN" nano3 data prep rl -c tiny output_dir="$TMP/rows" val_rows=1 "sources=[{name: mine, files: $TMP/rows.jsonl}]")
expect_ok "rows of every format" "^wrote $TMP/rows: 8 rows \(3 dropped\) -> 4 train, 1 val" "${rows[@]}"
grep -q "dropped 1 rows: placeholder without its data (first: $TMP/rows.jsonl:5: _hf_placeholder: row 8 of \"DAPO\" is not in the row" "$TMP/err" || fail "placeholder drop not reported: $(cat "$TMP/err")"
grep -q "dropped 1 rows: bad responses_create_params (first: $TMP/rows.jsonl:6: responses_create_params: unknown key \"max_tokens\"" "$TMP/err" || fail "bad params drop not reported"
grep -q "dropped 1 rows: unknown row format (first: $TMP/rows.jsonl:7: " "$TMP/err" || fail "unknown format drop not reported"
grep -q '"unknown row format": 1' "$TMP/rows/metadata.json" || fail "metadata.json: no drop count"
sed -n 2p "$TMP/rows/train.jsonl" | grep -q '^{"responses_create_params":{"input":\[{"role":"user","content":"What is 2 + 3?"}\]},"question":"What is 2 + 3?","expected_answer":"5","task_name":"mine"}$' ||
  fail "input/output row: $(sed -n 2p "$TMP/rows/train.jsonl")"
sed -n 3p "$TMP/rows/train.jsonl" | grep -q '"input":\[{"role":"system","content":"Be brief."},{"role":"user","content":"What is 4 \* 4?"}\]},"question":"What is 4 \* 4?","expected_answer":"16"' ||
  fail "messages row: $(sed -n 3p "$TMP/rows/train.jsonl")"
sed -n 4p "$TMP/rows/train.jsonl" | grep -q '"dataset":"Skywork","question":"1 + 1?","expected_answer":"2","responses_create_params":{"input":\[{"role":"user","content":"Solve: 1 + 1? Put the answer in \\\\boxed{}."}\]}' ||
  fail "placeholder row: $(sed -n 4p "$TMP/rows/train.jsonl")"
grep -q '_hf_placeholder' "$TMP/rows/train.jsonl" && fail "a resolved row kept _hf_placeholder"
echo "ok: formats converted, drops reported and counted"

# --- messages rows given as Parquet (pyarrow's fixture) give the same rows as the same JSONL --------
pq="$ROOT/tests/fixtures/parquet"
for f in chat_rows.jsonl chat_small_pages.parquet; do
  expect_ok "messages rows from $f" "^wrote $TMP/pq_$f: 206 rows \(3 dropped\) -> 103 train, 100 val" \
    "$BIN" nano3 data prep rl -c tiny output_dir="$TMP/pq_$f" "sources=[{name: mine, files: $pq/$f}]"
done
for split in train val; do
  cmp -s "$TMP/pq_chat_rows.jsonl/$split.jsonl" "$TMP/pq_chat_small_pages.parquet/$split.jsonl" ||
    fail "$split.jsonl from Parquet differs from the same rows as JSONL"
done
echo "ok: Parquet rows"

# --- bad input: one error line, exit 2, nothing written -------------------------------------------
echo '{"input": ' >>"$TMP/rows.jsonl"
expect_prep_error "invalid JSONL line" "$TMP/rows.jsonl:9: invalid JSON at column 11: syntax error while parsing value - unexpected end of input; expected '[', '{', or a literal" \
  "$BIN" nano3 data prep rl -c tiny output_dir="$TMP/bad" "sources=[{name: mine, files: $TMP/rows.jsonl}]"
[[ -e "$TMP/bad" ]] && fail "invalid JSONL: output written"
[[ -z "$(find "$TMP" -maxdepth 1 -name 'bad.tmp-*')" ]] || fail "invalid JSONL: temporary directory left"
expect_error "missing input file" "$tiny: sources[0].files: $TMP/none.jsonl: no such file or directory" \
  "${rl[@]}" "sources=[{files: $TMP/none.jsonl}]"
expect_error "unknown key" "$tiny: val_row: unknown key (did you mean \"val_rows\"?)" "${rl[@]}" val_row=5
expect_error "bad value" "$tiny: val_rows: expected a non-negative integer, got -1" "${rl[@]}" val_rows=-1
expect_error "remote blend" "$tiny: blend_path: \"hf://nvidia/Nemotron-3-Super-RL-Training-Blends\" is remote; download the blend first and give its local raw blend JSON" \
  "$BIN" super3 data prep rl -c tiny output_dir="$TMP/bad" sources=null blend_path=hf://nvidia/Nemotron-3-Super-RL-Training-Blends
[[ -e "$TMP/bad" ]] && fail "a failed run wrote $TMP/bad"

finish "rl data prep checks"
