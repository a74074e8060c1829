#!/usr/bin/env bash
# The SSD scan's A/B on one GPU, in one call: test_cuda's ssd_scan cases (the defaults, then each
# $TEST_VARIANTS environment), then bench/cuda_ssd_scan on the dense and MoE training shapes under
# each of $VARIANTS (environment settings, ';'-separated; by default the old tile-GEMM Y/dxb,
# NEMOTRON_SSD_FUSED=0, and the fused kernel, NEMOTRON_SSD_FUSED=1: opt-in since session 19), a heads-per-block sweep, ncu on the fused kernel
# (NCU=0: none), and cuda_train_step on hybrid_dense_125m 4 x 4096 under each of $TRAIN_VARIANTS
# (default: $VARIANTS).
# Run from the repository root with the binaries and gpu-env.sh in $BIN (default: bb); logs go to $OUT.
set -u
BIN=${BIN:-bb}
OUT=${OUT:-.}
source "$BIN/gpu-env.sh"
nvidia-smi -L
STEP_MS=${STEP_MS:-46.3}
VARIANTS=${VARIANTS:-NEMOTRON_SSD_FUSED=0;NEMOTRON_SSD_FUSED=1}
IFS=';' read -r -a variants <<< "$VARIANTS"
IFS=';' read -r -a test_variants <<< "${TEST_VARIANTS:-NEMOTRON_SSD_FUSED=1}"
n=0
for v in "" "${test_variants[@]}"; do
  echo "== test_cuda ssd_scan cases (${v:-defaults})"
  env $v "$BIN/test_cuda" --gtest_filter='*ssd_scan*:*mamba2_mixer*:*hybrid_model*' > "$OUT/test_cuda_ssd$n.log" 2>&1
  echo "test rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$OUT/test_cuda_ssd$n.log" | head -40
  n=$((n + 1))
done
for shape in "4 4096 24 64 2 128 128" "2 4096 32 64 8 128 128"; do
  for v in "${variants[@]}"; do
    echo "== cuda_ssd_scan $shape $v"
    env $v "$BIN/cuda_ssd_scan" $shape --step-ms "$STEP_MS" --layers 9
  done
done
for h in ${HEADS_SWEEP:-12}; do
  echo "== cuda_ssd_scan dense NEMOTRON_SSD_HEADS=$h"
  NEMOTRON_SSD_HEADS=$h "$BIN/cuda_ssd_scan" 4 4096 24 64 2 128 128 | grep -E "forward |backward |fwd\+bwd "
done
if [ "${NCU:-1}" = 1 ]; then  # the fused kernels' launches (Y, Y row dots, dxb): issue and occupancy
  echo "== ncu chunk_y_kernel (dense shape)"
  NCU_BIN=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  timeout 120 "$NCU_BIN" --kernel-name regex:chunk_y_kernel --launch-count 3 --section SpeedOfLight \
    --section Occupancy --section SchedulerStats --section WarpStateStats \
    "$BIN/cuda_ssd_scan" once 4 4096 24 64 2 128 128 > "$OUT/ncu_chunk_y.txt" 2>&1
  grep -E "chunk_y_kernel<|Duration|Issued Warp|Achieved Occupancy|Compute \(SM\) Throughput" "$OUT/ncu_chunk_y.txt"
fi
if [ "${TRAIN:-1}" = 1 ]; then
  IFS=';' read -r -a train_variants <<< "${TRAIN_VARIANTS:-$VARIANTS}"
  n=0
  for v in "${train_variants[@]}"; do
    echo "== cuda_train_step hybrid_dense_125m 4x4096 $v"
    env $v "$BIN/cuda_train_step" -c bench/configs/hybrid_dense_125m.yaml --batch 4 --seq-len 4096 \
      --results "$OUT/train_step.jsonl" > "$OUT/train_dense_v$n.log" 2>&1
    echo "rc=$?"; grep -E "train step:|ssd_scan|SSD scan" "$OUT/train_dense_v$n.log" | head -6
    n=$((n + 1))
  done
fi
