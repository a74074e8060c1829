#!/usr/bin/env bash
# `nemotron serve` as clients use it, on the Hugging Face fixture (its own tokenizer.json), on a free
# 127.0.0.1 port: /v1/health, /v1/models, /v1/completions (a list of prompts, n, logprobs, echo with
# max_tokens 0 for the prompt's log-probs, a seed that reproduces, streaming), /v1/chat/completions
# (usage, streaming SSE chunks ending in [DONE], include_usage); bad requests (malformed JSON, a
# wrong type, an unknown model or route, a prompt longer than the context) answer OpenAI's JSON error
# with 400/404 and the server keeps serving; a client that disconnects mid-stream has its request
# cancelled in the engine while another request completes; SIGTERM stops the server (exit 143).
# Also: /tokenize and /detokenize round trips (a prompt, chat messages counted as chat counts them),
# logit_bias forcing a token, refused fields and roles (400 naming the field), echoed non-ASCII
# tokens in OpenAI's bytes: form, X-Request-Id, /metrics counters rising after requests, the
# warning for a --max-seq-len past max_position_embeddings, SIGTERM's message, and a shutdown
# mid-generation answering 503 (a stream: an error event) rather than a finish_reason.
# Usage: serve_test.sh path/to/nemotron
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
source "$ROOT/tests/cli/serve_lib.sh"

expect_error "no checkpoint" "/nonexistent: no such checkpoint directory" "$BIN" serve --checkpoint /nonexistent
expect_error "bad port" "--port: expected 0..65535, got 70000" "$BIN" serve --checkpoint tests/fixtures/hf/dense --port 70000
expect_usage_error "negative --scheduler-delay-factor" "scheduler-delay-factor" "$BIN" serve \
  --checkpoint tests/fixtures/hf/dense --scheduler-delay-factor -1

start_server --checkpoint tests/fixtures/hf/dense --served-model-name tiny --max-seq-len 1024 --max-slots 4 || {
  finish "serve checks"
}
grep -Eq '^serving "tiny" at http://127\.0\.0\.1:[0-9]+/v1 ' "$TMP/server.log" && echo "ok: start line" ||
  fail "start line: $(head -3 "$TMP/server.log")"
grep -q '^warning: --max-seq-len 1024 exceeds the model.s max_position_embeddings 64' "$TMP/server.log" &&
  echo "ok: --max-seq-len past max_position_embeddings warns" || fail "no max-seq-len warning: $(head -3 "$TMP/server.log")"

# api METHOD PATH [BODY]: the status in $TMP/status, the body in $TMP/body.
api() {
  local args=(-s -o "$TMP/body" -w '%{http_code}' -X "$1" "$URL$2")
  [[ $# -ge 3 ]] && args+=(-H 'Content-Type: application/json' --data-binary "$3")
  curl "${args[@]}" >"$TMP/status" 2>/dev/null
}
# check NAME STATUS PYTHON: the status matches and the Python assertion holds for `b` (the body as JSON).
check() {
  local name=$1 status=$2 code=$3
  [[ "$(cat "$TMP/status")" == "$status" ]] || { fail "$name: HTTP $(cat "$TMP/status"), expected $status: $(head -c 400 "$TMP/body")"; return; }
  python3 -c "import json,sys,math; b=json.load(open(sys.argv[1])); $code" "$TMP/body" 2>"$TMP/py" ||
    { fail "$name: $(tail -1 "$TMP/py"): $(head -c 600 "$TMP/body")"; return; }
  echo "ok: $name"
}

expect_error "a port in use" \
  "--host 127.0.0.1 --port $PORT: cannot bind (address in use, or not an address of this machine)" \
  "$BIN" serve --checkpoint tests/fixtures/hf/dense --port "$PORT"

api GET /v1/health
check "health" 200 'assert b == {"status": "ok"}'
curl -s "$URL/metrics" >"$TMP/metrics0" 2>/dev/null
api GET /v1/models
check "models" 200 'assert b["object"] == "list" and b["data"][0]["id"] == "tiny" and b["data"][0]["max_model_len"] == 1024'

api POST /v1/completions '{"model": "tiny", "prompt": ["Hello world", "2+2="], "max_tokens": 5, "n": 2, "temperature": 0.8, "seed": 7, "ignore_eos": true}'
check "completions: 2 prompts x n=2" 200 '
assert b["object"] == "text_completion" and b["model"] == "tiny"
c = b["choices"]; assert [x["index"] for x in c] == [0, 1, 2, 3], c
assert all(x["finish_reason"] == "length" and isinstance(x["text"], str) and x["logprobs"] is None for x in c)
u = b["usage"]; assert u["completion_tokens"] == 20 and u["total_tokens"] == u["prompt_tokens"] + 20, u'
cp "$TMP/body" "$TMP/seeded1"
api POST /v1/completions '{"model": "tiny", "prompt": ["Hello world", "2+2="], "max_tokens": 5, "n": 2, "temperature": 0.8, "seed": 7, "ignore_eos": true}'
python3 -c "import json,sys; a,b=[[c['text'] for c in json.load(open(f))['choices']] for f in sys.argv[1:]]; assert a == b" \
  "$TMP/seeded1" "$TMP/body" && echo "ok: a seed reproduces the completions" || fail "seeded completions differ"

api POST /v1/completions '{"model": "tiny", "prompt": "The answer is", "max_tokens": 4, "logprobs": 3, "temperature": 0, "ignore_eos": true}'
check "completions: logprobs 3" 200 '
lp = b["choices"][0]["logprobs"]
assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == len(lp["text_offset"]) == 4, lp
assert all(x <= 0 for x in lp["token_logprobs"])
assert all(1 <= len(t) <= 3 for t in lp["top_logprobs"])
# greedy: each chosen token is the most likely one
assert all(abs(max(t.values()) - x) < 1e-5 for t, x in zip(lp["top_logprobs"], lp["token_logprobs"])), lp
assert lp["text_offset"][0] == len("The answer is")'
cp "$TMP/body" "$TMP/greedy"

# lm-eval's log-likelihood request: echo the prompt with max_tokens 0: its token log-probs, the first null.
api POST /v1/completions '{"model": "tiny", "prompt": "The answer is 4", "max_tokens": 0, "echo": true, "logprobs": 1}'
check "completions: echo + max_tokens 0" 200 '
c = b["choices"][0]; lp = c["logprobs"]
assert c["text"] == "The answer is 4", c["text"]
assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
assert len(lp["tokens"]) >= 3 and all(x < 0 for x in lp["token_logprobs"][1:]), lp
assert b["usage"]["completion_tokens"] == 0 and b["usage"]["prompt_tokens"] == len(lp["tokens"])
assert lp["text_offset"][0] == 0'
cp "$TMP/body" "$TMP/echo"
# The echoed prompt's log-probs agree with generation's: scoring the token ids [5, 9, 13] gives at
# its last position the same most likely token and log-prob as generating one token after [5, 9].
api POST /v1/completions '{"prompt": [5, 9], "max_tokens": 1, "temperature": 0, "logprobs": 1, "ignore_eos": true}'
cp "$TMP/body" "$TMP/next"
api POST /v1/completions '{"prompt": [5, 9, 13], "max_tokens": 0, "echo": true, "logprobs": 1}'
check "echo scores a prompt as generation does" 200 '
g = json.load(open(sys.argv[1].replace("body", "next")))["choices"][0]["logprobs"]["top_logprobs"][0]
e = b["choices"][0]["logprobs"]["top_logprobs"][2]
assert g.keys() == e.keys() and all(abs(g[k] - e[k]) < 1e-4 for k in g), (g, e)'

api POST /v1/chat/completions '{"model": "tiny", "messages": [{"role": "user", "content": "What is 2+2?"}], "max_tokens": 6, "chat_template_kwargs": {"enable_thinking": false}}'
check "chat" 200 '
assert b["object"] == "chat.completion"
m = b["choices"][0]["message"]; assert m["role"] == "assistant" and isinstance(m["content"], str)
assert b["choices"][0]["finish_reason"] in ("stop", "length")
assert 1 <= b["usage"]["completion_tokens"] <= 6 and b["usage"]["prompt_tokens"] > 5'

cp "$TMP/body" "$TMP/chat"

# --- /tokenize and /detokenize ---------------------------------------------------------------------
api POST /tokenize '{"model": "tiny", "prompt": "Hello wörld 東京"}'
check "tokenize a prompt" 200 'assert b["count"] == len(b["tokens"]) > 3 and b["max_model_len"] == 1024 and b["token_strs"] is None'
ids=$(python3 -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1]))['tokens']))" "$TMP/body")
api POST /detokenize "{\"model\": \"tiny\", \"tokens\": $ids}"
check "detokenize gives the prompt back" 200 'assert b == {"prompt": "Hello wörld 東京"}, b'
api POST /v1/tokenize '{"messages": [{"role": "user", "content": "What is 2+2?"}], "chat_template_kwargs": {"enable_thinking": false}}'
check "tokenize chat messages as chat counts them" 200 '
assert b["count"] == json.load(open(sys.argv[1].replace("body", "chat")))["usage"]["prompt_tokens"], b["count"]'
api POST /detokenize '{"tokens": [99999]}'
check "detokenize: an id past the vocabulary is a 400" 400 'assert b["error"]["param"] == "tokens"'

# --- logit_bias: +100 makes token 5 every greedy choice ---------------------------------------------
api POST /v1/completions '{"model": "tiny", "prompt": "The answer is", "max_tokens": 4, "temperature": 0, "ignore_eos": true, "logit_bias": {"5": 100}}'
cp "$TMP/body" "$TMP/biased"
api POST /detokenize '{"tokens": [5, 5, 5, 5]}'
check "logit_bias forces the token" 200 '
assert json.load(open(sys.argv[1].replace("body", "biased")))["choices"][0]["text"] == b["prompt"]'

# --- echoed non-ASCII tokens join back to the prompt (OpenAI's bytes: form) -------------------------
api POST /v1/completions '{"model": "tiny", "prompt": "héllo 東京 🙂", "max_tokens": 0, "echo": true, "logprobs": 0}'
check "echo: partial characters as bytes:" 200 '
toks = b["choices"][0]["logprobs"]["tokens"]
raw = b"".join(bytes(int(t[i + 2:i + 4], 16) for i in range(6, len(t), 4)) if t.startswith("bytes:") else t.encode() for t in toks)
assert raw.decode() == "héllo 東京 🙂", toks
assert any(t.startswith("bytes:\\x") for t in toks), toks'

# --- X-Request-Id: the client's echoed, else one made ------------------------------------------------
curl -s -D "$TMP/headers" -o /dev/null -H 'X-Request-Id: my-trace-42' "$URL/v1/models"
grep -qi '^x-request-id: my-trace-42' "$TMP/headers" && echo "ok: X-Request-Id echoed" || fail "X-Request-Id: $(cat "$TMP/headers")"
curl -s -D "$TMP/headers" -o /dev/null "$URL/v1/nothing"
grep -qi '^x-request-id: req-' "$TMP/headers" && echo "ok: X-Request-Id made when absent (a 404 too)" ||
  fail "no X-Request-Id made: $(cat "$TMP/headers")"

# Streaming chat: SSE chunks, the role first, the finish reason last, usage, then [DONE].
curl -sN "$URL/v1/chat/completions" -H 'Content-Type: application/json' --data-binary \
  '{"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, "stream": true, "ignore_eos": true, "stream_options": {"include_usage": true}}' \
  >"$TMP/stream" 2>/dev/null
python3 - "$TMP/stream" <<'PY' && echo "ok: streaming chat" || fail "streaming chat: $(head -c 800 "$TMP/stream")"
import json, sys
events = [l[6:] for l in open(sys.argv[1]).read().split("\n") if l.startswith("data: ")]
assert events[-1] == "[DONE]", events[-3:]
chunks = [json.loads(e) for e in events[:-1]]
assert all(c["object"] == "chat.completion.chunk" for c in chunks)
assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
assert chunks[-2]["choices"][0]["finish_reason"] == "length"
assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 8
assert len(chunks) >= 4
PY
curl -sN "$URL/v1/completions" -H 'Content-Type: application/json' --data-binary \
  '{"model": "tiny", "prompt": "The answer is", "max_tokens": 4, "temperature": 0, "stream": true, "ignore_eos": true}' \
  >"$TMP/stream" 2>/dev/null
python3 - "$TMP/stream" "$TMP/greedy" <<'PY' && echo "ok: streaming completion = the non-streamed text" || fail "streaming completion: $(head -c 800 "$TMP/stream")"
import json, sys
events = [l[6:] for l in open(sys.argv[1]).read().split("\n") if l.startswith("data: ")]
assert events[-1] == "[DONE]"
text = "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1])
assert text == json.load(open(sys.argv[2]))["choices"][0]["text"], text
PY

# --- bad requests: OpenAI's error body, and the server goes on -----------------------------------
error_is() {  # error_is NAME STATUS TYPE PARAM_OR_None MESSAGE_REGEX
  check "$1" "$2" "e = b[\"error\"]; import re
assert set(e) == {\"message\", \"type\", \"param\", \"code\"} and e[\"type\"] == \"$3\" and e[\"param\"] == $4, e
assert re.search(r'''$5''', e[\"message\"]), e[\"message\"]"
}
api POST /v1/completions '{"model": "tiny", "prompt": "x", "max_tokens": 3'
error_is "malformed JSON: 400" 400 invalid_request_error None '^malformed JSON body: parse error'
api POST /v1/completions '{"model": "tiny", "prompt": "x", "temperature": "hot"}'
error_is "temperature as a string: 400" 400 invalid_request_error '"temperature"' "'temperature': expected a number"
api POST /v1/completions '{"model": "tiny", "prompt": "x", "max_tokens": -1}'
error_is "negative max_tokens: 400" 400 invalid_request_error '"max_tokens"' "expected an integer in"
api POST /v1/chat/completions '{"model": "tiny", "messages": []}'
error_is "empty messages: 400" 400 invalid_request_error '"messages"' "non-empty array"
api POST /v1/completions '{"model": "gpt-4", "prompt": "x"}'
error_is "unknown model: 404" 404 invalid_request_error '"model"' "The model 'gpt-4' does not exist"
[[ "$(python3 -c "import json; print(json.load(open('$TMP/body'))['error']['code'])")" == model_not_found ]] ||
  fail "unknown model: code is not model_not_found"
api POST /v1/completions '{"model": "tiny", "prompt": "x", "suffix": "y"}'
error_is "suffix: 400" 400 invalid_request_error '"suffix"' "'suffix' is not supported"
api POST /v1/completions '{"model": "tiny", "prompt": "x", "best_of": 3}'
error_is "best_of: 400" 400 invalid_request_error '"best_of"' "'best_of' is not supported unless it equals n"
api POST /v1/chat/completions '{"model": "tiny", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}}'
error_is "response_format: 400" 400 invalid_request_error '"response_format"' "'response_format': only"
api POST /v1/chat/completions '{"model": "tiny", "messages": [{"role": "wizard", "content": "x"}]}'
error_is "an unknown role: 400" 400 invalid_request_error '"messages"' 'unknown role "wizard"'
api POST /v1/chat/completions '{"model": "tiny", "messages": [{"role": "user", "content": 42}]}'
error_is "integer content: 400" 400 invalid_request_error '"messages"' "content must be a string or null, got number"
api POST /v1/chat/completions '{"model": "tiny", "messages": [{"role": "user", "content": "x"}], "presence_penalty": 3}'
error_is "presence_penalty out of range: 400" 400 invalid_request_error '"presence_penalty"' "expected a number in"
api GET /v1/nothing
error_is "unknown route: 404" 404 invalid_request_error None '^no route GET /v1/nothing'
long=$(python3 -c "print(' '.join(['word'] * 1100))")
api POST /v1/completions "{\"model\": \"tiny\", \"prompt\": \"$long\", \"max_tokens\": 10}"
error_is "prompt longer than the context: 400" 400 invalid_request_error '"prompt"' "maximum context length is 1024 tokens"
api POST /v1/completions '{"model": "tiny", "prompt": "x", "max_tokens": 1100}'
error_is "max_tokens past the context: 400" 400 invalid_request_error '"prompt"' "maximum context length is 1024 tokens"
api GET /v1/health
check "still serving after the bad requests" 200 'assert b["status"] == "ok"'

# --- a client that goes away mid-stream -------------------------------------------------------------
# It reads two events and closes; its request (1000 tokens asked: the engine must not finish them
# before a loaded machine's HTTP thread sees the client leave) is cancelled in the engine while a
# request sent beside it completes in full.
python3 - "$PORT" >"$TMP/disconnect" 2>&1 <<'PY' &
import json, socket, sys
body = json.dumps({"model": "tiny", "prompt": "Once upon a time", "max_tokens": 1000, "stream": True, "ignore_eos": True})
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
           % (len(body), body)).encode())
got = b""
while got.count(b"data: ") < 2:
    got += s.recv(4096)
s.close()
print("closed after", got.count(b"data: "), "events")
PY
dpid=$!
api POST /v1/completions '{"model": "tiny", "prompt": "Beside it", "max_tokens": 40, "ignore_eos": true}'
check "a request beside the disconnecting one completes" 200 'assert b["usage"]["completion_tokens"] == 40'
wait $dpid
grep -q '^closed after' "$TMP/disconnect" || fail "disconnect client: $(cat "$TMP/disconnect")"
sleep 0.5
api GET /v1/health
check "still serving after the disconnect" 200 'assert b["status"] == "ok"'

# --- /metrics: Prometheus text; counters rose with the requests above ---------------------------------
curl -s "$URL/metrics" >"$TMP/metrics1" 2>/dev/null
python3 - "$TMP/metrics0" "$TMP/metrics1" <<'PY' && echo "ok: /metrics counters rose" || fail "/metrics: $(head -c 600 "$TMP/metrics1")"
import re, sys
def parse(path):
    v, typed = {}, set()
    for line in open(path).read().splitlines():
        m = re.fullmatch(r"# TYPE (\w+) (counter|gauge|histogram)", line)
        if m: typed.add(m[1]); continue
        if line.startswith("# HELP "): continue
        m = re.fullmatch(r"(\w+)(\{\w+=\"[^\"]*\"\})? (\S+)", line)
        assert m, "not a Prometheus line: " + line
        assert re.sub(r"_(bucket|sum|count)$", "", m[1]) in typed or m[1] in typed, "untyped: " + line
        v[m[1] + (m[2] or "")] = float(m[3])
    return v
a, b = parse(sys.argv[1]), parse(sys.argv[2])
assert b['nemotron_requests_total{status="200"}'] > a.get('nemotron_requests_total{status="200"}', 0) + 10, b
assert b['nemotron_requests_total{status="400"}'] >= 5, b
assert b["nemotron_generation_tokens_total"] > a["nemotron_generation_tokens_total"] + 40, (a, b)
assert b["nemotron_prompt_tokens_total"] > a["nemotron_prompt_tokens_total"]
assert b["nemotron_time_to_first_token_seconds_count"] > a["nemotron_time_to_first_token_seconds_count"]
assert b['nemotron_time_to_first_token_seconds_bucket{le="+Inf"}'] == b["nemotron_time_to_first_token_seconds_count"]
assert b["nemotron_inter_token_latency_seconds_count"] > 10
assert b["nemotron_batch_slots"] == 4 and b["nemotron_requests_running"] == 0 and b["nemotron_requests_waiting"] == 0
assert b["nemotron_decode_state_bytes"] > 0 and b["nemotron_decode_state_bytes_in_use"] == 0, b
PY

# --- the access log, then SIGTERM -------------------------------------------------------------------
grep -Eq '^POST /v1/completions 200 20 tokens [0-9.]+ s$' "$TMP/server.log" && echo "ok: access log line" ||
  fail "access log: $(grep -m3 '^POST' "$TMP/server.log")"
grep -Eq '^POST /v1/completions 400 0 tokens' "$TMP/server.log" || fail "access log: no 400 line"
# The disconnected stream is logged with the tokens it had when it was cancelled: fewer than 1000.
line=$(grep -E '^POST /v1/completions 200 [0-9]+ tokens' "$TMP/server.log" | awk '$4 != 20 && $4 != 40 && $4 != 4 && $4 != 0')
stop_server TERM
[[ $SERVER_RC -eq 143 ]] && echo "ok: SIGTERM stops the server (exit 143)" || fail "SIGTERM: exit $SERVER_RC: $(tail -3 "$TMP/server.log")"
grep -q '^received SIGTERM: stopping the server' "$TMP/server.log" && echo "ok: SIGTERM's message speaks of the server" ||
  fail "SIGTERM message: $(grep -m1 received "$TMP/server.log")"
grep -Eq '^stopped by SIGTERM: served [0-9]+ requests \(([1-9][0-9]*) cancelled\)' "$TMP/server.log" &&
  echo "ok: the disconnected request was cancelled in the engine" ||
  fail "no cancelled request in: $(grep '^stopped' "$TMP/server.log") (stream lines: $line)"

# --- a shutdown mid-generation: 503, never a finish_reason outside OpenAI's set ---------------------
# A context long enough that 3000 tokens take seconds; SIGTERM once the stream has begun.
start_server --checkpoint tests/fixtures/hf/dense --max-seq-len 4096 || finish "serve checks"
curl -sN "$URL/v1/completions" -H 'Content-Type: application/json' --data-binary \
  '{"prompt": "Once", "max_tokens": 3000, "stream": true, "ignore_eos": true}' >"$TMP/cut_stream" 2>/dev/null &
spid=$!
curl -s -o "$TMP/cut_plain" -w '%{http_code}' "$URL/v1/completions" -H 'Content-Type: application/json' --data-binary \
  '{"prompt": "Once", "max_tokens": 3000, "ignore_eos": true}' >"$TMP/cut_status" 2>/dev/null &
ppid=$!
for ((i = 0; i < 100; ++i)); do grep -q '^data: ' "$TMP/cut_stream" 2>/dev/null && break; sleep 0.05; done
stop_server TERM
wait $spid $ppid
python3 - "$TMP/cut_stream" "$TMP/cut_plain" "$(cat "$TMP/cut_status")" <<'PY' && echo "ok: a shutdown ends requests with 503" ||
import json, sys
events = [json.loads(l[6:]) for l in open(sys.argv[1]).read().split("\n") if l.startswith("data: {")]
assert events[-1]["error"]["code"] == 503 and "shutting down" in events[-1]["error"]["message"], events[-1]
assert all(c["finish_reason"] is None for e in events[:-1] for c in e["choices"]), "a finish_reason before the error"
assert len(events) < 3000, len(events)
assert sys.argv[3] == "503", sys.argv[3]
assert json.load(open(sys.argv[2]))["error"]["message"] == "the server is shutting down"
PY
  fail "shutdown: stream $(tail -c 300 "$TMP/cut_stream"), plain $(cat "$TMP/cut_status") $(cat "$TMP/cut_plain")"

finish "serve checks"
