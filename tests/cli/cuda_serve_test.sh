#!/usr/bin/env bash
# `nemotron serve --device cuda` as a user runs it, on a tiny model pretrained on the CPU (its
# checkpoint carries its tokenizer): the start lines name the GPU and bf16 (CUDA's default) and
# print the KV pages and Mamba states that --max-slots x --max-seq-len cost and the most that fit;
# a temperature-0 completion equals `generate --device cuda` on the same prompt (the same tokens:
# served one at a time the engine runs the same batch of one), streamed too, and with logprobs
# (the host-sampling path) too; 8 concurrent streaming requests each get their 16 tokens
# (continuous batching on the GPU); a cache the GPU cannot hold is refused with exit 2 naming the
# most that fit; SIGTERM stops the server (143). Without a GPU (or a CUDA build) it prints why
# and exits 77 (ctest: skipped). NEMOTRON_TEST_CUDA_DEVICE picks the device (default cuda; cuda:1 on
# a machine with two checks that the engine thread binds the server's device, not the default).
# Usage: cuda_serve_test.sh path/to/nemotron
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
source "$ROOT/tests/cli/serve_lib.sh"
# A bundled binary (outside build/, as on the GPU machine) finds no recipes beside it: name them.
export NEMOTRON_RECIPES=${NEMOTRON_RECIPES:-$ROOT/recipes}
device=${NEMOTRON_TEST_CUDA_DEVICE:-cuda}

# The device opens before the checkpoint is read: this fails fast without a GPU.
probe=$("$BIN" serve --checkpoint "$TMP/none" --device "$device" 2>&1)
if grep -Eq 'CUDA device\(s\) are visible|built without CUDA' <<<"$probe"; then
  echo "skipped: $(tail -1 <<<"$probe")"
  exit 77
fi

expect_ok "data prep pretrain" 'blend: ' "$BIN" super3 data prep pretrain -c tiny output_dir="$TMP/data"
expect_ok "pretrain 20 steps (cpu)" '^ iteration +20/ +20 ' "$BIN" super3 pretrain -c tiny \
  dataset.per_split_data_args_path="$TMP/data/blend.json" train.train_iters=20 train.eval_iters=0 \
  train.eval_interval=0 scheduler.lr_warmup_iters=2 scheduler.lr_wsd_decay_iters=2 checkpoint.save="$TMP/ckpt"

prompt="12 + 7 ="
printf '{"prompt": "%s"}\n' "$prompt" >"$TMP/prompts.jsonl"
expect_ok "generate --device cuda" '^wrote 1 completions' "$BIN" generate --checkpoint "$TMP/ckpt" --device "$device" \
  --input "$TMP/prompts.jsonl" --output "$TMP/generated.jsonl" --temperature 0 --max-new-tokens 16 --ignore-eos \
  --max-slots 1 --max-seq-len 128

start_server --checkpoint "$TMP/ckpt" --device "$device" --max-slots 8 --max-seq-len 128 --served-model-name tiny || finish "cuda serve checks"
grep -Eq '^model: .* bfloat16 on cuda:[0-9]+ \(.*\); 8 slots, context 128 tokens' "$TMP/server.log" &&
  echo "ok: start line names the GPU and bf16" || fail "start line: $(head -3 "$TMP/server.log")"
grep -Eq '^KV pages and Mamba states: .* for --max-slots 8 x --max-seq-len 128 \(.* per slot\); .* may hold them on cuda:[0-9]+ .*; the most that fit: --max-slots [0-9]+ at --max-seq-len 128, or --max-seq-len [0-9]+ at --max-slots 8$' \
  "$TMP/server.log" && echo "ok: memory budget line" || fail "memory line: $(head -4 "$TMP/server.log")"

# The requests, with Python's standard library (the GPU machine may lack curl): each check prints
# "ok: ..." or "FAIL: ...".
python3 - "$URL" "$prompt" "$TMP/generated.jsonl" >"$TMP/checks" 2>&1 <<'EOF'
import json, math, sys, threading, urllib.request
url, prompt, generated = sys.argv[1], sys.argv[2], json.loads(open(sys.argv[3]).readline())

def post(body):
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return r.read().decode()

def events(text):
    return [l[6:] for l in text.split("\n") if l.startswith("data: ")]

def check(name, fn):
    try:
        fn()
        print("ok:", name)
    except Exception as e:  # noqa: BLE001
        print(f"FAIL: {name}: {e!r}")

greedy = {"model": "tiny", "prompt": prompt, "max_tokens": 16, "temperature": 0, "ignore_eos": True}

def same_as_generate():
    b = json.loads(post(greedy))
    assert b["usage"]["completion_tokens"] == 16 == len(generated["tokens"]), (b["usage"], len(generated["tokens"]))
    assert b["choices"][0]["text"] == generated["completion"], (b["choices"][0]["text"], generated["completion"])

def streamed():
    ev = events(post(dict(greedy, stream=True)))
    assert ev[-1] == "[DONE]", ev[-3:]
    text = "".join(c["choices"][0]["text"] for c in map(json.loads, ev[:-1]) if c.get("choices"))
    assert text == generated["completion"], (text, generated["completion"])

def with_logprobs():  # the logits come to the host and the token is drawn there
    c = json.loads(post(dict(greedy, logprobs=1)))["choices"][0]
    assert c["text"] == generated["completion"], (c["text"], generated["completion"])
    lp = c["logprobs"]["token_logprobs"]
    assert len(lp) == 16 and all(math.isfinite(x) and x <= 0 for x in lp), lp

def concurrent():  # continuous batching on the GPU, sampled at temperature 1
    got = [None] * 8
    def one(i):
        body = {"model": "tiny", "prompt": f"{i} + {i} =", "max_tokens": 16, "ignore_eos": True, "seed": i,
                "stream": True, "stream_options": {"include_usage": True}}
        ev = events(post(body))
        got[i] = ev[-1] == "[DONE]" and json.loads(ev[-2])["usage"]["completion_tokens"]
    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert got == [16] * 8, got

def metrics():  # 3 x 16 tokens, then 8 x 16
    text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
    line = [l for l in text.split("\n") if l.startswith("nemotron_generation_tokens_total ")]
    assert line == ["nemotron_generation_tokens_total 176"], line

check("temperature 0 equals generate --device cuda", same_as_generate)
check("streamed chunks join to generate's text", streamed)
check("logprobs (host sampling) gives the same text", with_logprobs)
check("8 concurrent streams of 16 tokens", concurrent)
check("/metrics counts the 176 generated tokens", metrics)
EOF
cat "$TMP/checks"
while read -r line; do [[ "$line" == FAIL:* ]] && fail "${line#FAIL: }"; done <"$TMP/checks"
grep -q '^ok: /metrics' "$TMP/checks" || fail "the request checks did not all run: $(tail -3 "$TMP/checks")"

stop_server TERM
[[ $SERVER_RC -eq 143 ]] && echo "ok: SIGTERM -> 143" || fail "SIGTERM: exit $SERVER_RC"

# A cache the GPU cannot hold: refused before it is allocated, naming the most that fit.
"$BIN" serve --checkpoint "$TMP/ckpt" --device "$device" --max-slots 100000000 --max-seq-len 128 >"$TMP/out" 2>"$TMP/err"
rc=$?
[[ $rc -eq 2 ]] && grep -Eq '^error: --max-slots 100000000 x --max-seq-len 128: the KV pages and Mamba states need .*, but only .* may hold them on cuda:[0-9]+ .*; the most that fit: --max-slots [0-9]+ at --max-seq-len 128' "$TMP/err" &&
  echo "ok: too many slots refused (exit 2) with the most that fit" || fail "too many slots: exit $rc: $(cat "$TMP/err")"

finish "cuda serve checks"
