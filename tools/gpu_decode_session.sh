#!/usr/bin/env bash
# One GPU-machine session for decoding at the memory roofline (issue 26, item 7): the 8B-shape decode
# sweep with the skinny GEMM on and off in one process (bench/cuda_rollout --sweep-baseline), the
# skinny GEMM against cuBLASLt on every decode linear shape (bench/cuda_skinny_gemm), then test_cuda
# on the skinny GEMM's cases, the matmul cases and the decode / generation checks. Run from the
# repository root with the binaries in DIR (built with -DNEMOTRON_CUDA=ON, bundled with
# ../shared/device/bundle-libs.sh); logs and JSON rows go to $OUT (or /tmp). BASELINE, when given, is
# an older cuda_rollout (e.g. the previous commit's, run with --skinny-gemm off: main's decode path)
# timed on the same sweep first, in the same session.
# Usage: tools/gpu_decode_session.sh DIR [BASELINE]
set -uo pipefail
DIR=${1:?usage: gpu_decode_session.sh DIR [BASELINE]}
BASELINE=${2:-}
SWEEP=(-c bench/configs/llama31_8b.yaml --batch 64 --prompt-len 128 --new-tokens 32 --sweep 1,4,16,64,256)
OUT=${OUT:-/tmp}
source "$DIR/gpu-env.sh"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
echo "== cuda_skinny_gemm"
timeout 60 "$DIR/cuda_skinny_gemm" --results "$OUT/skinny_gemm.jsonl" 2>&1 | tee "$OUT/skinny_gemm.log"
if [[ -n $BASELINE ]]; then
  echo "== baseline cuda_rollout ($BASELINE --skinny-gemm off), Llama-3.1-8B shape"
  timeout 100 "$BASELINE" "${SWEEP[@]}" --skinny-gemm off --results "$OUT/rollout_baseline.jsonl" 2>&1 |
    tee "$OUT/rollout_8b_baseline.log"
fi
echo "== cuda_rollout, Llama-3.1-8B shape"
timeout 150 "$DIR/cuda_rollout" "${SWEEP[@]}" --sweep-baseline --results "$OUT/rollout.jsonl" 2>&1 |
  tee "$OUT/rollout_8b.log"
echo "== test_cuda (skinny GEMM, matmul, decode, generation)"
timeout 90 "$DIR/test_cuda" --gtest_brief=1 \
  --gtest_filter='*skinny*:*Skinny*:*matmul*:*Decode*:*decode*:*Generation*:OpSupport*' 2>&1 |
  tee "$OUT/test_cuda.log" | tail -30
