#!/usr/bin/env bash
# Tensor parallelism on one GPU machine (the device tool; issue 23): the tensor-parallel benches,
# one GPU against TP N in the same session, each TP line with the collectives overlapped and not
# (bench/cuda_data_parallel): the dense bench config at TP 2 (with and without sequence
# parallelism, and once with CUDA_DEVICE_MAX_CONNECTIONS=1, Megatron's setting for its TP overlap)
# and the hidden-4096 hybrid (bench/configs/hybrid_dense_h4096.yaml) at TP 4 where there are 4
# GPUs; then the CUDA equivalence test (tests/cli/cuda_tensor_parallel_test.sh); then the hidden-4096
# hybrid on one GPU (last: its start-up, one rank making 2 B parameters, is the longest).
# Run from the repository root with the binaries in DIR (built with -DNEMOTRON_CUDA=ON, bundled with
# ../shared/device/bundle-libs.sh); logs and results.jsonl go to $OUT (or /tmp).
# `sm`: only the sweep of --tp-gemm-sm-margin (the SMs the GEMMs leave to a pending overlapped
# collective) at TP 2 (dense) and TP 4 (h4096).
# Usage: tools/gpu_tp_session.sh DIR [test|bench|all|sm]
set -uo pipefail
DIR=${1:?usage: gpu_tp_session.sh DIR [test|bench|all|sm]}
WHAT=${2:-all}
OUT=${OUT:-/tmp}
source "$DIR/gpu-env.sh"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
gpus=$(nvidia-smi -L | grep -c '^GPU ')
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --oversubscribe -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM)
tp_test() {
  echo "== cli.cuda_tensor_parallel"
  bash tests/cli/cuda_tensor_parallel_test.sh "$DIR/nemotron" 2>&1 | tee "$OUT/cuda_tensor_parallel.log" | grep -v '^ iteration'
}
if [[ $WHAT == test ]]; then tp_test; exit 0; fi
echo "== benches"
peak=()
envx=()
bench() {  # NP CONFIG ARGS...
  local np=$1 config=$2
  shift 2
  "${MPIRUN[@]}" "${envx[@]}" -np "$np" "$DIR/cuda_data_parallel" -c "bench/configs/$config.yaml" --seq-len 4096 \
    --steps 8 --allreduce-mib 256 "${peak[@]}" --results "$OUT/results.jsonl" "$@" 2>&1 | tee -a "$OUT/bench.log" | grep -v '^\['
  local measured
  measured=$(grep -o '"gemm_peak_tflops":[0-9.]*' "$OUT/results.jsonl" 2>/dev/null | head -1 | cut -d: -f2)
  [[ ${#peak[@]} -eq 0 && -n $measured ]] && peak=(--peak-tflops "$measured")
}
if [[ $WHAT == sm ]]; then
  for m in 0 16 32; do bench 2 hybrid_dense_125m --batch 4 --tensor-parallel 2 --tp-gemm-sm-margin $m; done
  if [[ $gpus -ge 4 ]]; then
    for m in 16 32; do bench 4 hybrid_dense_h4096 --batch 1 --tensor-parallel 4 --tp-gemm-sm-margin $m; done
  fi
  exit 0
fi
bench 1 hybrid_dense_125m --batch 4
bench 2 hybrid_dense_125m --batch 4 --tensor-parallel 2
bench 2 hybrid_dense_125m --batch 4 --tensor-parallel 2 --sequence-parallel
envx=(-x CUDA_DEVICE_MAX_CONNECTIONS=1)
bench 2 hybrid_dense_125m --batch 4 --tensor-parallel 2
envx=()
if [[ $gpus -ge 4 ]]; then
  bench 4 hybrid_dense_h4096 --batch 1 --tensor-parallel 4
  bench 4 hybrid_dense_h4096 --batch 1 --tensor-parallel 4 --sequence-parallel
fi
[[ $WHAT == all ]] && tp_test
[[ $gpus -ge 4 ]] && bench 1 hybrid_dense_h4096 --batch 1
