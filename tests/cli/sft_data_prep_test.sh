#!/usr/bin/env bash
# `nemotron <family> data prep sft` as a user runs it, on the tiny recipe after `data prep pretrain
# -c tiny` (which makes the tokenizer): packed Parquet shards, split links, blend.json, metadata
# with drop counts and packing efficiency; skip-if-up-to-date; refusal to overwrite another output
# without --force; one prep at a time per output_dir (its lock); --sample; bad rows dropped and
# counted; bad config keys, a missing input file, an unknown chat template, an invalid JSONL line
# and a row past max_row_bytes as one `error:` line, exit 2, nothing written; chat_template=<a
# .jinja file> (nano3.jinja packs the built-in's bytes) and its syntax errors; chat rows as Parquet
# (pyarrow's fixtures) pack the same bytes as the same rows in JSONL.
# Usage: sft_data_prep_test.sh path/to/nemotron
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

# expect_prep_error NAME MESSAGE CMD...: exit 2 and the last line of stderr is "error: MESSAGE"
# (the run printed its header and maybe progress lines first).
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
# json_number FILE KEY: a top-level number of a JSON file written with indent 2.
json_number() { sed -nE "s/^  \"$2\": ([0-9.e+-]+),?$/\1/p" "$1"; }

tiny=recipes/nano3/data_prep/sft/tiny.yaml
expect_ok "data prep pretrain (the tokenizer)" 'tokenizer: ' "$BIN" nano3 data prep pretrain -c tiny output_dir="$TMP/pt"
tok="$TMP/pt/tokenizer/tokenizer.json"
sft=("$BIN" nano3 data prep sft -c tiny output_dir="$TMP/sft" tokenizer.model="$tok")

# --- the tiny recipe ----------------------------------------------------------------------------
expect_ok "data prep sft" '^  packing: +first_fit_decreasing, [0-9]+ bins of 512 tokens, [0-9.]+ sequences per bin, efficiency 9[5-9]\.[0-9]%$' "${sft[@]}"
grep -Eq '^wrote .*: 4000 rows \([0-9]+ dropped\), [0-9]+ sequences' "$TMP/out" || fail "data prep sft: no summary line"
grep -q 'dropped [0-9]* rows: used_in_filter' "$TMP/err" || fail "data prep sft: the used_in filter drops are not reported"
meta="$TMP/sft/metadata.json"
[[ -f "$meta" && -f "$TMP/sft/blend.json" && -f "$TMP/sft/heldout/arithmetic_chat.jsonl" ]] || fail "metadata.json, blend.json or heldout missing"
[[ $(wc -l <"$TMP/sft/heldout/arithmetic_chat.jsonl") -eq 200 ]] || fail "heldout: expected 200 prompts"
grep -q '"type": "SFTDataArtifact"' "$meta" || fail "metadata.json: not an SFTDataArtifact"
grep -q '"used_in_filter": [1-9]' "$meta" || fail "metadata.json: no used_in_filter drop count"
eff=$(json_number "$meta" packing_efficiency)
awk -v e="$eff" 'BEGIN { exit !(e >= 95) }' || fail "packing efficiency $eff% < 95%"
for split in train valid test; do
  n=$(find "$TMP/sft/splits/$split" -name '*.parquet' -type l | wc -l)
  [[ $n -ge 1 ]] || fail "splits/$split: no shard links"
  for f in "$TMP/sft/splits/$split"/*.parquet; do
    [[ -f "$f" ]] || fail "splits/$split: $(basename "$f") does not resolve"
    head -c 4 "$f" | grep -q PAR1 || fail "$f: not a Parquet file"
  done
done
[[ $(find "$TMP/sft/splits/train" -name '*.parquet' | wc -l) -eq 6 ]] || fail "splits/train: expected 6 of 8 shards"
grep -q '"train": \[' "$TMP/sft/blend.json" || fail "blend.json: no train list"
echo "ok: outputs of the tiny recipe"

# --- skip if up to date, refuse another output, --force, --sample --------------------------------
stamp=$(stat -c %Y "$meta")
expect_ok "second run is up to date" '^up to date: .*nothing to do \(--force rebuilds\)$' "${sft[@]}"
expect_prep_error "another config needs --force" \
  "$TMP/sft: exists and was made from another configuration or inputs; pass --force to overwrite it" "${sft[@]}" pack_size=1024
[[ $(stat -c %Y "$meta") == "$stamp" ]] || fail "the refused run touched metadata.json"
expect_ok "--force rebuilds" 'bins of 1024 tokens' "${sft[@]}" pack_size=1024 --force
grep -q '"pack_size": 1024' "$meta" || fail "--force: metadata.json still has the old pack_size"
expect_ok "--sample" "^wrote $TMP/sft/sample-100: 100 rows" "${sft[@]}" --sample 100
expect_ok "sample=100 (Nemotron's key) is --sample 100" "^up to date: $TMP/sft/sample-100 " "${sft[@]}" sample=100 force=false
expect_ok "--sample output kept by --force" 'bins of 512 tokens' "${sft[@]}" --force
[[ -f "$TMP/sft/sample-100/metadata.json" ]] || fail "--force dropped the sample-100 output"
expect_ok "a sample first, then the full run" "^wrote $TMP/sft2: 4000 rows" \
  bash -c "'$BIN' nano3 data prep sft -c tiny output_dir='$TMP/sft2' tokenizer.model='$tok' --sample 50 >/dev/null 2>&1 && '$BIN' nano3 data prep sft -c tiny output_dir='$TMP/sft2' tokenizer.model='$tok'"
[[ -z "$(find "$TMP" -maxdepth 2 \( -name '*.tmp-*' -o -name '*.old-*' \))" ]] || fail "a temporary directory was left behind"

# --- one prep at a time per output_dir (a held <output_dir>.lock: here flock(1) holds it) ----------
flock "$TMP/sft.lock" sleep 60 >/dev/null 2>&1 &
holder=$!
for _ in $(seq 50); do flock -n "$TMP/sft.lock" true 2>/dev/null || break; sleep 0.1; done
for extra in --force "--sample 10"; do
  expect_prep_error "output_dir in use ($extra)" \
    "output_dir $TMP/sft is in use by another data prep (its details are not written yet; lock $TMP/sft.lock): wait for it to end, or pick another output_dir" \
    "${sft[@]}" $extra
done
[[ -e "$TMP/sft/sample-10" ]] && fail "a refused prep wrote sample-10"
kill $(pgrep -P $holder) $holder 2>/dev/null  # sleep holds the lock, flock waits for it
wait $holder 2>/dev/null
expect_ok "the lock released, the prep runs" '^up to date: ' "${sft[@]}"
[[ -e "$TMP/sft.lock" ]] && fail "the lock file was left behind"

# --- bad rows are dropped and counted ------------------------------------------------------------
cat >"$TMP/rows.jsonl" <<'ROWS'
{"messages": [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "The answer is 5."}], "used_in": "nano_v3"}
{"text": "a row without messages", "used_in": "nano_v3"}
{"messages": [{"role": "robot", "content": "beep"}], "used_in": "nano_v3"}
{"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{broken"}}]}], "used_in": "nano_v3"}
ROWS
rows=("$BIN" nano3 data prep sft -c tiny output_dir="$TMP/rows" tokenizer.model="$tok" "sources=[{name: mine, files: $TMP/rows.jsonl}]")
expect_ok "bad rows dropped" '^wrote .*: 4 rows \(3 dropped\), 1 sequences' "${rows[@]}"
for reason in no_messages unknown_role bad_tool_call; do
  grep -q "dropped 1 rows: $reason (first: $TMP/rows.jsonl:" "$TMP/err" || fail "drop reason $reason not reported"
  grep -q "\"$reason\": 1" "$TMP/rows/metadata.json" || fail "metadata.json: no $reason count"
done
echo "ok: drop reasons reported and counted"

# --- chat_template=<file>: nano3.jinja through the Jinja interpreter packs the same bytes --------
expect_ok "chat_template=nano3.jinja" '^wrote .*: 4 rows \(3 dropped\), 1 sequences' "${rows[@]}" output_dir="$TMP/rows_jinja" \
  chat_template="$ROOT/tests/fixtures/jinja/nano3.jinja"
shards() { find "$1" -name '*.parquet' -type f | sort | xargs cat | md5sum; }
[[ "$(shards "$TMP/rows")" == "$(shards "$TMP/rows_jinja")" ]] || fail "nano3.jinja packed other bytes than the built-in nano3"
grep -q "\"chat_template\": \"$ROOT/tests/fixtures/jinja/nano3.jinja\"" "$TMP/rows_jinja/metadata.json" || fail "metadata.json: chat_template is not the file"
printf '{{ messages[0].content }}\n{%% if %%}\n' >"$TMP/broken.jinja"
expect_error "a template with a syntax error" "$tiny: chat_template: $TMP/broken.jinja:2: expected an expression, got end of statement block" \
  "${rows[@]}" output_dir="$TMP/bad" chat_template="$TMP/broken.jinja"
echo "ok: chat_template=<file>"

# --- Parquet chat rows (Hugging Face's form) pack the same bytes as the same rows in JSONL ----------
pq="$ROOT/tests/fixtures/parquet"
pqrows() { "$BIN" nano3 data prep sft -c tiny output_dir="$TMP/$1" tokenizer.model="$tok" "sources=[{name: mine, files: $2}]" "${@:3}"; }
expect_ok "chat rows as JSONL" '^wrote .*: 206 rows \(3 dropped\), 203 sequences' pqrows pq_jsonl "$pq/chat_rows.jsonl"
for v in default zstd_v2_plain small_pages; do
  expect_ok "chat rows as Parquet ($v)" '^wrote .*: 206 rows \(3 dropped\), 203 sequences' pqrows "pq_$v" "$pq/chat_$v.parquet"
  [[ "$(shards "$TMP/pq_jsonl")" == "$(shards "$TMP/pq_$v")" ]] || fail "chat_$v.parquet packed other bytes than chat_rows.jsonl"
  grep -q "dropped 1 rows: no_messages (first: $pq/chat_$v.parquet: row 4: no \"messages\")" "$TMP/err" ||
    fail "chat_$v.parquet: a dropped row is not named by file and row"
done
# Sequences cut before their answer train nothing: said on the log, not only in metadata.json.
expect_ok "pack_size cutting every answer" '^wrote .*: 206 rows \(3 dropped\), 203 sequences, [0-9]+ tokens \(0 trained\)' \
  pqrows pq_cut "$pq/chat_rows.jsonl" pack_size=16
grep -qx "warning: 203 sequences cut by max_doc_tokens (0) or pack_size (16) lost every trained token and train nothing (first: $pq/chat_rows.jsonl:1); raise the limit to keep their answers" "$TMP/err" ||
  fail "no warning for sequences cut to no trained token: $(cat "$TMP/err")"
grep -q '"sequences_truncated_to_no_trained_tokens": 203' "$TMP/pq_cut/metadata.json" || fail "metadata.json: no count of sequences cut to no trained token"
mkdir -p "$TMP/pqdir" && cp "$pq/chat_default.parquet" "$TMP/pqdir/" && cp "$pq/chat_rows.jsonl" "$TMP/pqdir/"
expect_ok "a folder of .jsonl and .parquet files" '^wrote .*: 412 rows \(6 dropped\), 406 sequences' pqrows pq_dir "$TMP/pqdir"
head -c 5000 "$pq/chat_default.parquet" >"$TMP/cut.parquet"
expect_prep_error "a truncated Parquet file" \
  "$TMP/cut.parquet: invalid Parquet file: does not end with the Parquet magic 'PAR1' (truncated, or encrypted 'PARE')" pqrows pq_bad "$TMP/cut.parquet"
[[ -e "$TMP/pq_bad" ]] && fail "truncated Parquet: output written"
echo "ok: Parquet chat rows"

# --- bad input: one error line, exit 2, nothing written -------------------------------------------
expect_prep_error "a row past max_row_bytes" \
  "$TMP/rows.jsonl:1: the row is longer than max_row_bytes = 100 bytes (raise max_row_bytes for longer rows)" \
  "$BIN" nano3 data prep sft -c tiny output_dir="$TMP/bad" tokenizer.model="$tok" "sources=[{name: mine, files: $TMP/rows.jsonl}]" max_row_bytes=100
[[ -e "$TMP/bad" ]] && fail "a row past max_row_bytes: output written"
echo '{"messages": [' >>"$TMP/rows.jsonl"
expect_prep_error "invalid JSONL line" "$TMP/rows.jsonl:5: invalid JSON at column 15: syntax error while parsing value - unexpected end of input; expected '[', '{', or a literal" \
  "$BIN" nano3 data prep sft -c tiny output_dir="$TMP/bad" tokenizer.model="$tok" "sources=[{name: mine, files: $TMP/rows.jsonl}]"
[[ -e "$TMP/bad" ]] && fail "invalid JSONL: output written"
[[ -z "$(find "$TMP" -maxdepth 1 -name 'bad.tmp-*')" ]] || fail "invalid JSONL: temporary directory left"
expect_error "missing input file" "$tiny: sources[0].files: $TMP/none.jsonl: no such file or directory" \
  "$BIN" nano3 data prep sft -c tiny output_dir="$TMP/bad" tokenizer.model="$tok" "sources=[{files: $TMP/none.jsonl}]"
expect_error "unknown chat template" "$tiny: chat_template: chat template \"chatml\": not a built-in (nano3, nemotron-h, nano-v2) and no such file or directory" \
  "${sft[@]}" chat_template=chatml
expect_error "unknown key" "$tiny: pack_sise: unknown key (did you mean \"pack_size\"?)" "${sft[@]}" pack_sise=512
expect_error "bad value" "$tiny: pack_size: expected a positive integer, got 0" "${sft[@]}" pack_size=0
mkdir -p "$TMP/empty"
expect_error "no tokenizer yet" "$ROOT/$tiny: tokenizer.model: runs/nano3/tiny/data/pretrain/tokenizer/tokenizer.json: no such tokenizer.json (the tiny recipe takes the one \`data prep pretrain -c tiny\` writes; run that first)" \
  bash -c "cd '$TMP/empty' && '$BIN' nano3 data prep sft -c tiny"
[[ -z "$(ls -A "$TMP/empty")" ]] || fail "failed runs wrote files: $(ls -A "$TMP/empty")"

finish "sft data prep checks"
