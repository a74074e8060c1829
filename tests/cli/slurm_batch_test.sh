#!/usr/bin/env bash
# `--batch PROFILE` against a real Slurm (cli/launch.h): a single-node cluster started by
# scripts/slurm-single-node.sh (munge, slurmctld, slurmd; stopped by process id at the end), then
# `nemotron super3 pretrain -c tiny ... --batch slurm2` writes its sbatch script beside the run,
# submits it, prints the job id; the job (2 tasks, srun --mpi=pmix) trains to the end: the job
# COMPLETED with exit 0, the checkpoint of the last iteration exists, metrics.jsonl has it, the log
# is one (rank 0's) of 2 data-parallel ranks. Then the job is requeued, as Slurm does after a node
# failure or preemption: the same script runs again and resumes from the run's latest checkpoint
# (the run directory would refuse a fresh start); and preempted mid-run by SIGTERM, it saves one
# iteration and its requeue resumes there. --dry-run prints the script and the layout and
# writes nothing; a bad layout is refused before submitting; --run inside an allocation starts the
# ranks with srun. Exit 77 (skipped, reason printed) when the cluster cannot be started here;
# with CI=true that is a failure instead.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

CLUSTER="$TMP/slurm"
trap 'scripts/slurm-single-node.sh stop "$CLUSTER"; rm -rf "$TMP"' EXIT
scripts/slurm-single-node.sh start "$CLUSTER"
rc=$?
if [[ $rc -ne 0 ]]; then
  # In CI (CI=true, root, scripts/install-deps.sh --tests) the cluster must come up: a failure there.
  if [[ "${CI:-}" == "true" ]]; then echo "FAIL: CI=true: the single-node Slurm did not start (exit $rc)"; exit 1; fi
  echo "skipped: no single-node Slurm here (exit $rc)"
  exit 77
fi
export SLURM_CONF="$CLUSTER/slurm.conf"
export OMPI_MCA_btl_vader_single_copy_mechanism=none  # containers without ptrace between processes

cat >"$TMP/env.toml" <<'EOF'
[slurm-base]
executor = "slurm"
partition = "debug"
time = "00:10:00"

[slurm2]
extends = "slurm-base"
nodes = 1
ntasks_per_node = 2
cpus_per_task = 1
startup_commands = ["echo startup on $(hostname -s)"]
EOF

RUN="$TMP/run"
cmd=("$BIN" super3 pretrain -c tiny dataset.mock=true train.train_iters=3 train.global_batch_size=8
  train.micro_batch_size=2 train.eval_interval=3 train.eval_iters=1 checkpoint.save_interval=3
  logger.tensorboard_dir=null scheduler.lr_warmup_iters=1 scheduler.lr_wsd_decay_iters=1 checkpoint.save="$RUN"
  --batch slurm2 --env-file "$TMP/env.toml")

# --dry-run: the script and the rank layout; nothing written or submitted.
expect_ok "--batch --dry-run prints the script and the layout" '^rank layout: DP 2 x .* over 2 ranks' "${cmd[@]}" --dry-run
for want in '^#SBATCH --ntasks-per-node=2$' '^#SBATCH --requeue$' '^#SBATCH --partition=debug$' \
  '^srun --mpi=pmix --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 .* checkpoint.load='; do
  grep -qE -- "$want" "$TMP/out" || fail "--dry-run: no line /$want/"
done
[[ -e "$RUN" ]] && fail "--dry-run created $RUN"

# wait_job ID SECONDS: waits until the job leaves the queue's active states; prints its final state.
wait_job() {
  local id=$1 limit=$2 state=""
  for _ in $(seq $((limit * 2))); do
    state=$(scontrol show job "$id" -o 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
    case "$state" in PENDING | RUNNING | CONFIGURING | COMPLETING | REQUEUED | "") sleep 0.5 ;; *) break ;; esac
  done
  echo "$state"
}

"${cmd[@]}" >"$TMP/out" 2>"$TMP/err"
rc=$?
id=$(sed -n 's/^submitted batch job \([0-9][0-9]*\): .*/\1/p' "$TMP/out")
if [[ $rc -ne 0 || -z "$id" ]]; then
  fail "--batch slurm2: exit $rc, no job id: $(cat "$TMP/out" "$TMP/err" | tail -5)"
  finish "--batch on a real Slurm"
fi
echo "ok: --batch submitted job $id"
script=$(ls "$RUN"/sbatch_*.sh 2>/dev/null | head -1)
[[ -n "$script" ]] && grep -q '^#SBATCH --requeue$' "$script" && echo "ok: the sbatch script is beside the run: $script" ||
  fail "no sbatch script in $RUN: $(ls "$RUN")"
ls "$RUN"/*.tmp >/dev/null 2>&1 && fail "a temporary script was left in $RUN"

state=$(wait_job "$id" 300)
log="$RUN/slurm-$id.out"
job=$(scontrol show job "$id" -o)
if [[ "$state" == COMPLETED ]] && grep -q 'ExitCode=0:0' <<<"$job"; then echo "ok: job $id COMPLETED, exit 0"
else fail "job $id: state $state: $(grep -o 'ExitCode=[^ ]*' <<<"$job"); log: $(tail -5 "$log" 2>/dev/null)"; fi
[[ -f "$RUN/iter_0000003/train_state.json" ]] && echo "ok: the checkpoint of iteration 3 exists" ||
  fail "no checkpoint of iteration 3 in $RUN: $(ls "$RUN")"
last=$(python3 -c 'import json,sys
its = [json.loads(l).get("iteration") for l in open(sys.argv[1]) if json.loads(l).get("type") == "train"]
print(its[-1] if its else "none")' "$RUN/metrics.jsonl" 2>/dev/null)
[[ "$last" == 3 ]] && echo "ok: metrics.jsonl ends at iteration 3" || fail "metrics.jsonl's last train iteration is $last"
[[ $(grep -cE '^ iteration +3/ +3 ' "$log") -eq 1 ]] && grep -q 'data-parallel rank 0 of 2' "$log" &&
  grep -q '^startup on ' "$log" && echo "ok: the job's log is rank 0's of 2 ranks, after the startup command" ||
  fail "the job's log: $(tail -5 "$log")"

# Requeued (a node failure, a preemption): the same script runs again and resumes from the run's
# checkpoint instead of being refused for starting over in a directory that holds a run.
lines_before=$(wc -l <"$log")
if scontrol requeue "$id" 2>"$TMP/err"; then
  # A requeued job waits out a begin-time delay before it is eligible again; skip it here.
  sleep 1
  scontrol update JobId="$id" StartTime=now 2>/dev/null
  state=$(wait_job "$id" 300)
  rerun=$(tail -n +$((lines_before + 1)) "$log")
  if [[ "$state" == COMPLETED ]] && grep -q "^resumed from $RUN/iter_0000003 at iteration 3" <<<"$rerun" &&
    ! grep -q '^error' <<<"$rerun"; then
    echo "ok: the requeued job resumed from iteration 3 and completed"
  else
    fail "requeued job $id: state $state; its log: $(head -8 <<<"$rerun")"
  fi
else
  fail "scontrol requeue $id: $(cat "$TMP/err")"
fi

# Preempted mid-run (SIGTERM to the job's steps, as Slurm sends before a preemption or the time
# limit), then requeued: every rank stops at one saved iteration, and the same script resumes from
# it and trains to the end.
P="$TMP/preempt"
pcmd=("${cmd[@]/checkpoint.save=$RUN/checkpoint.save=$P}")
pcmd=("${pcmd[@]/train.train_iters=3/train.train_iters=40}")
pcmd=("${pcmd[@]/train.eval_interval=3/train.eval_interval=40}")
pcmd=("${pcmd[@]/checkpoint.save_interval=3/checkpoint.save_interval=1000}")
"${pcmd[@]}" >"$TMP/out" 2>"$TMP/err"
id3=$(sed -n 's/^submitted batch job \([0-9][0-9]*\): .*/\1/p' "$TMP/out")
plog="$P/slurm-$id3.out"
for _ in $(seq 240); do grep -qE '^ iteration +5/ +40 ' "$plog" 2>/dev/null && break; sleep 0.5; done
if [[ -z "$id3" ]] || ! grep -qE '^ iteration +5/ +40 ' "$plog" 2>/dev/null; then
  fail "preemption: job ${id3:-none} did not reach iteration 5: $(tail -3 "$plog" 2>/dev/null) $(cat "$TMP/err")"
else
  scancel --signal=TERM "$id3"
  state=$(wait_job "$id3" 120)
  saved=$(cat "$P/latest_checkpointed_iteration.txt" 2>/dev/null)
  if [[ "$saved" =~ ^[0-9]+$ && $saved -ge 5 && $saved -lt 40 ]]; then
    echo "ok: SIGTERM stopped job $id3 ($state) with iteration $saved saved"
    lines_before=$(wc -l <"$plog")
    scontrol requeue "$id3" && sleep 1 && scontrol update JobId="$id3" StartTime=now 2>/dev/null
    state=$(wait_job "$id3" 300)
    rerun=$(tail -n +$((lines_before + 1)) "$plog")
    printf -v it '%07d' "$saved"
    if [[ "$state" == COMPLETED && -f "$P/iter_0000040/train_state.json" ]] &&
      grep -q "^resumed from $P/iter_$it at iteration $saved" <<<"$rerun"; then
      echo "ok: the requeued job resumed from iteration $saved and trained to 40"
    else
      fail "preempted job $id3 after requeue: state $state; $(grep -E 'resumed|error' <<<"$rerun" | head -3)"
    fi
  else
    fail "SIGTERM: job $id3 ($state) saved [$saved]: $(tail -5 "$plog")"
  fi
fi

# A layout the ranks would refuse: one line, exit 2, nothing written or submitted.
expect_error "--batch refuses a bad layout before submitting" \
  "recipes/super3/pretrain/tiny.yaml: train.global_batch_size: 6 is not a multiple of train.micro_batch_size 2 x 2 data-parallel ranks = 4 (every rank runs whole micro-batches; change either, or the number of ranks)" \
  "${cmd[@]/checkpoint.save=$RUN/checkpoint.save=$TMP/bad}" train.global_batch_size=6
[[ -e "$TMP/bad" ]] && fail "--batch with a bad layout wrote $TMP/bad"

# --run inside an allocation (here one sbatch made): srun --mpi=pmix starts the 2 ranks in it.
run_cmd=("${cmd[@]/checkpoint.save=$RUN/checkpoint.save=$TMP/attached}")
run_cmd=("${run_cmd[@]/--batch/--run}")
printf -v wrapped '%q ' "${run_cmd[@]}"
id2=$(sbatch --parsable -N 1 --ntasks-per-node=2 --cpus-per-task=1 -o "$TMP/attached.out" --wrap "$wrapped")
state=$(wait_job "$id2" 300)
if [[ "$state" == COMPLETED && -f "$TMP/attached/iter_0000003/train_state.json" ]] &&
  grep -q '^srun --mpi=pmix --nodes=1 --ntasks-per-node=2 ' "$TMP/attached.out" &&
  grep -q 'data-parallel rank 0 of 2' "$TMP/attached.out"; then
  echo "ok: --run inside an allocation trains 2 ranks through srun"
else
  fail "--run in allocation $id2: state $state: $(tail -5 "$TMP/attached.out")"
fi

finish "--batch on a real single-node Slurm: 2-rank tiny pretrain ran to the end; requeues resume (after the end, after a SIGTERM mid-run)"
