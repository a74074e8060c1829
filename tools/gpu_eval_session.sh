#!/usr/bin/env bash
# Evaluation on one GPU (the device tool), as tools/gpu_session.sh runs training: the tiny eval
# recipe on CUDA against the CPU (tests/cli/cuda_eval_test.sh), then the log-likelihood benchmark
# (bench/cuda_eval_loglik) on both benchmark configs, each followed by transformers' reference on
# the same items (tools/bench_transformers_loglik.py; skipped with a note when torch or
# transformers is missing). Run from the repository root with the binaries in DIR (nemotron,
# cuda_eval_loglik, gpu-env.sh); logs, results.jsonl and the items go to $OUT (or /tmp).
# Usage: tools/gpu_eval_session.sh DIR [items]
set -uo pipefail
DIR=${1:?usage: gpu_eval_session.sh DIR [items]}
OUT=${OUT:-/tmp}
ITEMS=${2:-2000}
[[ -f "$DIR/gpu-env.sh" ]] && source "$DIR/gpu-env.sh"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo "== cli.cuda_eval"
OMP_WAIT_POLICY=PASSIVE bash tests/cli/cuda_eval_test.sh "$DIR/nemotron" 2>&1 | tee "$OUT/cuda_eval.log" | tail -40
echo "== eval log-likelihood benchmark"
for c in hybrid_dense_125m hybrid_moe_1b; do
  "$DIR/cuda_eval_loglik" -c "bench/configs/$c.yaml" --items "$ITEMS" --results "$OUT/results.jsonl" \
    --hf-config-out "$OUT/$c.json" --items-out "$OUT/$c.items.jsonl" 2>&1 | tee -a "$OUT/eval_bench.log"
  if python3 -c 'import torch, transformers' 2>/dev/null; then
    python3 tools/bench_transformers_loglik.py --config "$OUT/$c.json" --items "$OUT/$c.items.jsonl" \
      --batch 16,64,256 2>&1 | tee -a "$OUT/eval_bench.log" | tail -4
  else
    echo "transformers reference skipped: no torch/transformers in $(command -v python3)"
  fi
done
