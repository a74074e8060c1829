#!/usr/bin/env bash
# One GPU-machine session (the device tool): the CUDA kernel and block checks, the tiny recipes on
# CUDA against the CPU (pretraining; GRPO: tests/cli/cuda_rl_test.sh), and the train-step
# benchmarks (one micro-batch per optimizer step, then ACCUM micro-batches with the transformers
# reference). Run from the repository root with the
# binaries in DIR (built here with -DNEMOTRON_CUDA=ON and bundled with
# ../shared/device/bundle-libs.sh); logs and results.jsonl go to $OUT (or /tmp).
# Usage: tools/gpu_session.sh DIR [steps] [accum]
set -uo pipefail
DIR=${1:?usage: gpu_session.sh DIR [steps] [accum]}
OUT=${OUT:-/tmp}
STEPS=${2:-8}
ACCUM=${3:-4}
source "$DIR/gpu-env.sh"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo "== test_cuda"
"$DIR/test_cuda" --gtest_brief=1 2>&1 | tee "$OUT/test_cuda.log" | tail -20
echo "== cli.cuda_train"
OMP_WAIT_POLICY=PASSIVE bash tests/cli/cuda_train_test.sh "$DIR/nemotron" 2>&1 | tee "$OUT/cuda_train.log" | tail -12
echo "== cli.cuda_rl"
OMP_WAIT_POLICY=PASSIVE bash tests/cli/cuda_rl_test.sh "$DIR/nemotron" 2>&1 | tee "$OUT/cuda_rl.log" | tail -16
echo "== benchmarks"
peak=()
for c in "hybrid_dense_125m --batch 4" "hybrid_moe_1b --batch 2"; do
  set -- $c
  for a in 1 "$ACCUM"; do
    ref=()
    [[ $a != 1 ]] && ref=(--reference)
    "$DIR/cuda_train_step" -c "bench/configs/$1.yaml" "${@:2}" --seq-len 4096 --steps "$STEPS" --grad-accum "$a" \
      "${ref[@]}" "${peak[@]}" --results "$OUT/results.jsonl" 2>&1 | tee -a "$OUT/bench.log"
    # The GEMM peak measured by the first run serves the others (about 30 s saved each).
    measured=$(grep -o '"gemm_peak_tflops":[0-9.]*' "$OUT/results.jsonl" 2>/dev/null | head -1 | cut -d: -f2)
    [[ ${#peak[@]} -eq 0 && -n $measured ]] && peak=(--peak-tflops "$measured")
  done
done
# The ~1B heterogeneous DeciLM (issue 15), without --reference: tools/bench_transformers.py builds
# only Nemotron-H.
"$DIR/cuda_train_step" -c bench/configs/decilm_1b.yaml --batch 2 --seq-len 4096 --steps "$STEPS" "${peak[@]}" \
  --results "$OUT/results.jsonl" 2>&1 | tee -a "$OUT/bench.log"
