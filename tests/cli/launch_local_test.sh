#!/usr/bin/env bash
# `--run PROFILE` with executor local (cli/launch.h): `nemotron super3 pretrain -c tiny --run local2`
# starts the same command as 2 ranks under mpirun, without the user typing mpirun; its losses equal
# the single process's within 1e-5 relative (the same global batch split over 2 data-parallel
# ranks, as tests/cli/data_parallel_test.sh shows for mpirun by hand). Then: the exit code of a
# failing rank comes back through mpirun, --dry-run prints the command and the rank layout and
# runs nothing, env.toml is found walking up, and bad profiles are one line naming file, profile
# and key, exit 2.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
source "$(dirname "${BASH_SOURCE[0]}")/mpi_lib.sh"

cat >"$TMP/env.toml" <<'EOF'
[local2]
executor = "local"
nproc_per_node = 2

[local2-startup]
extends = "local2"
startup_commands = ["echo startup-ran-once"]

[cluster]
executor = "slurm"
nodes = 1
ntasks_per_node = 2

[bad]
executor = "local"
nproc_per_node = "two"
EOF

run=("$BIN" super3 pretrain -c tiny dataset.mock=true train.train_iters=3 train.global_batch_size=8
  train.micro_batch_size=2 train.eval_interval=3 train.eval_iters=1 checkpoint.save_interval=0 logger.tensorboard_dir=null
  scheduler.lr_warmup_iters=1 scheduler.lr_wsd_decay_iters=1)

expect_ok "one process" '^ iteration +3/ +3 ' "${run[@]}" checkpoint.save="$TMP/dp1"
losses "$TMP/dp1/metrics.jsonl" >"$TMP/dp1.losses"

# --run local2: 2 ranks through mpirun, started by nemotron itself; one log (rank 0's).
"${run[@]}" checkpoint.save="$TMP/dp2" --run local2 --env-file "$TMP/env.toml" >"$TMP/out" 2>"$TMP/err"
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "--run local2: exit $rc: $(tail -5 "$TMP/err")"
else
  grep -q '^--run local2: profile \[local2\] of .*, executor local, 2 ranks' "$TMP/out" || fail "--run local2: no launch line: $(head -3 "$TMP/out")"
  grep -qE '^mpirun -np 2 .*super3 pretrain -c tiny ' "$TMP/out" || fail "--run local2: the mpirun command is not printed"
  [[ $(grep -cE '^ iteration +3/ +3 ' "$TMP/out") -eq 1 ]] || fail "--run local2: not one log: $(tail -3 "$TMP/out")"
  grep -q "data-parallel rank 0 of 2" "$TMP/out" || fail "--run local2: the run is not 2 data-parallel ranks"
  losses "$TMP/dp2/metrics.jsonl" >"$TMP/dp2.losses"
  if msg=$(close "$TMP/dp2.losses" "$TMP/dp1.losses" 1e-5); then
    echo "ok: --run local2 trains 2 ranks whose losses equal the single process's ($msg)"
  else
    fail "--run local2 losses differ ($msg): $(paste -d' ' "$TMP/dp2.losses" "$TMP/dp1.losses")"
  fi
fi

# Startup commands run once, before mpirun.
"${run[@]}" train.train_iters=1 checkpoint.save="$TMP/startup" --run local2-startup --env-file "$TMP/env.toml" >"$TMP/out" 2>"$TMP/err"
rc=$?
if [[ $rc -eq 0 && $(grep -c '^startup-ran-once$' "$TMP/out") -eq 1 ]]; then echo "ok: startup_commands ran once before the ranks"
else fail "startup_commands: exit $rc, $(grep -c startup-ran-once "$TMP/out") lines: $(tail -3 "$TMP/err")"; fi

# A rank's failure comes back as the command's exit code (2: bad input the ranks find, here data
# that does not exist: only the ranks open it).
"${run[@]}" dataset.mock=false dataset.per_split_data_args_path="$TMP/nope/blend.json" checkpoint.save="$TMP/badrun" \
  --run local2 --env-file "$TMP/env.toml" >"$TMP/out" 2>"$TMP/err"
rc=$?
if [[ $rc -eq 2 ]] && grep -qE '^mpirun -np 2 ' "$TMP/out" && grep -q '^error: .*dataset.per_split_data_args_path: .* does not exist' "$TMP/err"; then
  echo "ok: a failing rank's exit code 2 and error come back through --run"
else
  fail "failing rank: exit $rc (expected 2): $(grep error "$TMP/err" | head -3)"
fi

# A layout the ranks would refuse is refused before mpirun starts: one line, exit 2, no stdout.
expect_error "a bad layout before anything starts" \
  "recipes/super3/pretrain/tiny.yaml: train.global_batch_size: 6 is not a multiple of train.micro_batch_size 2 x 2 data-parallel ranks = 4 (every rank runs whole micro-batches; change either, or the number of ranks)" \
  "${run[@]}" train.global_batch_size=6 checkpoint.save="$TMP/badrun" --run local2 --env-file "$TMP/env.toml"

# --dry-run: the command and the rank layout of 2 ranks; nothing runs or is written.
expect_ok "--dry-run --run local2 prints mpirun and the rank layout" '^rank layout: DP 2 x .* over 2 ranks' \
  "${run[@]}" checkpoint.save="$TMP/dry" --run local2 --env-file "$TMP/env.toml" --dry-run
grep -qE '^mpirun -np 2 ' "$TMP/out" || fail "--dry-run: no mpirun line"
grep -qE '^  rank 1 \(node 0, GPU 1\): dp 1' "$TMP/out" || fail "--dry-run: no rank table: $(grep -A3 'rank layout' "$TMP/out")"
[[ -e "$TMP/dry" ]] && fail "--dry-run wrote $TMP/dry"

# rl and sft take --run too (add_training_command): their dry runs plan for the profile's 2 ranks.
for stage in sft rl; do
  expect_ok "--dry-run $stage --run local2 shows 2 ranks" '^rank layout: DP 2 x .* over 2 ranks' \
    "$BIN" super3 $stage -c tiny --run local2 --env-file "$TMP/env.toml" --dry-run
done

# env.toml found walking up from the current directory (no --env-file).
mkdir -p "$TMP/a/b"
(cd "$TMP/a/b" && cp "$TMP/env.toml" "$TMP/a/env.toml" &&
  "${run[@]}" checkpoint.save="$TMP/dry" --run local2 --dry-run >"$TMP/out" 2>"$TMP/err")
grep -qF -- "--run local2: profile [local2] of $TMP/a/env.toml" "$TMP/out" && echo "ok: env.toml found walking up" ||
  fail "env.toml walking up: $(head -2 "$TMP/out") $(cat "$TMP/err")"

# Bad input: one line, exit 2, before anything starts.
expect_error "a bad key type" "$TMP/env.toml: [bad] nproc_per_node: expected a positive integer, got \"two\"" \
  "${run[@]}" --run bad --env-file "$TMP/env.toml"
expect_error "an unknown profile" "$TMP/env.toml: no profile [nope] (profiles: bad, cluster, local2, local2-startup)" \
  "${run[@]}" --run nope --env-file "$TMP/env.toml"
expect_error "--batch on a local profile" \
  "$TMP/env.toml: [local2] executor: --batch submits to Slurm, the profile's executor is \"local\" (use --run local2 to run attached)" \
  "${run[@]}" --batch local2 --env-file "$TMP/env.toml"
expect_error "--run slurm outside an allocation" \
  "$TMP/env.toml: [cluster]: --run with executor slurm runs inside an allocation, and SLURM_JOB_ID is not set (salloc -N 1 --ntasks-per-node 2 first, or submit with --batch cluster)" \
  env -u SLURM_JOB_ID "${run[@]}" --run cluster --env-file "$TMP/env.toml"
expect_usage_error "--run with --batch" 'excludes' "${run[@]}" --run local2 --batch cluster --env-file "$TMP/env.toml"
(cd / && "${run[@]}" --run local2 >"$TMP/out" 2>"$TMP/err")
[[ $? -eq 2 ]] && grep -q '^error: --run local2: no env.toml in / or any directory above it' "$TMP/err" &&
  echo "ok: no env.toml found" || fail "no env.toml: $(cat "$TMP/err")"

finish "--run with executor local: 2 ranks through mpirun equal one process; exit codes, dry run, bad profiles"
