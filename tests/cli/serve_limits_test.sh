#!/usr/bin/env bash
# `nemotron serve`'s connections and access rules, driven by a plain-socket client
# (serve_limits_client.py) on the Hugging Face fixture:
# - keep-alive: 20 sequential requests on one connection, each answered within 5 ms (TCP_NODELAY;
#   without it every response after the first waited ~40 ms), and 200 on one connection;
# - no CORS headers by default; with --allowed-origins, a preflight and the allowed origin only;
# - the API key from NEMOTRON_API_KEY: 401 without it or with a wrong one, 200 with it, /health open;
# - --max-request-bytes: 413 by Content-Length (curl, asking first, never sends the body) and for
#   a chunked body; a prompt far past what
#   the context holds refused before it is tokenized (the message names its bytes);
# - 80 clients connecting at once all open within 1 s (the listen queue was 5 deep);
# - 80 clients trickling a byte every 0.5 s: /health still answers at once, --max-connections
#   answers 503 past the cap, --read-timeout cuts the tricklers off;
# - bad values of the new flags: exit 2 with one line.
# Usage: serve_limits_test.sh path/to/nemotron
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
source "$ROOT/tests/cli/serve_lib.sh"
client="$ROOT/tests/cli/serve_limits_client.py"

expect_error "--max-connections 0" "--max-connections: expected a positive integer, got 0" \
  "$BIN" serve --checkpoint tests/fixtures/hf/dense --max-connections 0
expect_error "--read-timeout 0" "--read-timeout: expected seconds > 0, got 0" \
  "$BIN" serve --checkpoint tests/fixtures/hf/dense --read-timeout 0

# run_client NAME ARGS...: the client's checks, each line of its output; a failure fails NAME.
run_client() {
  local name=$1
  shift
  if python3 "$client" "$PORT" "$@" >"$TMP/client" 2>&1; then
    cat "$TMP/client"
  else
    cat "$TMP/client"
    fail "$name: $(tail -1 "$TMP/client") (server: $(tail -2 "$TMP/server.log" | tr "\n" " "))"
  fi
}

# --- defaults ------------------------------------------------------------------------------------
start_server --checkpoint tests/fixtures/hf/dense --served-model-name tiny --max-seq-len 256 --max-slots 2 ||
  finish "serve limits checks"
grep -q '^limits: 256 connections, request bodies up to 8388608 bytes, 30 s to send a request, 5 s idle; no API key$' \
  "$TMP/server.log" && echo "ok: the default limits line" || fail "limits line: $(grep '^limits' "$TMP/server.log")"
run_client "keep-alive" keepalive
run_client "no CORS by default" no_cors
stop_server TERM

# --- an API key, a small body limit, CORS, a connection cap, a short read deadline ---------------
export NEMOTRON_API_KEY=sekrit-key
start_server --checkpoint tests/fixtures/hf/dense --served-model-name tiny --max-seq-len 256 --max-slots 2 \
  --max-request-bytes 1000000 --allowed-origins https://ok.example --max-connections 90 --read-timeout 4 ||
  finish "serve limits checks"
unset NEMOTRON_API_KEY
grep -q 'API key required (Authorization: Bearer), CORS for the allowed origins$' "$TMP/server.log" &&
  echo "ok: the key from NEMOTRON_API_KEY" || fail "limits line: $(grep '^limits' "$TMP/server.log")"
grep -q 'sekrit' "$TMP/server.log" && fail "the API key was printed"
run_client "API key" auth sekrit-key
run_client "keep-alive with the key" keepalive sekrit-key
run_client "body limit" limits sekrit-key
python3 -c "print('{\"prompt\": \"' + 'x' * 3000000 + '\"}')" >"$TMP/big.json"
code=$(curl -s -o "$TMP/body" -w '%{http_code} %{size_upload}' "$URL/v1/completions" -H 'Authorization: Bearer sekrit-key' \
  -H 'Content-Type: application/json' --data-binary @"$TMP/big.json" 2>/dev/null)
[[ "$code" == "413 0" ]] && grep -q '"code":"request_too_large"' "$TMP/body" &&
  echo "ok: curl (Expect: 100-continue) is told 413 before it sends the 3 MB body" ||
  fail "curl, a 3 MB body: HTTP/uploaded $code: $(head -c 300 "$TMP/body")"
run_client "CORS" cors sekrit-key
run_client "slow clients" slow 80 90 4
kill -0 $SERVER_PID 2>/dev/null || fail "the server died"
stop_server TERM
[[ $SERVER_RC -eq 143 ]] || fail "exit $SERVER_RC after SIGTERM, expected 143"

finish "serve limits checks"
