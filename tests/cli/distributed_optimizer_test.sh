#!/usr/bin/env bash
# The distributed optimizer (ddp.use_distributed_optimizer: ZeRO-1, train/adamw.h) under mpirun on
# this machine's cores: `nemotron super3 pretrain -c tiny` (Mamba, attention, MLP, latent MoE with
# expert-bias updates, MTP) for 6 steps with validation. With D ranks each holds 1/D of the Adam
# moments (the float32 store's weights are their own masters), gradients are reduce-scattered and
# the updated values all-gathered, so:
#  - DP2 and DP4 equal the single process within the tolerances of cli.data_parallel (losses 1e-5
#    relative, weights 5e-5 + 1e-4 |w|: float32 sums in another order);
#  - the banner says what a rank holds, and it is 1/D of the single process's state;
#  - a checkpoint saved at DP4 (sharded: each rank writes its pieces) resumes at DP2
#    and in one process, and a single-process checkpoint at DP4, each continuing with the losses
#    and final weights of the uninterrupted single-process run;
#  - LoRA SFT at DP2 (frozen base replicated, adapters sharded) equals one process;
#  - DP4 with small buckets (ddp.bucket_size: each bucket sharded 4 ways and reduce-scattered from
#    the last backward's layer hook) says in its summary that buckets started during the backward,
#    and its checkpoint resumes at DP2 with the default (one) bucket;
#  - on one process the key changes nothing (bit-identical losses); a bad value names the key.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
source "$(dirname "${BASH_SOURCE[0]}")/mpi_lib.sh"

run=("${tiny_run[@]}")

# memory NAME D: the banner's "fp32 moments 1/D per rank: X MiB of Y MiB" with X = Y / D (to the
# padding of the flat buffer to 64 D elements: within 1%).
memory() {
  local name=$1 d=$2 line
  line=$(grep -E "^distributed optimizer \(ddp.use_distributed_optimizer\): fp32 (masters \+ )?moments 1/$d per rank: " "$TMP/out.$name")
  [[ -n "$line" ]] || { fail "$name: no distributed-optimizer line for 1/$d: $(head -8 "$TMP/out.$name")"; return; }
  if msg=$(python3 -c 'import re,sys
x, y = map(float, re.search(r"per rank: ([0-9.]+) MiB of ([0-9.]+) MiB", sys.argv[1]).groups())
d = int(sys.argv[2])
print(f"{x} MiB of {y} MiB per rank, x {d} = {x * d / y:.4f} of the whole")
sys.exit(0 if y > 0 and 1.0 - 0.001 <= x * d / y <= 1.01 else 1)' "$line" "$d"); then
    echo "ok: $name: optimizer state 1/$d per rank ($msg)"
  else
    fail "$name: optimizer state is not 1/$d per rank: $line ($msg)"
  fi
}

# The uninterrupted single process (checkpoints at 2, 4, 6): the reference.
expect_ok "one process" '^ iteration +6/ +6 ' "${run[@]}" checkpoint.save="$TMP/dp1" checkpoint.save_interval=2
grep -q "distributed optimizer" "$TMP/out" && fail "one process: a distributed-optimizer line without data parallelism"
# The key on one process: the same code path, bit for bit.
expect_ok "one process with the key" '^ iteration +6/ +6 ' "${run[@]}" "${zero[@]}" checkpoint.save="$TMP/dp1z" \
  checkpoint.save_interval=0
cmp -s <(losses "$TMP/dp1z/metrics.jsonl") <(losses "$TMP/dp1/metrics.jsonl") &&
  echo "ok: one process: ddp.use_distributed_optimizer changes nothing" ||
  fail "one process: the key changed the losses"

# DP4 stops at iteration 4 (train.exit_interval saves there); DP2 runs to the end.
if mpi 4 dp4 "${zero[@]}" ddp.bucket_size=20000 checkpoint.save="$TMP/dp4" train.exit_interval=4; then
  memory dp4 4
  same_run "DP4" "$TMP/dp4" 4 0
  line=$(grep -E '^gradients reduce-scattered in [0-9]+ bucket' "$TMP/out.dp4")
  if [[ "$line" =~ in\ ([0-9]+)\ bucket.*\ ([0-9]+)\ started\ during ]] && ((BASH_REMATCH[1] > 2 && BASH_REMATCH[2] > 0)); then
    echo "ok: DP4: ${BASH_REMATCH[2]} of ${BASH_REMATCH[1]} sharded buckets reduce-scattered during the last backward"
  else
    fail "DP4: no sharded bucket started during the last backward: ${line:-no summary line}"
  fi
fi
if mpi 2 dp2 "${zero[@]}" checkpoint.save="$TMP/dp2" checkpoint.save_interval=0; then
  memory dp2 2
  same_run "DP2" "$TMP/dp2" 6 0
fi

# The DP4 checkpoint is sharded (every rank its pieces, train/sharded_checkpoint.h); reassembled,
# it has the single process's tensors and shapes.
for f in model optimizer; do
  if python3 -c 'import sys
sys.path.insert(0, "tests/cli")
from safetensors_diff import read
a, b = read(sys.argv[1]), read(sys.argv[2])
sys.exit(0 if {k: v[0] for k, v in a.items()} == {k: v[0] for k, v in b.items()} else 1)' \
    "$TMP/dp4/iter_0000004/$f.safetensors" "$TMP/dp1/iter_0000004/$f.safetensors"; then
    echo "ok: the DP4 checkpoint's $f tensors are the single process's"
  else
    fail "the DP4 checkpoint's $f tensors differ in names or shapes from the single process's"
  fi
done

# The DP4 checkpoint resumed at DP2 and in one process; the single process's at DP4.
if mpi 2 resume2 "${zero[@]}" checkpoint.load="$TMP/dp4" checkpoint.save="$TMP/r2" checkpoint.save_interval=0; then
  grep -q "resumed from $TMP/dp4/iter_0000004 at iteration 4" "$TMP/out.resume2" || fail "DP4 -> DP2: not resumed at 4"
  same_run "DP4 checkpoint resumed at DP2" "$TMP/r2" 6 5
fi
expect_ok "DP4 checkpoint in one process" '^ iteration +6/ +6 ' "${run[@]}" checkpoint.load="$TMP/dp4" \
  checkpoint.save="$TMP/r1" checkpoint.save_interval=0
same_run "DP4 checkpoint resumed in one process" "$TMP/r1" 6 5
if mpi 4 resume4 "${zero[@]}" checkpoint.load="$TMP/dp1/iter_0000004" checkpoint.save="$TMP/r4" \
  checkpoint.save_interval=0; then
  same_run "single-process checkpoint resumed at DP4" "$TMP/r4" 6 5
fi

# LoRA SFT (frozen base replicated, adapters sharded, adapters-only checkpoints) at DP2 against
# one process: the same losses and adapters.
sft_setup 1 60 4
lora=("$BIN" super3 sft -c tiny_lora "${sft_data[@]}"
  train.global_batch_size=4 train.micro_batch_size=1 train.train_iters=3 train.eval_interval=0 train.eval_iters=0
  scheduler.lr_warmup_iters=1 logger.tensorboard_dir=null)
expect_ok "LoRA one process" '^ iteration +3/ +3 ' "${lora[@]}" checkpoint.save="$TMP/l1" checkpoint.load="$TMP/l1"
if "${MPIRUN[@]}" -np 2 "${lora[@]}" "${zero[@]}" checkpoint.save="$TMP/l2" checkpoint.load="$TMP/l2" \
  >"$TMP/out.l2" 2>"$TMP/err.l2"; then
  memory l2 2
  losses "$TMP/l2/metrics.jsonl" >"$TMP/l2.losses"
  losses "$TMP/l1/metrics.jsonl" >"$TMP/l1.losses"
  if msg=$(close "$TMP/l2.losses" "$TMP/l1.losses" 1e-5); then echo "ok: LoRA DP2: losses equal one process's ($msg)"; else
    fail "LoRA DP2: losses differ ($msg)"; fi
  for f in model optimizer; do
    if msg=$(python3 tests/cli/safetensors_diff.py "$TMP/l2/iter_0000003/$f.safetensors" "$TMP/l1/iter_0000003/$f.safetensors" \
      5e-5 1e-3); then echo "ok: LoRA DP2: $f.safetensors equals one process's ($msg)"; else fail "LoRA DP2: $f differs: $msg"; fi
  done
else
  fail "LoRA DP2: exit $?: $(tail -5 "$TMP/err.l2")"
fi

expect_error "a bad value names the key" \
  "recipes/super3/pretrain/tiny.yaml: ddp.use_distributed_optimizer: expected true or false, got \"sometimes\"" \
  "${run[@]}" ddp.use_distributed_optimizer=sometimes
expect_error "a bad bucket size names the key" "recipes/super3/pretrain/tiny.yaml: ddp.bucket_size: expected a positive integer, got 0" \
  "${run[@]}" ddp.bucket_size=0

finish "the distributed optimizer at DP2 and DP4 equals one process with 1/D of the state per rank; checkpoints move between DP4, DP2 and one process; LoRA at DP2"
