#!/usr/bin/env bash
# Full parameter sharding (ddp.use_megatron_fsdp=true, ddp.data_parallel_sharding_strategy=
# optim_grads_params; train/param_gather.h) on 2 GPUs over NCCL against one GPU: the tiny super3
# recipe in bf16 with float32 masters, 6 steps of 16 sequences in micro-batches of 2 (4 per rank:
# gradient accumulation), the layer gathers prefetched on NCCL's communication stream. The losses
# and final weights are within the bf16 tolerances of cli.cuda_data_parallel (2e-3 relative, 2e-2
# absolute), each layer's float32 gradients reduce-scattered per micro-batch from a layer slot into
# the rank's slice; the banner says each rank holds half the weights and half the gradients; the run stopped at iteration 3
# resumes on one GPU to the uninterrupted run's weights. Exit 77 (skipped) without 2 GPUs or
# without a CUDA build.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [[ ${gpus:-0} -lt 2 ]]; then echo "skipped: $gpus GPU(s) visible, 2 needed"; exit 77; fi
"$BIN" super3 pretrain -c tiny dataset.mock=true device=cuda --dry-run >/dev/null 2>&1 || { echo "skipped: no CUDA build"; exit 77; }

source "$(dirname "${BASH_SOURCE[0]}")/cuda_mpi_lib.sh"
fsdp=(ddp.use_megatron_fsdp=true ddp.data_parallel_sharding_strategy=optim_grads_params)

expect_ok "one GPU" '^ iteration +6/ +6 ' "${run[@]}" checkpoint.save="$TMP/g1"
"${MPIRUN[@]}" -np 2 "${run[@]}" "${fsdp[@]}" checkpoint.save="$TMP/f2" >"$TMP/outf2" 2>"$TMP/errf2"
rc=$?
if [[ $rc -ne 0 ]]; then fail "FSDP on 2 GPUs: exit $rc: $(tail -5 "$TMP/errf2")"; else
  grep -E '^full parameter sharding|^sharded gradients|^gradients reduce-scattered|^layer weights gathered|^ iteration +6/ +6 |^peak device memory' "$TMP/outf2"
  grep -qE '^full parameter sharding .*: bfloat16 weights 1/2 per rank: ' "$TMP/outf2" ||
    fail "FSDP on 2 GPUs: no 'bfloat16 weights 1/2 per rank' line"
  grep -qE '^sharded gradients .*: fp32 gradients 1/2 per rank: ' "$TMP/outf2" ||
    fail "FSDP on 2 GPUs: no 'fp32 gradients 1/2 per rank' line"
  grep -qE '^layer weights gathered [0-9]+ time\(s\), [1-9][0-9]* of them prefetched' "$TMP/outf2" ||
    fail "FSDP on 2 GPUs: no prefetched layer gather"
  same_as_one_gpu "FSDP DP 2 over NCCL" "$TMP/f2" "$TMP/g1"
fi
resumed_on_one_gpu "FSDP DP 2" f2s "${fsdp[@]}"
finish "full parameter sharding on 2 GPUs over NCCL equals one GPU within bf16 tolerances; its checkpoint resumes on one GPU"
