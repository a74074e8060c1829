#!/usr/bin/env bash
# One GPU-machine session (the device tool): the CUDA kernel checks, the tiny recipe on CUDA
# against the CPU, and the train-step benchmarks with the transformers reference. Run from the
# repository root with the binaries in DIR (built here with -DNEMOTRON_CUDA=ON and bundled with
# ../shared/device/bundle-libs.sh); logs go to $OUT (or /tmp). Usage: tools/gpu_session.sh DIR [steps]
set -uo pipefail
DIR=${1:?usage: gpu_session.sh DIR}
OUT=${OUT:-/tmp}
STEPS=${2:-8}
source "$DIR/gpu-env.sh"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo "== test_cuda"
"$DIR/test_cuda" --gtest_brief=1 2>&1 | tee "$OUT/test_cuda.log" | tail -40
echo "== cli.cuda_train"
bash tests/cli/cuda_train_test.sh "$DIR/nemotron" 2>&1 | tee "$OUT/cuda_train.log" | tail -12
echo "== benchmarks"
for c in "hybrid_dense_125m --batch 4" "hybrid_moe_1b --batch 2"; do
  set -- $c
  "$DIR/cuda_train_step" -c "bench/configs/$1.yaml" "${@:2}" --seq-len 4096 --steps "$STEPS" --reference \
    --results "$OUT/results.jsonl" 2>&1 | tee -a "$OUT/bench.log"
done
