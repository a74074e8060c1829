#!/usr/bin/env bash
# DP 2 per-GPU tokens/s and step peak memory of plain data parallelism, the distributed optimizer
# (--distributed-optimizer) and full parameter sharding (--fsdp) on one machine in one session:
# three runs of bench/cuda_data_parallel, the GEMM peak measured once by the first and handed to
# the others, each row appended to RESULTS with "machine_kind" (what the lease was asked for and
# the cards it printed). Each run has its own timeout (seconds, default 90: the 125M model's
# set-up, GEMM peak and steps take well under it; the 2.1 B hybrid_dense_h4096 needed more than 60).
# usage: bench/run_data_parallel_fsdp.sh BENCH_BINARY MACHINE_KIND [CONFIG] [RESULTS] [TIMEOUT_S]
set -u
bin=${1:?usage: $0 BENCH_BINARY MACHINE_KIND [CONFIG] [RESULTS] [TIMEOUT_S]}
kind=${2:?machine kind, e.g. nvidia-h100-x2}
config=${3:-bench/configs/hybrid_dense_125m.yaml}
results=${4:-bench/results/data_parallel.jsonl}
limit=${5:-90}
cards=$(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | awk '{$1=$1 "x"; print}' | paste -sd, -)
tmp=$(mktemp)
run=(mpirun --oversubscribe -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -np 2 "$bin" -c "$config" --steps 5
  --allreduce-mib 256 --results "$tmp")
peak=
for mode in plain --distributed-optimizer --fsdp; do
  extra=()
  [[ $mode != plain ]] && extra+=("$mode")
  [[ -n $peak ]] && extra+=(--peak-tflops "$peak")
  echo "== $mode"
  timeout "$limit" "${run[@]}" "${extra[@]}" 2>&1 | tee "$tmp.log" | grep -E '^(bf16 GEMM peak|train step|step peak|error)'
  [[ -z $peak ]] && peak=$(sed -n 's/^bf16 GEMM peak (rank 0): \([0-9.]*\).*/\1/p' "$tmp.log")
done
python3 -c 'import json,sys
kind = f"{sys.argv[2]} ({sys.argv[3]})"
with open(sys.argv[4], "a") as out:
    for line in open(sys.argv[1]):
        r = json.loads(line); r["machine_kind"] = kind
        out.write(json.dumps(r, sort_keys=True) + "\n")
        print("%s: fsdp %s, distributed optimizer %s: %.0f tokens/s per GPU, step peak %.2f GiB" % (r["layout"], r["fsdp"],
              r["distributed_optimizer"], r["tokens_per_s_per_gpu"], r["step_peak_device_bytes"] / 2**30))' \
  "$tmp" "$kind" "$cards" "$results"
rm -f "$tmp" "$tmp.log"
