#!/usr/bin/env bash
# GRPO with the generator at another tensor- or expert-parallel size than the trainer, on 2 GPUs
# over NCCL in bf16 (cli.generator_layout is the CPU proof of equality): trainer TP 2 -> generator
# TP 1 (each GPU gathers the whole policy and rolls out half of the prompts), trainer DP 2 ->
# generator TP 2 (each GPU cuts its half of every split tensor), trainer EP 2 -> generator EP 1 and
# DP 2 -> generator EP 2, on the tiny super3 recipe against one GPU
# and on a 158M-parameter variant of it for the refit's time. In bf16 a split sum rounds
# otherwise, so a sampled token may differ from one GPU's: the gaps are printed, not bounded; each
# run must train (finite loss; a gradient every step on the tiny recipe) and log its refit time and
# bytes per step. The first step's refit includes the NCCL tensor group's lazy start.
# Exit 77 (skipped) without 2 GPUs or without a CUDA build.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [[ ${gpus:-0} -lt 2 ]]; then echo "skipped: $gpus GPU(s) visible, 2 needed"; exit 77; fi
"$BIN" super3 pretrain -c tiny dataset.mock=true device=cuda --dry-run >/dev/null 2>&1 || { echo "skipped: no CUDA build"; exit 77; }

source "$(dirname "${BASH_SOURCE[0]}")/cuda_mpi_lib.sh"

cuda_grpo_setup
big=(model.hidden_size=2048 model.intermediate_size=8192 model.moe_intermediate_size=2048
  model.moe_shared_expert_intermediate_size=4096 model.mamba_num_heads=64 model.mamba_head_dim=64)
steps() {  # FILE: per step loss, grad norm, reward, refit seconds, refit bytes, generation seconds
  python3 -c 'import json,sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") == "train":
        print(repr(r["loss"]), repr(r["grad_norm"]), repr(r["reward"]), r["refit_seconds"], r.get("refit_bytes", 0),
              r["generation_seconds"])' "$1"
}

expect_ok "GRPO on one GPU" '^step 3/3 ' "${grpo[@]}" checkpointing.checkpoint_dir="$TMP/rl1"
steps "$TMP/rl1/metrics.jsonl" >"$TMP/rl1.m"
# on_gpus NAME TRAINER_TP GENERATOR_TP REFERENCE OVERRIDES...
on_gpus() {
  local name=$1 tp=$2 gtp=$3 ref=$4
  shift 4
  "${MPIRUN[@]}" -np 2 "${grpo[@]}" model.tensor_model_parallel_size=$tp policy.generation.vllm_cfg.tensor_parallel_size=$gtp \
    checkpointing.checkpoint_dir="$TMP/$name" "$@" >"$TMP/out.$name" 2>"$TMP/err.$name"
  local rc=$?
  if [[ $rc -ne 0 ]]; then fail "$name: exit $rc: $(tail -5 "$TMP/err.$name")"; return; fi
  grep -E '^(generator layout|gpu memory)' "$TMP/out.$name"
  grep -E '^step ' "$TMP/out.$name" | grep -oE '^step [0-9/]+|refit .*'
  steps "$TMP/$name/metrics.jsonl" >"$TMP/$name.m"
  python3 -c 'import math,sys
a = [list(map(float, l.split())) for l in open(sys.argv[1])]
b = [list(map(float, l.split())) for l in open(sys.argv[2])] if sys.argv[2] else [None] * len(a)
assert len(a) == 3, a
for i, (x, y) in enumerate(zip(a, b)):
    # The 158M variant (no reference) on random weights may stop generating after two updates (a
    # step with no token to train on: loss and gradient 0, as on 9a1be1c in both layouts): only the
    # tiny runs must have a gradient every step.
    assert all(math.isfinite(v) for v in x) and x[3] > 0 and (x[1] > 0 or not y), f"step {i+1}: {x}"
    vs = f" (one GPU: loss {y[0]:.6g}, grad norm {y[1]:.6g}, reward {y[2]:.4g})" if y else ""
    print(f"{sys.argv[3]} step {i+1}: loss {x[0]:.6g}, grad norm {x[1]:.6g}, reward {x[2]:.4g}; refit {x[3]*1e3:.2f} ms, "
          f"{x[4]/2**20:.1f} MiB gathered per GPU; generation {x[5]:.2f} s{vs}")' \
    "$TMP/$name.m" "$ref" "$name" && echo "ok: $name trains with its refit logged" || fail "$name: $(cat "$TMP/$name.m")"
}
on_gpus tp2-gen1 2 1 "$TMP/rl1.m"
on_gpus dp2-gen2 1 2 "$TMP/rl1.m"
# Experts split otherwise (policy.generation.vllm_cfg.expert_parallel_size): trainer EP 2 ->
# generator EP 1 all-gathers the experts over NCCL; EP 1 (DP 2) -> EP 2 keeps each GPU's block.
on_gpus ep2-gen1 1 1 "$TMP/rl1.m" model.expert_model_parallel_size=2 policy.generation.vllm_cfg.expert_parallel_size=1
on_gpus dp2-genep2 1 1 "$TMP/rl1.m" policy.generation.vllm_cfg.expert_parallel_size=2
on_gpus big-tp2-gen1 2 1 "" "${big[@]}"
on_gpus big-dp2-gen2 1 2 "" "${big[@]}"
finish "generator layouts on 2 GPUs over NCCL"
