#!/usr/bin/env bash
# Context parallelism on GPUs over NCCL (issue 23), against one GPU: the tiny super3 recipe (Mamba-2,
# attention, MLP, MoE with the expert-bias update, MTP; seq_aux_loss off: cli.context_parallel runs it under CP on the CPU) in
# bf16 with float32 masters, 6 steps, as one process on one GPU and under `mpirun -np N` at CP 2
# and (4 GPUs) CP 2 x TP 2 and CP 4; bf16 tolerances of cli.cuda_tensor_parallel (losses 2e-3
# relative, weights 2e-2 absolute). The K/V all-gather, the conv halo and the scan states go
# through the NCCL communicator as the CPU's through MPI. Then a CP 2 checkpoint resumed on one
# GPU. Exit 77 (skipped) without 2 GPUs or without a CUDA build.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [[ ${gpus:-0} -lt 2 ]]; then echo "skipped: $gpus GPU(s) visible, 2 needed"; exit 77; fi
"$BIN" super3 pretrain -c tiny dataset.mock=true device=cuda --dry-run >/dev/null 2>&1 || { echo "skipped: no CUDA build"; exit 77; }
source "$(dirname "${BASH_SOURCE[0]}")/cuda_mpi_lib.sh"
run+=(moe.moe_router_load_balancing_type=none)

expect_ok "one GPU" '^ iteration +6/ +6 ' "${run[@]}" checkpoint.save="$TMP/g1"
losses "$TMP/g1/metrics.jsonl" >"$TMP/g1.l"
for layout in "2 2 1" "4 2 2" "4 4 1"; do
  read -r np cp tp <<<"$layout"
  [[ $np -le $gpus ]] || continue
  name="cp$cp-tp$tp-np$np"
  "${MPIRUN[@]}" -np $np "${run[@]}" checkpoint.save="$TMP/$name" model.context_parallel_size=$cp \
    model.tensor_model_parallel_size=$tp >"$TMP/out$name" 2>"$TMP/err$name"
  rc=$?
  what="CP $cp x TP $tp over $np GPUs"
  if [[ $rc -ne 0 ]]; then fail "$what: exit $rc: $(tail -5 "$TMP/err$name")"; continue; fi
  losses "$TMP/$name/metrics.jsonl" >"$TMP/$name.l"
  if g=$(gap "$TMP/$name.l" "$TMP/g1.l" 2e-3); then echo "ok: $what: losses within $g of one GPU's"; else
    fail "$what: losses differ by $g: $(paste -d' ' "$TMP/$name.l" "$TMP/g1.l" | tr '\n' ';')"; fi
  if msg=$(python3 tests/cli/safetensors_diff.py "$TMP/$name/iter_0000006/model.safetensors" \
    "$TMP/g1/iter_0000006/model.safetensors" 2e-2 0); then echo "ok: $what weights: $msg"; else
    fail "$what weights: $msg"; fi
done
# A CP 2 checkpoint (parameters replicated over the context ranks) continues on one GPU.
[[ -d $TMP/cp2-tp1-np2 ]] && resumed_on_one_gpu "CP 2" cpz model.context_parallel_size=2
finish "context parallelism on $gpus GPUs over NCCL (CP 2, CP 2 x TP 2, CP 4) against one GPU; a CP 2 checkpoint resumed on one GPU"
