#!/usr/bin/env bash
# `nemotron generate` as a user runs it: on the Hugging Face fixture (its own tokenizer.json) and on
# a native checkpoint made here by two tiny pretraining steps (tokenizer given with --tokenizer):
# --prompt, --chat, a JSONL file in and out (completions, tokens, log-probs, finish reasons; the
# same output for any --max-slots at a fixed seed), stop tokens, --logit-bias and the penalties;
# bad input as one `error:` line,
# exit 2, nothing written.
# Usage: generate_test.sh path/to/nemotron
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

HF=tests/fixtures/hf/dense
TOK=$HF/tokenizer.json

# --- a Hugging Face directory, greedy --------------------------------------------------------------
expect_ok "hf prompt, greedy" '^generated 6 tokens for 1 prompts in [0-9.]+ s: [0-9.]+ tokens/s' \
  "$BIN" generate --checkpoint $HF --prompt "Hello world" --temperature 0 --max-new-tokens 6 --ignore-eos
grep -Eq '^finish_reason: length, [0-9]+ prompt tokens, 6 generated$' "$TMP/out" || fail "hf prompt: $(cat "$TMP/out")"
greedy=$(grep -Ev '^(generated|cache:) ' "$TMP/out")  # timings; the cache's size follows --batch
expect_ok "hf prompt, greedy again" '^finish_reason: length' \
  "$BIN" generate --checkpoint $HF --prompt "Hello world" --temperature 0 --max-new-tokens 6 --ignore-eos --batch 3
[[ "$(grep -Ev '^(generated|cache:) ' "$TMP/out")" == "$greedy" ]] || fail "greedy generation is not reproducible"
expect_ok "generate --help names MTP" 'generation never runs them' "$BIN" generate --help

# --- a native checkpoint from two pretraining steps ----------------------------------------------
expect_ok "pretrain 2 steps" '^ iteration +2/ +2 ' "$BIN" super3 pretrain -c tiny dataset.mock=true \
  dataset.seq_length=32 train.global_batch_size=2 train.micro_batch_size=2 train.train_iters=2 train.eval_iters=0 \
  train.eval_interval=0 scheduler.lr_warmup_iters=1 scheduler.lr_wsd_decay_iters=0 checkpoint.save="$TMP/ck"
expect_ok "native chat" '^finish_reason: (length|stop_token), [0-9]+ prompt tokens' \
  "$BIN" generate --checkpoint "$TMP/ck" --tokenizer $TOK --chat "What is 2+2?" --max-new-tokens 5 --seed 3
# The same chat through nano3.jinja (the Jinja interpreter): the same prompt, the same tokens.
grep -Ev '^(generated|cache:) ' "$TMP/out" >"$TMP/chat_builtin"
expect_ok "native chat, --chat-template nano3.jinja" '^finish_reason: ' \
  "$BIN" generate --checkpoint "$TMP/ck" --tokenizer $TOK --chat "What is 2+2?" --max-new-tokens 5 --seed 3 \
  --chat-template "$ROOT/tests/fixtures/jinja/nano3.jinja"
[[ "$(grep -Ev '^(generated|cache:) ' "$TMP/out")" == "$(cat "$TMP/chat_builtin")" ]] || fail "nano3.jinja generated otherwise than the built-in"
# The default (auto) takes a checkpoint's own template: here one that refuses, so the error shows it was used.
cp -r $HF "$TMP/hf_tmpl"
python3 - "$TMP/hf_tmpl/tokenizer_config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["chat_template"] = "{{ raise_exception('the checkpoint template ran: ' + messages[0].content) }}"
json.dump(c, open(sys.argv[1], "w"))
PY
expect_error "--chat-template auto uses the checkpoint's own" \
  "--chat: $TMP/hf_tmpl/tokenizer_config.json:1: the checkpoint template ran: hi" \
  "$BIN" generate --checkpoint "$TMP/hf_tmpl" --chat "hi" --max-new-tokens 2
expect_ok "--chat-template nano3 overrides it" '^finish_reason: ' \
  "$BIN" generate --checkpoint "$TMP/hf_tmpl" --chat "hi" --max-new-tokens 2 --chat-template nano3
expect_error "--chat-template checkpoint without one" \
  "--chat-template: chat template \"checkpoint\": $TMP/ck holds neither chat_template.jinja nor tokenizer_config.json (name a template: nano3, nemotron-h, nano-v2, or a .jinja file)" \
  "$BIN" generate --checkpoint "$TMP/ck" --tokenizer $TOK --chat "hi" --chat-template checkpoint
expect_ok "native iteration dir" '^finish_reason: ' \
  "$BIN" generate --checkpoint "$TMP/ck/iter_0000002" --tokenizer $TOK --prompt "2+2=" --max-new-tokens 3

cat >"$TMP/in.jsonl" <<'ROWS'
{"id": "a", "prompt": "1+1="}
{"id": "b", "messages": [{"role": "user", "content": "Say hi"}]}
{"id": "c", "prompt": "The answer is"}

{"id": "d", "prompt": "12*3="}
ROWS
gen=("$BIN" generate --checkpoint "$TMP/ck" --tokenizer $TOK --max-new-tokens 7 --temperature 0.9 --top-p 0.95
  --top-k 50 --seed 11)
expect_ok "jsonl, 2 slots" '^wrote 4 completions to ' "${gen[@]}" --input "$TMP/in.jsonl" --output "$TMP/out2.jsonl" --max-slots 2
grep -Eq 'tokens/s' "$TMP/out" || fail "jsonl: no tokens/s line"
[[ $(wc -l <"$TMP/out2.jsonl") -eq 4 ]] || fail "jsonl: expected 4 rows, got $(wc -l <"$TMP/out2.jsonl")"
python3 - "$TMP/out2.jsonl" <<'PY' || fail "jsonl: rows malformed"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["id"] for r in rows] == ["a", "b", "c", "d"], rows
for r in rows:
    assert isinstance(r["completion"], str)
    assert len(r["tokens"]) == len(r["logprobs"]) >= 1, r
    assert all(lp <= 0 for lp in r["logprobs"]), r
    assert r["finish_reason"] in ("length", "stop_token", "stop_string", "max_seq_len"), r
    assert r["prompt_tokens"] > 0
    assert r["finish_reason"] != "length" or len(r["tokens"]) == 7, r
PY
expect_ok "jsonl, 1 slot" '^wrote 4 completions' "${gen[@]}" --input "$TMP/in.jsonl" --output "$TMP/out1.jsonl" --max-slots 1
# The cached model computes several slots in one call: the same tokens, log-probs equal to
# float32 rounding. The exact reference (--recompute) runs each slot alone: bit for bit.
python3 - "$TMP/out1.jsonl" "$TMP/out2.jsonl" <<'PY' && echo "ok: the same completions for 1 and 2 slots" ||
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
for x, y in zip(a, b):
    assert x["tokens"] == y["tokens"] and x["completion"] == y["completion"], (x, y)
    assert all(abs(p - q) < 1e-4 for p, q in zip(x["logprobs"], y["logprobs"])), (x["logprobs"], y["logprobs"])
assert len(a) == len(b) == 4
PY
  fail "jsonl: --max-slots 1 and 2 differ"
expect_ok "jsonl, recompute, 2 slots" '^wrote 4 completions' "${gen[@]}" --recompute --input "$TMP/in.jsonl" \
  --output "$TMP/r2.jsonl" --max-slots 2
expect_ok "jsonl, recompute, 1 slot" '^wrote 4 completions' "${gen[@]}" --recompute --input "$TMP/in.jsonl" \
  --output "$TMP/r1.jsonl" --max-slots 1
cmp -s "$TMP/r1.jsonl" "$TMP/r2.jsonl" && echo "ok: recompute: bit-identical for 1 and 2 slots" ||
  fail "jsonl: --recompute --max-slots 1 and 2 differ"
python3 - "$TMP/out1.jsonl" "$TMP/r1.jsonl" <<'PY' && echo "ok: cached equals the exact recompute" ||
import json, sys
for x, y in zip(*[[json.loads(l) for l in open(f)] for f in sys.argv[1:3]]):
    assert x["tokens"] == y["tokens"], (x, y)
    assert all(abs(p - q) < 1e-4 for p, q in zip(x["logprobs"], y["logprobs"]))
PY
  fail "jsonl: the cached model's completions differ from --recompute's"

# A stop token: the first token of a free run stops the next one at once.
first=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["tokens"][0])' "$TMP/out2.jsonl")
head -1 "$TMP/in.jsonl" >"$TMP/one.jsonl"
expect_ok "stop token" '^wrote 1 completions' "${gen[@]}" --input "$TMP/one.jsonl" --output "$TMP/stop.jsonl" \
  --stop-token-id "$first"
grep -q "\"tokens\":\[$first\]" "$TMP/stop.jsonl" && grep -q '"finish_reason":"stop_token"' "$TMP/stop.jsonl" ||
  fail "stop token: $(cat "$TMP/stop.jsonl")"

# Logit bias and penalties (OpenAI's): +100 on token 7 makes every token 7 even with penalties on.
expect_ok "logit bias" '^wrote 1 completions' "${gen[@]}" --input "$TMP/one.jsonl" --output "$TMP/bias.jsonl" \
  --logit-bias 7=100 --presence-penalty 0.5 --frequency-penalty 0.5
python3 -c 'import json,sys; t=json.loads(open(sys.argv[1]).readline())["tokens"]; assert t == [7] * 7, t' "$TMP/bias.jsonl" &&
  echo "ok: --logit-bias forces the token" || fail "logit bias: $(cat "$TMP/bias.jsonl")"

# --- bad input: one line, exit 2, nothing written -------------------------------------------------
expect_error "missing checkpoint" "--checkpoint $TMP/nope: no such directory" \
  "$BIN" generate --checkpoint "$TMP/nope" --prompt hi
expect_error "no tokenizer" \
  "$TMP/ck/iter_0000002/tokenizer/tokenizer.json: no tokenizer.json; pass --tokenizer FILE (e.g. the data prep output's tokenizer/tokenizer.json)" \
  "$BIN" generate --checkpoint "$TMP/ck" --prompt hi
printf '{"prompt": "ok"}\n{"prompt": \n' >"$TMP/bad.jsonl"
"$BIN" generate --checkpoint "$TMP/ck" --tokenizer $TOK --input "$TMP/bad.jsonl" --output "$TMP/bad_out.jsonl" \
  >"$TMP/out" 2>"$TMP/err"
rc=$?
[[ $rc -eq 2 && $(wc -l <"$TMP/err") -eq 1 ]] && grep -q "^error: $TMP/bad.jsonl:2: " "$TMP/err" &&
  echo "ok: bad JSONL line" || fail "bad JSONL line: exit $rc: $(cat "$TMP/err")"
[[ -e "$TMP/bad_out.jsonl" ]] && fail "bad JSONL line: output written"
printf '{"prompt": ""}\n' >"$TMP/empty.jsonl"
expect_error "empty prompt in a file" "$TMP/empty.jsonl:1: empty prompt" \
  "$BIN" generate --checkpoint "$TMP/ck" --tokenizer $TOK --input "$TMP/empty.jsonl" --output "$TMP/e.jsonl"
printf '{"text": "x"}\n' >"$TMP/nokey.jsonl"
expect_error "row without prompt" "$TMP/nokey.jsonl:1: expected a \"prompt\" string or a \"messages\" array" \
  "$BIN" generate --checkpoint "$TMP/ck" --tokenizer $TOK --input "$TMP/nokey.jsonl" --output "$TMP/e.jsonl"
expect_error "empty --prompt" "generate: give exactly one of --prompt TEXT, --chat TEXT and --input FILE.jsonl" \
  "$BIN" generate --checkpoint "$TMP/ck" --tokenizer $TOK --prompt ""
expect_error "max-new-tokens 0" "--max-new-tokens: expected a positive integer, got 0" \
  "$BIN" generate --checkpoint "$TMP/ck" --tokenizer $TOK --prompt hi --max-new-tokens 0
expect_error "top-p 0" "sampling flags: top_p: expected a number in (0, 1], got 0" \
  "$BIN" generate --checkpoint "$TMP/ck" --tokenizer $TOK --prompt hi --top-p 0
expect_error "logit bias without =" '--logit-bias: expected TOKEN_ID=BIAS (e.g. 42=-100), got "7"' \
  "$BIN" generate --checkpoint "$TMP/ck" --tokenizer $TOK --prompt hi --logit-bias 7
expect_error "presence penalty 3" "sampling flags: presence_penalty: expected a number in [-2, 2], got 3" \
  "$BIN" generate --checkpoint "$TMP/ck" --tokenizer $TOK --prompt hi --presence-penalty 3
expect_error "unknown device" '--device: expected auto, cpu, cuda or cuda:N, got "tpu"' \
  "$BIN" generate --checkpoint "$TMP/ck" --tokenizer $TOK --prompt hi --device tpu
expect_error "bf16 on the CPU" \
  "--dtype bfloat16: not on cpu (the CPU runs float32 or float64; CUDA float32 or bfloat16)" \
  "$BIN" generate --checkpoint "$TMP/ck" --tokenizer $TOK --prompt hi --device cpu --dtype bfloat16
[[ -e "$TMP/e.jsonl" ]] && fail "an output was written for bad input"

finish "generate checks"
