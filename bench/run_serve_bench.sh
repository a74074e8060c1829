#!/usr/bin/env bash
# The serving benchmark on one GPU (issue 24): `nemotron serve --device cuda` in bf16 on the MoE
# bench config's random-weight model (bench/configs/hybrid_moe_1b.yaml, the weights cuda_rollout
# builds, seed 1234, written by its --save-weights), loaded by 32 and then 128 concurrent streaming
# clients (bench/serve_bench.py) for DURATION seconds each, against cuda_rollout's offline figure
# for the same model, on the same GPU, in the same run: its engine with as many slots as clients,
# 4 x that many requests of the same prompt length and token count, refilled as they end (the
# steady state the clients keep the server in). Requests: PROMPT_LEN random token ids, TOKENS new
# tokens each, EOS ignored, temperature 1.
# The model's vocabulary is 131072 and a random model draws from all of it: the server detokenizes
# with tests/fixtures/tokenizer/hf_tokenizer.json widened to 131072 tokens (an entry " w<id>" for
# each id the fixture lacks), so that every token streams as text, as a real tokenizer's would.
# Writes OUT/serve.jsonl (one row per client count, with the rollout's figure, the ratio and what
# the server's engine did meanwhile, from its /metrics), the logs, and the rollout rows to
# OUT/rollout.jsonl.
# usage: bench/run_serve_bench.sh BIN_DIR OUT_DIR   (BIN_DIR holds nemotron and cuda_rollout)
#        env: DURATION (60), PROMPT_LEN (128), TOKENS (128), CLIENTS ("32 128"), MACHINE_KIND, COMMIT,
#        SERVE_ARGS (more `nemotron serve` options, e.g. "--scheduler-delay-factor 0.5"; recorded in the rows)
set -uo pipefail
bin=$(cd "${1:?usage: run_serve_bench.sh BIN_DIR OUT_DIR}" && pwd)
out=$(mkdir -p "${2:?usage: run_serve_bench.sh BIN_DIR OUT_DIR}" && cd "$2" && pwd)
cd "$(dirname "${BASH_SOURCE[0]}")/.."
duration=${DURATION:-60} prompt_len=${PROMPT_LEN:-128} tokens=${TOKENS:-128} clients=${CLIENTS:-32 128}
config=bench/configs/hybrid_moe_1b.yaml
work=$(mktemp -d)
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
server=

python3 - tests/fixtures/tokenizer/hf_tokenizer.json 131072 "$work/tokenizer.json" <<'EOF' || exit 1
import json, sys
t = json.load(open(sys.argv[1]))
n, vocab = int(sys.argv[2]), t["model"]["vocab"]
taken = set(vocab.values()) | {a["id"] for a in t["added_tokens"]}
for i in range(n):
    if i not in taken:
        vocab[f"\u0120w{i}"] = i  # "Ġ" is the byte-level space
json.dump(t, open(sys.argv[3], "w"))
EOF

for c in $clients; do
  args=(-c "$config" --batch "$c" --prompts $((4 * c)) --prompt-len "$prompt_len" --new-tokens "$tokens" --sweep "")
  [[ -d "$work/model" ]] || args+=(--save-weights "$work/model")
  "$bin/cuda_rollout" "${args[@]}" --results "$out/rollout.jsonl" >"$out/rollout_$c.log" 2>&1 ||
    { echo "cuda_rollout --batch $c failed:"; tail -5 "$out/rollout_$c.log"; exit 1; }
  grep -E '^(device|rollout|generated|decode step):' "$out/rollout_$c.log"
done

max_clients=$(tr ' ' '\n' <<<"$clients" | sort -n | tail -1)
"$bin/nemotron" serve --checkpoint "$work/model" --tokenizer "$work/tokenizer.json" --device cuda \
  --max-slots "$max_clients" --max-seq-len $((prompt_len + tokens)) --port 0 ${SERVE_ARGS:-} >"$out/server.log" 2>&1 &
server=$!
for ((i = 0; i < 1200; ++i)); do
  port=$(sed -nE 's|^serving ".*" at http://127\.0\.0\.1:([0-9]+)/v1 .*|\1|p' "$out/server.log")
  [[ -n "$port" ]] && break
  kill -0 $server 2>/dev/null || { echo "the server exited:"; cat "$out/server.log"; exit 1; }
  sleep 0.1
done
[[ -n "$port" ]] || { echo "no start line:"; cat "$out/server.log"; exit 1; }
head -4 "$out/server.log"

# Warm-up (not recorded): the first steps at each batch size plan their GEMMs.
python3 bench/serve_bench.py "http://127.0.0.1:$port" --clients "$max_clients" --duration 3 --prompt-len "$prompt_len" \
  --tokens 16 --vocab 131072 >/dev/null
for c in $clients; do
  python3 bench/serve_bench.py "http://127.0.0.1:$port" --clients "$c" --duration "$duration" \
    --prompt-len "$prompt_len" --tokens "$tokens" --vocab 131072 | tee "$out/serve_bench_$c.json"
done
kill -TERM $server
wait $server
tail -1 "$out/server.log"
server=

card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
python3 - "$out" "$config" "${MACHINE_KIND:-unknown}" "$card" "${COMMIT:-unknown}" "${SERVE_ARGS:-}" $clients <<'EOF'
import datetime, json, sys
out, config, kind, card, commit, serve_args, clients = (sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5],
                                                        sys.argv[6], sys.argv[7:])
rollouts = {}
for line in open(f"{out}/rollout.jsonl"):
    r = json.loads(line)
    rollouts[r["batch"]] = r
with open(f"{out}/serve.jsonl", "a") as f:
    for c in clients:
        s = json.loads(open(f"{out}/serve_bench_{c}.json").read().strip().splitlines()[-1])["serve_bench"]
        r = rollouts[int(c)]
        row = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "commit": commit,
               "machine_kind": kind, "card": card, "config": config, "dtype": "bfloat16", "server": ("nemotron serve --device cuda " + serve_args).strip(),
               **{k: v for k, v in s.items() if k != "lost_examples"},
               "rollout": {k: r[k] for k in ("batch", "prompts", "prompt_len", "new_tokens", "generated_tokens_per_s",
                                             "decode_tokens_per_s", "decode_step_ms_median", "seconds")},
               "fraction_of_rollout": round(s["output_tokens_per_s"] / r["generated_tokens_per_s"], 4)}
        f.write(json.dumps(row) + "\n")
        print(f"{c} clients: {s['output_tokens_per_s']:.0f} output tokens/s served vs {r['generated_tokens_per_s']:.0f} "
              f"offline (cuda_rollout, {c} slots): {100 * row['fraction_of_rollout']:.1f}%; {s['requests_per_s']} requests/s, "
              f"TTFT p50 {s['ttft_ms_p50']} ms p99 {s['ttft_ms_p99']} ms, ITL p50 {s['itl_ms_p50']} ms p99 {s['itl_ms_p99']} ms, "
              f"lost {s['lost']}")
        if "engine" in s:
            e = s["engine"]
            print(f"  engine: {e['steps']} steps, {100 * e['prefill_step_fraction']:.1f}% prefilling "
                  f"({e['prefill_step_model_ms']} ms each in the model, {100 * e['prefill_share_of_busy']:.1f}% of the busy time); "
                  f"decode steps {e['decode_step_model_ms']} ms in the model; {e['busy_ms_per_step']} ms per step in all, "
                  f"{e['hook_ms_per_step']} ms of it in the server's per-token work")
EOF
