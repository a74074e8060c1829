# Shared by the CLI tests that start several ranks (source after lib.sh): how they run mpirun on
# this machine, how they compare a run's losses with another's, and (same_run, mpi) how they check
# a multi-rank run against the single-process reference in $TMP/dp1.
# MPIRUN: Open MPI's mpirun as these tests use it (root allowed, as CI runs; more ranks than cores).
MPIRUN=(mpirun --oversubscribe)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}  # ranks share the cores

# tiny_run: the run the distributed-optimizer, sharded-checkpoint and expert-parallel tests compare
# with one process (super3 tiny pretraining on mock tokens: 6 steps of 8 sequences in micro-batches
# of 2, validation every 2); zero: the distributed optimizer's switch.
tiny_run=("$BIN" super3 pretrain -c tiny dataset.mock=true train.train_iters=6 train.global_batch_size=8
  train.micro_batch_size=2 train.eval_interval=2 train.eval_iters=1 logger.tensorboard_dir=null
  scheduler.lr_warmup_iters=1 scheduler.lr_wsd_decay_iters=3)
zero=(ddp.use_distributed_optimizer=true)

# losses FILE [FROM]: every train (lm loss, MTP depth 1's loss, grad norm) and validation loss of a
# metrics.jsonl from iteration FROM on, one record per line.
losses() {
  python3 -c 'import json,sys
first = int(sys.argv[2])
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("iteration", 0) < first: continue
    if r.get("type") == "train": print("train", r["iteration"], repr(r["lm_loss"]), repr(r.get("mtp_1_loss")), repr(r["grad_norm"]))
    if r.get("type") == "validation": print("valid", r["iteration"], repr(r["lm_loss"]))' "$1" "${2:-0}"
}

# close A B TOL: the lists A and B have the same entries, every number within TOL relative; prints
# the largest difference.
close() {
  python3 -c 'import sys
a, b, tol = open(sys.argv[1]).read().split(), open(sys.argv[2]).read().split(), float(sys.argv[3])
assert len(a) == len(b) and len(a) > 0, (a, b)
worst = 0.0
for x, y in zip(a, b):
    if x == y: continue
    fx, fy = float(x), float(y)
    worst = max(worst, abs(fx - fy) / max(abs(fy), 1e-30))
print(f"max relative loss difference {worst:.3e}")
sys.exit(0 if worst <= tol else 1)' "$1" "$2" "$3"
}

# same_run NAME DIR ITER FROM [ATOL]: DIR's losses from iteration FROM and its iter ITER weights
# equal the single process's in $TMP/dp1 (tolerances of cli.data_parallel: float32 sums in another
# order; ATOL, default 5e-5, the weights' absolute one).
same_run() {
  local name=$1 dir=$2 iter=$3 from=$4 atol=${5:-5e-5}
  # The last record of each step: a run killed after its last save logged steps its rerun repeats.
  losses "$dir/metrics.jsonl" "$from" | awk '{k = $1 " " $2; if (!(k in v)) o[n++] = k; v[k] = $0}
    END {for (i = 0; i < n; i++) print v[o[i]]}' >"$TMP/a.losses"
  losses "$TMP/dp1/metrics.jsonl" "$from" | awk -v last="$iter" '$2 <= last' >"$TMP/b.losses"
  if msg=$(close "$TMP/a.losses" "$TMP/b.losses" 1e-5); then
    echo "ok: $name: losses equal the single process's ($msg)"
  else
    fail "$name: losses differ ($msg): $(paste -d' ' "$TMP/a.losses" "$TMP/b.losses" | head -8)"
  fi
  local it
  it=$(printf 'iter_%07d' "$iter")
  if msg=$(python3 tests/cli/safetensors_diff.py "$dir/$it/model.safetensors" "$TMP/dp1/$it/model.safetensors" "$atol" 1e-4); then
    echo "ok: $name: weights at iteration $iter equal the single process's ($msg)"
  else
    fail "$name: weights at iteration $iter differ: $msg"
  fi
}

# same_run_as REF ATOL NAME DIR ITER FROM: same_run against another single process's run in
# $TMP/REF instead of $TMP/dp1.
same_run_as() {
  local ref=$1 atol=$2
  shift 2
  mv "$TMP/dp1" "$TMP/dp1.keep" && cp -r "$TMP/$ref" "$TMP/dp1"
  same_run "$@" "$atol"
  rm -rf "$TMP/dp1" && mv "$TMP/dp1.keep" "$TMP/dp1"
}

# layout NAME NP OVERRIDES...: the caller's `run` (6 steps) under mpirun to iteration 4
# (train.exit_interval saves a sharded iteration there), logged there once, then same_run against
# $TMP/dp1 (weights within LAYOUT_ATOL, default 5e-5).
layout() {
  local name=$1 np=$2
  shift 2
  if mpi "$np" "$name" checkpoint.save="$TMP/$name" train.exit_interval=4 "$@"; then
    [[ $(grep -cE '^ iteration +4/ +6 ' "$TMP/out.$name") -eq 1 ]] || fail "$name: not one log: $(tail -3 "$TMP/out.$name")"
    same_run "$name" "$TMP/$name" 4 0 "${LAYOUT_ATOL:-5e-5}"
  fi
}

# mpi NP NAME ARGS...: the caller's command `run` (an array) under mpirun; output in $TMP/out.NAME.
mpi() {
  local np=$1 name=$2
  shift 2
  "${MPIRUN[@]}" -np "$np" "${run[@]}" "$@" >"$TMP/out.$name" 2>"$TMP/err.$name"
  local rc=$?
  [[ $rc -eq 0 ]] || { fail "$name: mpirun -np $np: exit $rc: $(tail -5 "$TMP/err.$name")"; return 1; }
}

# bad_layout NAME NP MESSAGE CMD...: a layout that cannot run: one line naming the key (rank 0's),
# exit 2, nothing trained.
bad_layout() {
  local name=$1 np=$2 message=$3
  shift 3
  "${MPIRUN[@]}" -np "$np" "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [[ $rc -ne 2 ]]; then fail "$name: exit $rc, expected 2: $(head -3 "$TMP/err")"; return; fi
  [[ $(grep -c '^error: ' "$TMP/err") -eq 1 ]] || { fail "$name: not one error line: $(grep '^error' "$TMP/err")"; return; }
  grep -qF "error: $message" "$TMP/err" || { fail "$name: stderr was [$(grep '^error' "$TMP/err")], expected [error: $message]"; return; }
  echo "ok: $name"
}

# grpo_setup: the tiny GRPO run the multi-rank tests compare with one process (super3 rl on the
# bundled RL data and tokenizer, prepared here under $TMP/data): 2 steps of 4 prompts x 4
# generations, random initial weights (rewards 0), so an overlong-length penalty gives the rows
# different rewards and the update a gradient. Sets the array `grpo`; grpo_metrics FILE prints each
# step's loss, grad norm, reward, generated tokens and the probability ratio's extrema. The sampling,
# format reward, baseline and learning rate are pinned to the settings these comparisons were built
# on (the tiny recipe's own are tuned for learning from a trained start; at its lr 5e-5 the random
# model's second step samples every row to the length limit: equal rewards, no gradient).
grpo_setup() {
  expect_ok "data prep pretrain (tokenizer)" 'blend: ' "$BIN" super3 data prep pretrain -c tiny output_dir="$TMP/data/pretrain"
  expect_ok "data prep rl" 'manifest: ' "$BIN" super3 data prep rl -c tiny output_dir="$TMP/data/rl" \
    sources.0.generator.num_examples=40 val_rows=8
  grpo=("$BIN" super3 rl -c tiny policy.model_name= policy.tokenizer.name="$TMP/data/pretrain/tokenizer/tokenizer.json"
    data.train_jsonl_fpath="$TMP/data/rl/train.jsonl" data.validation_jsonl_fpath="$TMP/data/rl/val.jsonl"
    grpo.num_prompts_per_step=4 grpo.num_generations_per_prompt=4 policy.train_global_batch_size=16
    policy.train_micro_batch_size=4 policy.generation.max_new_tokens=16 policy.max_total_sequence_length=96
    grpo.max_num_steps=2 grpo.val_period=0 grpo.val_at_start=false checkpointing.save_period=2 policy.generation.top_k=
    grpo.reward_shaping.enabled=true grpo.reward_shaping.overlong_buffer_length=12
    grpo.reward_shaping.overlong_buffer_penalty=1.0 grpo.reward_shaping.max_response_length=16
    env.format_reward=0.2 policy.generation.temperature=1.0 grpo.use_leave_one_out_baseline=true policy.optimizer.lr=1e-4)
}
grpo_metrics() {
  python3 -c 'import json,sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") == "train":
        print(repr(r["loss"]), repr(r["grad_norm"]), repr(r["reward"]), r["generated_tokens"],
              repr(r["probs_ratio_min"]), repr(r["probs_ratio_max"]))' "$1"
}

# grpo_one WHAT ARGS...: the one-process reference of grpo_setup's run with ARGS in $TMP/rl1 (a
# previous one replaced), its grpo_metrics in $TMP/rl1.m (what grpo_same_as_one compares with).
grpo_one() {
  local what=$1
  shift
  rm -rf "$TMP/rl1" "$TMP/rl1.m"
  expect_ok "$what" '^step 2/2 ' "${grpo[@]}" "$@" checkpointing.checkpoint_dir="$TMP/rl1"
  [[ -s "$TMP/rl1/metrics.jsonl" ]] && grpo_metrics "$TMP/rl1/metrics.jsonl" >"$TMP/rl1.m"
}
# grpo_trains: every step of the reference in $TMP/rl1.m had a gradient (else comparing the
# updates with it would prove little).
grpo_trains() {
  awk '{ if ($2 + 0 <= 0) bad = 1 } END { exit bad }' "$TMP/rl1.m" || fail "GRPO: a step without a gradient: $(tr '\n' ';' <"$TMP/rl1.m")"
}

# grpo_mpi WHAT NAME ARGS...: grpo_setup's run with ARGS under mpirun -np 2, checkpoints in
# $TMP/NAME, output in $TMP/out.NAME and $TMP/err.NAME; a failed launch is one FAIL (returns 1).
grpo_mpi() {
  local what=$1 name=$2
  shift 2
  "${MPIRUN[@]}" -np 2 "${grpo[@]}" "$@" checkpointing.checkpoint_dir="$TMP/$name" >"$TMP/out.$name" 2>"$TMP/err.$name"
  local rc=$?
  [[ $rc -eq 0 ]] || { fail "$what, mpirun -np 2: exit $rc: $(tail -5 "$TMP/err.$name")"; return 1; }
}

# grpo_same_as_one WHAT DIR [ATOL]: DIR's GRPO run (grpo_setup's, 2 steps) gives the one-process
# run's ($TMP/rl1, its grpo_metrics in $TMP/rl1.m) losses, grad norms, rewards, generated tokens
# and ratio extrema (to 1e-5 relative), and its final weights (to ATOL, default 1e-4, + 1e-4 |w|).
grpo_same_as_one() {
  local what=$1 dir=$2 atol=${3:-1e-4} msg
  grpo_metrics "$dir/metrics.jsonl" >"$dir.m"
  if msg=$(close "$dir.m" "$TMP/rl1.m" 1e-5); then
    echo "ok: $what: losses, grad norms, rewards, generated tokens and ratio extrema equal one process's ($msg)"
  else
    fail "$what differs ($msg): $(paste -d' ' "$dir.m" "$TMP/rl1.m" | tr '\n' ';')"
  fi
  if msg=$(python3 tests/cli/safetensors_diff.py "$dir/iter_0000002/model.safetensors" \
    "$TMP/rl1/iter_0000002/model.safetensors" "$atol" 1e-4); then
    echo "ok: $what: final weights equal one process's ($msg)"
  else
    fail "$what: final weights differ: $msg"
  fi
}
