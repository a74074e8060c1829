#!/usr/bin/env bash
# The generation engine under tensor parallelism (issue 23 §4), as users start it: `mpirun -np 2
# nemotron generate|serve --tensor-parallel-size 2` (or `--run PROFILE` of an env.toml), each rank holding half of the heads, KV heads,
# Mamba heads and groups, widths and vocabulary of the dense Hugging Face fixture and of a native
# checkpoint of the tiny super3 recipe (latent MoE with a shared expert), the ranks running the engine in lockstep and rank 0 alone reading prompts, writing
# outputs and serving HTTP. Each must give the one process's tokens: greedy and at a seed with
# top-p; the server's answers (a completion, a chat, an echo with log-probs, a seeded n = 2, a
# stream) equal the one-process server's, it stays so after 6 requests at once and 2 streams whose
# client left early (its admissions delayed by rank 0's clock: --scheduler-delay-factor), its start
# line prices one rank's cache, and SIGTERM ends every rank. generate --expert-parallel-size 2
# (EP 2, and EP 2 x TP 2 over 4 ranks: each data rank its share of the prompts, the experts split)
# gives the one process's tokens and parameter count too, and so does a model with fewer KV heads
# than ranks (the tiny recipe with 1 at TP 2: each rank computes the one, its KV cache holds it).
# Then the layouts that cannot run: a size the Mamba groups do not divide, a size that is not the
# launch's; and GRPO's generator at a size the launch's ranks cannot hold.
# Usage: engine_tensor_parallel_test.sh path/to/nemotron
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
source "$(dirname "${BASH_SOURCE[0]}")/mpi_lib.sh"
source "$ROOT/tests/cli/serve_lib.sh"

DENSE=tests/fixtures/hf/dense
cat >"$TMP/in.jsonl" <<'ROWS'
{"id": "a", "prompt": "1+1="}
{"id": "b", "messages": [{"role": "user", "content": "Say hi"}]}
{"id": "c", "prompt": "The answer is"}
{"id": "d", "prompt": "Once upon a time"}
ROWS

# same_output NAME A B: the same completions and tokens row for row; log-probs within 1e-4
# (float32 sums over a split in another order).
same_output() {
  if msg=$(python3 - "$2" "$3" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 4, (len(a), len(b))
worst = 0.0
for x, y in zip(a, b):
    assert x["tokens"] == y["tokens"], (x["id"], x["tokens"], y["tokens"])
    assert x["completion"] == y["completion"] and x["finish_reason"] == y["finish_reason"], x["id"]
    worst = max([worst] + [abs(p - q) for p, q in zip(x["logprobs"], y["logprobs"])])
assert worst < 1e-4, worst
print(f"{sum(len(x['tokens']) for x in a)} tokens equal, log-probs within {worst:.1e}")
PY
  ); then echo "ok: $1: $msg"; else fail "$1: $msg"; fi
}

# gen NAME NP CHECKPOINT FLAGS...: generate over $TMP/in.jsonl into $TMP/NAME.jsonl, one process
# (NP 1) or NP ranks at --tensor-parallel-size NP (NP / EP x --expert-parallel-size EP when EP is set).
gen() {
  local name=$1 np=$2 ck=$3 ep=${EP:-1}
  shift 3
  local cmd=("$BIN" generate --checkpoint "$ck" --tokenizer $DENSE/tokenizer.json --input "$TMP/in.jsonl" --output "$TMP/$name.jsonl" --max-new-tokens 12
    --ignore-eos --batch 3 "$@")
  if [[ $np -gt 1 ]]; then cmd=("${MPIRUN[@]}" -np "$np" "${cmd[@]}" --tensor-parallel-size $((np / ep))); fi
  if [[ $ep -gt 1 ]]; then cmd+=(--expert-parallel-size "$ep"); fi
  "${cmd[@]}" >"$TMP/out.$name" 2>"$TMP/err.$name" || { fail "$name: exit $?: $(tail -3 "$TMP/err.$name")"; return 1; }
}

# A native checkpoint of the tiny super3 recipe (Mamba, attention, MLP, latent MoE with a shared
# expert; its MTP block unused): two pretraining steps.
expect_ok "pretrain 2 steps" '^ iteration +2/ +2 ' "$BIN" super3 pretrain -c tiny dataset.mock=true \
  dataset.seq_length=32 train.global_batch_size=2 train.micro_batch_size=2 train.train_iters=2 train.eval_iters=0 \
  train.eval_interval=0 scheduler.lr_warmup_iters=1 scheduler.lr_wsd_decay_iters=0 checkpoint.save="$TMP/tiny"
for model in dense tiny; do
  ck=$DENSE
  [[ $model == tiny ]] && ck=$TMP/tiny
  gen "$model-greedy-1" 1 "$ck" --temperature 0 && gen "$model-greedy-tp2" 2 "$ck" --temperature 0 &&
    same_output "$model: generate greedy, TP 2 = one process" "$TMP/$model-greedy-1.jsonl" "$TMP/$model-greedy-tp2.jsonl"
  gen "$model-seed-1" 1 "$ck" --temperature 0.9 --top-p 0.9 --seed 7 &&
    gen "$model-seed-tp2" 2 "$ck" --temperature 0.9 --top-p 0.9 --seed 7 &&
    same_output "$model: generate seed 7, top-p, TP 2 = one process" "$TMP/$model-seed-1.jsonl" "$TMP/$model-seed-tp2.jsonl"
done
# Expert parallelism: the tiny checkpoint's 4 routed experts split over 2 data ranks, each
# generating every other prompt (the routed tokens crossing by all-to-all, each engine stepping idle
# once its own prompts are done), alone and with TP 2 in each data rank; rank 0 writes every row.
for layout in "2 2" "4 2"; do
  read -r np ep <<<"$layout"
  EP=$ep gen "tiny-greedy-ep$ep-np$np" "$np" "$TMP/tiny" --temperature 0 &&
    same_output "tiny: generate greedy, EP $ep over $np ranks = one process" "$TMP/tiny-greedy-1.jsonl" "$TMP/tiny-greedy-ep$ep-np$np.jsonl"
  EP=$ep gen "tiny-seed-ep$ep-np$np" "$np" "$TMP/tiny" --temperature 0.9 --top-p 0.9 --seed 7 &&
    same_output "tiny: generate seed 7, top-p, EP $ep over $np ranks = one process" "$TMP/tiny-seed-1.jsonl" "$TMP/tiny-seed-ep$ep-np$np.jsonl"
done
params_of() { grep -oE '^model: .* [0-9]+ parameters' "$1" | grep -oE '[0-9]+ parameters'; }
[[ -n "$(params_of "$TMP/out.tiny-greedy-1")" && "$(params_of "$TMP/out.tiny-greedy-ep2-np2")" == "$(params_of "$TMP/out.tiny-greedy-1")" ]] ||
  fail "EP 2 counts $(params_of "$TMP/out.tiny-greedy-ep2-np2"), one process $(params_of "$TMP/out.tiny-greedy-1")"
grep -q '^expert parallel: 2 data ranks .* x 2 tensor ranks' "$TMP/out.tiny-greedy-ep2-np4" &&
  [[ $(grep -c '^wrote 4 completions' "$TMP/out.tiny-greedy-ep2-np4") -eq 1 ]] ||
  fail "EP 2 x TP 2: $(cat "$TMP/out.tiny-greedy-ep2-np4")"
# One --prompt at EP 2: data rank 1 has none and steps idle while rank 0 generates.
"${MPIRUN[@]}" -np 2 "$BIN" generate --checkpoint "$TMP/tiny" --tokenizer $DENSE/tokenizer.json --prompt "Hello world" \
  --temperature 0 --max-new-tokens 6 --ignore-eos --expert-parallel-size 2 >"$TMP/out" 2>"$TMP/err" ||
  fail "prompt EP 2: $(tail -3 "$TMP/err")"
"$BIN" generate --checkpoint "$TMP/tiny" --tokenizer $DENSE/tokenizer.json --prompt "Hello world" --temperature 0 \
  --max-new-tokens 6 --ignore-eos >"$TMP/out1"
grep -Ev '^(model|expert parallel|tensor parallel|cache|generated|note):? ' "$TMP/out" >"$TMP/text"
grep -Ev '^(model|expert parallel|tensor parallel|cache|generated|note):? ' "$TMP/out1" >"$TMP/text1"
cmp -s "$TMP/text" "$TMP/text1" && grep -q '^generated 6 tokens for 1 prompts' "$TMP/out" &&
  echo "ok: generate --prompt at EP 2 prints the one process's text, rank 1 idle" ||
  fail "prompt EP 2: $(cat "$TMP/out") vs $(cat "$TMP/out1")"
grep -q '^tensor parallel: 2 ranks' "$TMP/out.dense-greedy-tp2" || fail "no tensor parallel line: $(cat "$TMP/out.dense-greedy-tp2")"
[[ $(grep -c '^wrote 4 completions' "$TMP/out.dense-greedy-tp2") -eq 1 ]] || fail "rank 0 alone should write: $(cat "$TMP/out.dense-greedy-tp2")"
# Fewer KV heads than ranks: the tiny recipe with 1 KV head at TP 2.
expect_ok "pretrain 2 steps, 1 KV head" '^ iteration +2/ +2 ' "$BIN" super3 pretrain -c tiny dataset.mock=true \
  dataset.seq_length=32 train.global_batch_size=2 train.micro_batch_size=2 train.train_iters=2 train.eval_iters=0 \
  train.eval_interval=0 scheduler.lr_warmup_iters=1 scheduler.lr_wsd_decay_iters=0 model.num_key_value_heads=1 \
  checkpoint.save="$TMP/kv1"
gen kv1-greedy-1 1 "$TMP/kv1" --temperature 0 && gen kv1-greedy-tp2 2 "$TMP/kv1" --temperature 0 &&
  same_output "1 KV head: generate greedy, TP 2 = one process" "$TMP/kv1-greedy-1.jsonl" "$TMP/kv1-greedy-tp2.jsonl"
# --prompt prints on rank 0 only.
"${MPIRUN[@]}" -np 2 "$BIN" generate --checkpoint $DENSE --prompt "Hello world" --temperature 0 --max-new-tokens 6 \
  --ignore-eos --tensor-parallel-size 2 >"$TMP/out" 2>"$TMP/err" || fail "prompt TP 2: $(tail -3 "$TMP/err")"
"$BIN" generate --checkpoint $DENSE --prompt "Hello world" --temperature 0 --max-new-tokens 6 --ignore-eos >"$TMP/out1"
text_of() { grep -Ev '^(model|tensor parallel|cache|generated|note):? ' "$1"; }
[[ "$(text_of "$TMP/out")" == "$(text_of "$TMP/out1")" ]] &&
  [[ $(grep -c '^finish_reason: length, [0-9]* prompt tokens, 6 generated$' "$TMP/out") -eq 1 ]] &&
  echo "ok: generate --prompt at TP 2 prints the one process's text once" || fail "prompt TP 2: $(cat "$TMP/out")"

# --run PROFILE (env.toml, executor local): generate starts its own 2 ranks, the model split over them.
printf '[local2]\nexecutor = "local"\nnproc_per_node = 2\n' >"$TMP/env.toml"
"$BIN" generate --checkpoint $DENSE --tokenizer $DENSE/tokenizer.json --input "$TMP/in.jsonl" --output "$TMP/run.jsonl" \
  --max-new-tokens 12 --ignore-eos --batch 3 --temperature 0 --run local2 --env-file "$TMP/env.toml" >"$TMP/out" 2>"$TMP/err" ||
  fail "--run local2: $(tail -3 "$TMP/err")"
grep -q -- '--tensor-parallel-size 2$' "$TMP/out" || fail "--run local2: not split over the 2 ranks: $(head -2 "$TMP/out")"
same_output "generate --run local2 (2 ranks) = one process" "$TMP/dense-greedy-1.jsonl" "$TMP/run.jsonl"
# --run with --expert-parallel-size: the profile's 2 ranks are 2 expert (data) ranks of tensor size 1.
"$BIN" generate --checkpoint "$TMP/tiny" --tokenizer $DENSE/tokenizer.json --input "$TMP/in.jsonl" --output "$TMP/run-ep.jsonl" \
  --max-new-tokens 12 --ignore-eos --batch 3 --temperature 0 --expert-parallel-size 2 --run local2 --env-file "$TMP/env.toml" \
  >"$TMP/out" 2>"$TMP/err" || fail "--run local2 --expert-parallel-size 2: $(tail -3 "$TMP/err")"
grep -q -- '--tensor-parallel-size 1$' "$TMP/out" && grep -q '^expert parallel: 2 data ranks' "$TMP/out" ||
  fail "--run local2 at EP 2: not 2 expert ranks of tensor size 1: $(head -3 "$TMP/out")"
same_output "generate --run local2 --expert-parallel-size 2 = one process" "$TMP/tiny-greedy-1.jsonl" "$TMP/run-ep.jsonl"
expect_error "--run with an expert size that does not divide its ranks" \
  "--expert-parallel-size 3: --run local2 starts 2 ranks ([local2] of $TMP/env.toml), which 3 does not divide (the model is split over tensor x expert ranks)" \
  "$BIN" generate --checkpoint "$TMP/tiny" --prompt hi --expert-parallel-size 3 --run local2 --env-file "$TMP/env.toml"
expect_error "--run with a tensor x expert size other than its ranks" \
  "--tensor-parallel-size 2 x --expert-parallel-size 2: --run local2 starts 2 ranks ([local2] of $TMP/env.toml), which the model is split over; leave --tensor-parallel-size out or pass 1" \
  "$BIN" generate --checkpoint "$TMP/tiny" --prompt hi --tensor-parallel-size 2 --expert-parallel-size 2 --run local2 --env-file "$TMP/env.toml"
expect_error "--run with another --tensor-parallel-size" \
  "--tensor-parallel-size 4: --run local2 starts 2 ranks ([local2] of $TMP/env.toml), which the model is split over; leave the flag out or pass 2" \
  "$BIN" serve --checkpoint $DENSE --run local2 --env-file "$TMP/env.toml" --tensor-parallel-size 4
# A model without routed experts (the fixture's MTP pattern holds a MoE layer, but it has no MTP
# blocks) is refused at EP 2 as training refuses it, not run as two unsplit engines.
bad_layout "generate: EP 2 on a dense model" 2 \
  "--tensor-parallel-size 1 x --expert-parallel-size 2: $DENSE: model.expert_model_parallel_size: 2: the model has no routed experts (no E layer in hybrid_override_pattern)" \
  "$BIN" generate --checkpoint $DENSE --prompt hi --expert-parallel-size 2

# --- serve -------------------------------------------------------------------------------------
# ask NAME BODY ROUTE: the answer's choices (text, or message content, with log-probs) into $TMP/NAME.
ask() {
  curl -s "$URL/v1/$3" -H 'Content-Type: application/json' --data-binary "$2" >"$TMP/$1.raw"
  python3 - "$TMP/$1.raw" >"$TMP/$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for c in r["choices"]:
    print(repr(c.get("text", c.get("message", {}).get("content"))), c["finish_reason"])
    lp = c.get("logprobs") or {}
    for t, p in zip(lp.get("tokens", []), lp.get("token_logprobs", [])):
        print(t, "none" if p is None else f"{p:.4f}")
PY
}
stream() {  # NAME BODY: the streamed text of a completion
  curl -sN "$URL/v1/completions" -H 'Content-Type: application/json' --data-binary "$2" |
    python3 -c 'import json, sys
print("".join(json.loads(l[6:])["choices"][0]["text"] for l in sys.stdin if l.startswith("data: {")))' >"$TMP/$1"
}
queries() {  # SUFFIX
  ask "complete$1" '{"model": "m", "prompt": "Once upon a time", "max_tokens": 10, "temperature": 0}' completions
  ask "chat$1" '{"model": "m", "messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 8, "temperature": 0}' \
    chat/completions
  ask "echo$1" '{"model": "m", "prompt": "The answer is", "max_tokens": 4, "temperature": 0, "echo": true, "logprobs": 2}' \
    completions
  ask "seeded$1" '{"model": "m", "prompt": "1+1=", "max_tokens": 8, "temperature": 0.8, "seed": 5, "n": 2}' completions
  stream "stream$1" '{"model": "m", "prompt": "Hello", "max_tokens": 8, "temperature": 0, "stream": true}'
}
cache_of() { sed -nE 's/^KV pages and Mamba states: ([0-9.]+ [KMGT]?i?B) for .*/\1/p' "$TMP/server.log"; }
start_server --checkpoint $DENSE --served-model-name m --max-seq-len 128 --max-slots 4 && queries 1 && stop_server TERM
cache1=$(cache_of)
SERVE_LAUNCH=("${MPIRUN[@]}" -np 2)
# The TP server times its admissions (--scheduler-delay-factor): rank 0's clock decides for every rank.
if start_server --checkpoint $DENSE --served-model-name m --max-seq-len 128 --max-slots 4 --tensor-parallel-size 2 \
  --scheduler-delay-factor 0.5; then
  grep -q '^tensor parallel: 2 ranks' "$TMP/server.log" || fail "serve: no tensor parallel line"
  grep -q '^model: .*, 37016 parameters, ' "$TMP/server.log" || fail "serve TP 2: not the whole model's size: $(head -1 "$TMP/server.log")"
  # The start line prices one rank's cache: half the one-process server's.
  python3 -c 'import sys
unit = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
a, b = (float(x.split()[0]) * unit[x.split()[1]] for x in sys.argv[1:])
sys.exit(0 if abs(2 * b - a) <= 0.01 * a else 1)' "$cache1" "$(cache_of)" &&
    echo "ok: serve TP 2 prices one rank's cache: $(cache_of) against $cache1" || fail "serve TP 2 cache: $(cache_of) vs $cache1"
  queries 2
  for q in complete chat echo seeded stream; do
    if [[ -s "$TMP/${q}1" ]] && cmp -s "$TMP/${q}1" "$TMP/${q}2"; then
      echo "ok: serve $q at TP 2 = one process: $(head -1 "$TMP/${q}1")"
    else
      fail "serve $q: TP 2 [$(cat "$TMP/${q}2" 2>/dev/null)] vs one process [$(cat "$TMP/${q}1" 2>/dev/null)]"
    fi
  done
  # Busy: 6 requests at once through 4 slots (admissions at many steps, some delayed) and 2 streams
  # whose client leaves early (cancelled mid-run: every rank ends them at the same step); then the
  # server still answers as the one-process one.
  pids=()
  for i in 1 2 3 4 5 6; do
    curl -s "$URL/v1/completions" -H 'Content-Type: application/json' -o "$TMP/busy$i" -w '%{http_code}\n' --data-binary \
      "{\"model\": \"m\", \"prompt\": \"Hello $i\", \"max_tokens\": 60, \"temperature\": 0.7, \"seed\": $i}" >"$TMP/code$i" &
    pids+=($!)
  done
  for i in 1 2; do
    (curl -sN "$URL/v1/completions" -H 'Content-Type: application/json' --data-binary \
      '{"model": "m", "prompt": "Stream", "max_tokens": 100, "temperature": 0, "stream": true}' | head -c 200 >/dev/null) &
    pids+=($!)
  done
  wait "${pids[@]}"
  [[ $(cat "$TMP"/code? | sort -u) == 200 ]] && echo "ok: serve TP 2 answers 6 requests at once (200)" ||
    fail "serve TP 2 busy: codes $(cat "$TMP"/code? | tr '\n' ' ')"
  ask complete3 '{"model": "m", "prompt": "Once upon a time", "max_tokens": 10, "temperature": 0}' completions
  cmp -s "$TMP/complete1" "$TMP/complete3" && echo "ok: serve TP 2 after clients left: the one-process answer" ||
    fail "serve TP 2 after clients left: [$(cat "$TMP/complete3")] vs [$(cat "$TMP/complete1")]"
  # SIGTERM (mpirun forwards it to every rank): rank 0 stops serving and tells the other rank.
  kill -TERM $SERVER_PID
  for ((i = 0; i < 300; ++i)); do kill -0 $SERVER_PID 2>/dev/null || break; sleep 0.1; done
  if kill -0 $SERVER_PID 2>/dev/null; then fail "serve TP 2: still running 30 s after SIGTERM"; else
    grep -q '^stopped by SIGTERM: served 15 requests' "$TMP/server.log" && echo "ok: serve TP 2 stops every rank on SIGTERM" ||
      fail "serve TP 2 stop: $(tail -3 "$TMP/server.log")"
  fi
  wait $SERVER_PID 2>/dev/null
fi
SERVE_LAUNCH=()

# --- layouts that cannot run ----------------------------------------------------------------------
bad_layout "serve: TP 4 with 2 Mamba groups" 4 \
  "--tensor-parallel-size 4: $DENSE: model.tensor_model_parallel_size: 4 does not divide model.n_groups = 2 (tensor parallelism splits it)" \
  "$BIN" serve --checkpoint $DENSE --tensor-parallel-size 4
bad_layout "two ranks, no --tensor-parallel-size" 2 \
  "--tensor-parallel-size 1: the model is split over every rank of the launch, and this one has 2 (start it with \`mpirun -np 1\` or \`srun --ntasks 1\`, or pass --tensor-parallel-size 2)" \
  "$BIN" generate --checkpoint $DENSE --prompt hi
expect_error "TP 2 in one process" \
  "--tensor-parallel-size 2: the model is split over every rank of the launch, and this one has 1 (start it with \`mpirun -np 2\` or \`srun --ntasks 2\`, or pass --tensor-parallel-size 1)" \
  "$BIN" serve --checkpoint $DENSE --tensor-parallel-size 2
bad_layout "EP not dividing the routed experts" 3 \
  "--tensor-parallel-size 1 x --expert-parallel-size 3: $TMP/tiny: model.expert_model_parallel_size: 3 does not divide model.n_routed_experts 4" \
  "$BIN" generate --checkpoint "$TMP/tiny" --tokenizer $DENSE/tokenizer.json --prompt hi --expert-parallel-size 3
bad_layout "EP x TP not the launch's ranks" 2 \
  "--tensor-parallel-size 2 x --expert-parallel-size 2 = 4 ranks: the model is split over every rank of the launch, and this one has 2 (start it with \`mpirun -np 4\` or \`srun --ntasks 4\`)" \
  "$BIN" generate --checkpoint $DENSE --prompt hi --tensor-parallel-size 2 --expert-parallel-size 2
# GRPO's generator at another size than the trainer (cli.generator_layout runs it) is planned for
# the launch's ranks: one process cannot hold a TP 2 generator.
expect_error "GRPO generator TP other than the trainer's, one process" \
  "recipes/super3/rl/tiny.yaml: policy.generation.vllm_cfg.tensor_parallel_size: 2 does not divide the 1 ranks of the run (the generator's data-parallel size is the world over it)" \
  "$BIN" super3 rl -c tiny --dry-run policy.generation.vllm_cfg.tensor_parallel_size=2
expect_ok "GRPO generator TP equal to the trainer's" '^training memory' \
  "$BIN" super3 rl -c tiny --dry-run policy.generation.vllm_cfg.tensor_parallel_size=1
finish "generate and serve under tensor parallelism"
