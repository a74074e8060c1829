#!/usr/bin/env bash
# The SSD scan's A/B on one GPU, in one call: test_cuda's ssd_scan cases (the fused Y/dxb kernel
# on, the default), then bench/cuda_ssd_scan on the dense and MoE training shapes with the old
# tile-GEMM Y/dxb (NEMOTRON_SSD_FUSED=0) and the fused kernel, a heads-per-block sweep, and
# cuda_train_step on hybrid_dense_125m 4 x 4096 both ways. Run from the repository root with the
# binaries and gpu-env.sh in $BIN (default: bb); logs go to $OUT.
set -u
BIN=${BIN:-bb}
OUT=${OUT:-.}
source "$BIN/gpu-env.sh"
nvidia-smi -L
STEP_MS=${STEP_MS:-46.3}
echo "== test_cuda ssd_scan cases (fused on)"
"$BIN/test_cuda" --gtest_filter='*ssd_scan*' > "$OUT/test_cuda_ssd.log" 2>&1
echo "test rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$OUT/test_cuda_ssd.log" | head -40
for shape in "4 4096 24 64 2 128 128" "2 4096 32 64 8 128 128"; do
  for fused in 0 1; do
    echo "== cuda_ssd_scan $shape NEMOTRON_SSD_FUSED=$fused"
    NEMOTRON_SSD_FUSED=$fused "$BIN/cuda_ssd_scan" $shape --step-ms "$STEP_MS" --layers 9
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
  for fused in 0 1; do
    echo "== cuda_train_step hybrid_dense_125m 4x4096 NEMOTRON_SSD_FUSED=$fused"
    NEMOTRON_SSD_FUSED=$fused "$BIN/cuda_train_step" -c bench/configs/hybrid_dense_125m.yaml --batch 4 --seq-len 4096 \
      --results "$OUT/train_step.jsonl" > "$OUT/train_dense_fused$fused.log" 2>&1
    echo "rc=$?"; grep -E "train step:|ssd_scan|SSD scan" "$OUT/train_dense_fused$fused.log" | head -6
  done
fi
