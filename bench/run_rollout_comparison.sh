#!/usr/bin/env bash
# Rollout throughput, ours against transformers' `generate`, on one GPU in one run: for each
# train-step bench config (dense ~132M, MoE ~1.06B), bench/cuda_rollout (the generation engine,
# bf16) and tools/bench_hf_generate.py (NemotronHForCausalLM.generate, bf16, the same config.json,
# batch, prompt length and new tokens, EOS ignored), then the ratio of generated tokens/s
# (prefill included on both sides). Run from the repository root. Both rows are appended to
# $RESULTS (default bench/results/rollout.jsonl); logs go to $OUT (default /tmp).
# Usage: bench/run_rollout_comparison.sh PATH/TO/cuda_rollout [BATCH=256] [PROMPT_LEN=128] [NEW_TOKENS=512]
#        CONFIGS="hybrid_dense_125m" bench/run_rollout_comparison.sh ...   (a subset of configs)
#        CONFIGS="llama31_8b" bench/run_rollout_comparison.sh ...   (Llama-3.1-8B's shape as a uniform
#          DeciLM; the reference is LlamaForCausalLM.generate, tools/hf_bench_model.py)
set -uo pipefail
BIN=${1:?usage: run_rollout_comparison.sh PATH/TO/cuda_rollout [batch] [prompt_len] [new_tokens]}
BATCH=${2:-256}
PROMPT=${3:-128}
NEW=${4:-512}
OUT=${OUT:-/tmp}
RESULTS=${RESULTS:-bench/results/rollout.jsonl}
CONFIGS=${CONFIGS:-"hybrid_dense_125m hybrid_moe_1b"}
[[ -x $BIN ]] || { echo "error: $BIN: not an executable (the cuda_rollout binary of a CUDA build)" >&2; exit 2; }
# A bundled binary directory (tools/gpu_session.sh's layout) brings its library path.
[[ -f "$(dirname "$BIN")/gpu-env.sh" ]] && source "$(dirname "$BIN")/gpu-env.sh"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
mkdir -p "$OUT" "$(dirname "$RESULTS")"
json_field() {  # json_field KEY FILE: a number from the last JSON line of FILE holding KEY
  python3 - "$1" "$2" <<'PY'
import json, sys
key, path = sys.argv[1], sys.argv[2]
rows = [l for l in open(path) if l.startswith("{")]
row = json.loads(rows[-1])
row = next(iter(row.values())) if len(row) == 1 and isinstance(next(iter(row.values())), dict) else row
print(row[key])
PY
}
summary=()
for c in $CONFIGS; do
  echo "== $c: nemotron (bench/cuda_rollout)"
  hf_cfg="$OUT/rollout_$c.config.json"
  "$BIN" -c "bench/configs/$c.yaml" --batch "$BATCH" --prompt-len "$PROMPT" --new-tokens "$NEW" \
    --hf-config-out "$hf_cfg" --results "$RESULTS" 2>&1 | tee "$OUT/rollout_$c.log"
  ours=$(json_field generated_tokens_per_s "$OUT/rollout_$c.log" 2>/dev/null) || ours=""
  echo "== $c: transformers generate (tools/bench_hf_generate.py)"
  python3 tools/bench_hf_generate.py --config "$hf_cfg" --batch "$BATCH" --prompt-len "$PROMPT" --new-tokens "$NEW" \
    2>&1 | tee "$OUT/hf_generate_$c.log" | tail -5
  theirs=$(json_field generated_tokens_per_s "$OUT/hf_generate_$c.log" 2>/dev/null) || theirs=""
  hf_batch=$(json_field batch "$OUT/hf_generate_$c.log" 2>/dev/null) || hf_batch="?"
  if [[ -n $ours && -n $theirs ]]; then
    line=$(python3 -c "print(f'$c: nemotron {float(\"$ours\"):,.0f} generated tokens/s, transformers {float(\"$theirs\"):,.0f} (batch $hf_batch) -> {float(\"$ours\") / float(\"$theirs\"):.1f}x')")
    tail -1 "$OUT/hf_generate_$c.log" | python3 -c "
import json, sys
row = json.loads(sys.stdin.read())
row['config'] = 'bench/configs/$c.yaml'
row['nemotron_generated_tokens_per_s'] = float('$ours')
row['speedup'] = float('$ours') / row['generated_tokens_per_s']
print(json.dumps(row))" >>"$RESULTS"
  else
    line="$c: no ratio (nemotron: ${ours:-failed}, transformers: ${theirs:-failed}; logs in $OUT)"
  fi
  summary+=("$line")
done
echo "== rollout: $BATCH prompts x $PROMPT tokens, $NEW new tokens each, bf16"
printf '%s\n' "${summary[@]}"
