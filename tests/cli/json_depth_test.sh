#!/usr/bin/env bash
# JSON nested 100,000 levels deep (~200 KB; it used to overflow the stack: exit 139) is refused
# with the file, line, column and the depth limit wherever it comes in: a `model info -c` config,
# a `data prep sft` and a `data prep rl` JSONL row (exit 2, one error line, nothing written), tool
# call arguments inside an SFT row (the row dropped as bad_tool_call), and a `serve` request body,
# as a whole or in `stop`/`messages` (400 with OpenAI's error body; /health and a completion still
# answer afterwards). A value under the limit but large is quoted in at most ~80 characters.
# Usage: json_depth_test.sh path/to/nemotron
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
source "$ROOT/tests/cli/serve_lib.sh"

# expect_prep_error NAME MESSAGE CMD...: exit 2 and the last line of stderr is "error: MESSAGE".
expect_prep_error() {
  local name=$1 message=$2
  shift 2
  "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [[ $rc -ne 2 ]]; then fail "$name: exit $rc, expected 2 (stderr: $(tail -c 300 "$TMP/err"))"; return; fi
  local got
  got=$(tail -n 1 "$TMP/err")
  [[ "$got" == "error: $message" ]] || { fail "$name: last stderr line was [$got], expected [error: $message]"; return; }
  echo "ok: $name"
}

deep() { python3 -c "import sys; n = int(sys.argv[1]); print('[' * n + ']' * n, end='')" "$1"; }
limit_msg="arrays and objects nested deeper than 256 levels"

# --- a config file -------------------------------------------------------------------------------
{ printf '{\n  "model": '; deep 100000; printf '\n}\n'; } >"$TMP/deep.json"
# line 2 is `  "model": ` (11 bytes), then the arrays: the object is level 1, the 256th `[` level 257
expect_error "model info -c: 100,000 nested arrays" \
  "$TMP/deep.json: JSON parse error at line 2, column 267: $limit_msg" "$BIN" model info -c "$TMP/deep.json"

# --- JSONL rows: data prep sft and rl ----------------------------------------------------------
good='{"messages": [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "5"}]}'
{ echo "$good"; printf '{"messages": '; deep 100000; printf '}\n'; } >"$TMP/deep.jsonl"
tok=tests/fixtures/hf/dense/tokenizer.json
expect_prep_error "data prep sft: a row 100,000 deep" "$TMP/deep.jsonl:2: invalid JSON at column 269: $limit_msg" \
  "$BIN" nano3 data prep sft -c tiny output_dir="$TMP/sft" tokenizer.model="$tok" "sources=[{name: mine, files: $TMP/deep.jsonl}]"
[[ -e "$TMP/sft" ]] && fail "data prep sft: output written"
expect_prep_error "data prep rl: a row 100,000 deep" "$TMP/deep.jsonl:2: invalid JSON at column 269: $limit_msg" \
  "$BIN" nano3 data prep rl -c tiny output_dir="$TMP/rl" "sources=[{name: mine, files: $TMP/deep.jsonl}]"
[[ -e "$TMP/rl" ]] && fail "data prep rl: output written"

# Tool-call arguments are JSON inside a JSON string: parsed with the same bound, the row dropped.
python3 - "$TMP/args.jsonl" <<'PY'
import json, sys
good = {"messages": [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "5"}], "used_in": "nano_v3"}
bad = {"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "", "tool_calls": [
    {"type": "function", "function": {"name": "f", "arguments": "[" * 100000 + "]" * 100000}}]}], "used_in": "nano_v3"}
open(sys.argv[1], "w").write(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
PY
expect_ok "data prep sft: tool-call arguments 100,000 deep drop the row" '^wrote .*: 2 rows \(1 dropped\)' \
  "$BIN" nano3 data prep sft -c tiny output_dir="$TMP/args" tokenizer.model="$tok" "sources=[{name: mine, files: $TMP/args.jsonl}]"
grep -q "dropped 1 rows: bad_tool_call (first: $TMP/args.jsonl:2: message 1: tool call 0: arguments are not valid JSON (line 1, column 257: $limit_msg))" "$TMP/err" ||
  fail "tool-call arguments: no bad_tool_call drop naming the limit: $(grep dropped "$TMP/err")"

# --- serve: deep request bodies get 400, the server answers afterwards --------------------------
start_server --checkpoint tests/fixtures/hf/dense --served-model-name tiny --max-seq-len 256 --max-slots 2 || finish "json depth checks"
post() {  # post PATH FILE: the status in $TMP/status, the body in $TMP/body
  curl -s -o "$TMP/body" -w '%{http_code}' -X POST "$URL$1" -H 'Content-Type: application/json' \
    --data-binary "@$2" >"$TMP/status" 2>/dev/null
}
check_400() {  # check_400 NAME MESSAGE_REGEX
  python3 - "$TMP/status" "$TMP/body" "$2" <<'PY' 2>"$TMP/py" && echo "ok: $1" || fail "$1: $(tail -1 "$TMP/py"): HTTP $(cat "$TMP/status") $(head -c 300 "$TMP/body")"
import json, re, sys
assert open(sys.argv[1]).read() == "400", "status"
e = json.load(open(sys.argv[2]))["error"]
assert set(e) == {"message", "type", "param", "code"} and e["type"] == "invalid_request_error", e
assert re.search(sys.argv[3], e["message"]), e["message"]
assert len(e["message"]) < 300, len(e["message"])
PY
}
{ printf '{"model": "tiny", "prompt": "x", "max_tokens": 2, "stop": '; deep 100000; printf '}'; } >"$TMP/stop.json"
post /v1/completions "$TMP/stop.json"
check_400 "serve: stop 100,000 deep: 400" "^malformed JSON body: parse error at line 1, column [0-9]+: $limit_msg\$"
kill -0 $SERVER_PID 2>/dev/null || fail "serve: the server died on a deep stop"
deep 100000 >"$TMP/body.json"
post /v1/chat/completions "$TMP/body.json"
check_400 "serve: a body 100,000 deep: 400" "^malformed JSON body: parse error at line 1, column 257: $limit_msg\$"
{ printf '{"model": "tiny", "messages": [{"role": "user", "content": '; deep 100000; printf '}]}'; } >"$TMP/msg.json"
post /v1/chat/completions "$TMP/msg.json"
check_400 "serve: message content 100,000 deep: 400" "$limit_msg"
# Under the limit but wide: the error quotes a short excerpt, not the whole value.
python3 -c "import json; print(json.dumps({'model': 'tiny', 'prompt': 'x', 'stop': [[['y' * 20000] * 10] * 10]}))" >"$TMP/wide.json"
post /v1/completions "$TMP/wide.json"
check_400 "serve: a 2 MB stop is quoted in a few characters" "^'stop': expected a string or an array of strings, got array \[\[\[\"yyy"
curl -sf "$URL/health" >"$TMP/health" 2>/dev/null && grep -q '"ok"' "$TMP/health" && echo "ok: serve: /health answers afterwards" ||
  fail "serve: /health after the deep requests"
curl -s -o "$TMP/body" -w '%{http_code}' "$URL/v1/completions" -H 'Content-Type: application/json' \
  --data-binary '{"model": "tiny", "prompt": "Hello", "max_tokens": 3, "ignore_eos": true}' >"$TMP/status" 2>/dev/null
[[ "$(cat "$TMP/status")" == 200 ]] && grep -q '"completion_tokens":3' "$TMP/body" && echo "ok: serve: a completion afterwards" ||
  fail "serve: completion after the deep requests: HTTP $(cat "$TMP/status") $(head -c 300 "$TMP/body")"
stop_server TERM
[[ $SERVER_RC -eq 143 ]] || fail "serve: exit $SERVER_RC after SIGTERM, expected 143"

finish "json depth checks"
