#!/usr/bin/env bash
# Sharded checkpoints (train/sharded_checkpoint.h) under mpirun on this machine's cores, with
# `nemotron super3 pretrain -c tiny` (Mamba, attention, MLP, latent MoE, MTP), 6 steps:
#  - DP4 with the distributed optimizer saves a sharded iteration: 4 rank files, train_state.json
#    format 2 with sizes and content hashes, no gathered model.safetensors; its tensors, read
#    back by an independent reader (tests/cli/safetensors_diff.py), equal the single process's;
#  - it resumes at DP2 (with and without the distributed optimizer) and in one process, each
#    continuing with the uninterrupted single-process run's losses and final weights;
#  - `convert export` gathers it into Hugging Face format (the single process's export);
#  - a rank killed mid-save (NEMOTRON_TEST_CRASH_AT): the previous iteration stays the latest,
#    and the rerun resumes from it and ends with the uninterrupted run's losses;
#  - SIGTERM to every rank (as Slurm sends it) saves one consistent iteration and exits; a
#    second run resumes from it;
#  - the checkpoint carries the run's tokenizer, so generate needs no --tokenizer; a changed rank
#    file is refused by its content hash.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
source "$(dirname "${BASH_SOURCE[0]}")/mpi_lib.sh"

run=("${tiny_run[@]}")

# The uninterrupted single process (single-file checkpoints at 2, 4, 6): the reference.
expect_ok "one process" '^ iteration +6/ +6 ' "${run[@]}" checkpoint.save="$TMP/dp1" checkpoint.save_interval=2

# DP4, distributed optimizer: stops at iteration 4 (train.exit_interval saves there).
if mpi 4 dp4 "${zero[@]}" checkpoint.save="$TMP/dp4" train.exit_interval=4; then
  it4="$TMP/dp4/iter_0000004"
  if python3 -c 'import json,os,sys
d = sys.argv[1]
s = json.load(open(os.path.join(d, "train_state.json")))
ranks = ["rank_%05d.safetensors" % r for r in range(4)]
assert s["format_version"] == 2 and s["sharded"] == {"world_size": 4, "rank_files": ranks}, s.get("sharded")
for f in ranks + ["config.yaml"]:
    assert s["files"][f] == os.path.getsize(os.path.join(d, f)), f
    assert s["file_hashes"][f].startswith("xxh64:"), f
assert not os.path.exists(os.path.join(d, "model.safetensors")) and not os.path.exists(os.path.join(d, "optimizer.safetensors"))
assert all(os.path.getsize(os.path.join(d, f)) > 1000 for f in ranks)' "$it4"; then
    echo "ok: DP4 wrote a sharded iteration: 4 rank files, sizes and hashes in train_state.json, nothing gathered"
  else
    fail "DP4: not the sharded layout: $(ls "$it4")"
  fi
  same_run "DP4 (sharded)" "$TMP/dp4" 4 0
  # The moments: the DP4 ranks' pieces reassembled equal the single process's moments.
  if msg=$(python3 tests/cli/safetensors_diff.py "$it4/optimizer.safetensors" "$TMP/dp1/iter_0000004/optimizer.safetensors" \
    1e-6 1e-3); then echo "ok: DP4 moments reassembled equal the single process's ($msg)"; else
    fail "DP4 moments differ: $msg"; fi
fi

# The DP4 checkpoint resumed at DP2 (sharded optimizer and plain), in one process.
if mpi 2 resume2 "${zero[@]}" checkpoint.load="$TMP/dp4" checkpoint.save="$TMP/r2" checkpoint.save_interval=0; then
  grep -q "resumed from $TMP/dp4/iter_0000004 at iteration 4" "$TMP/out.resume2" || fail "DP4 -> DP2: not resumed at 4"
  same_run "DP4 checkpoint resumed at DP2 with the distributed optimizer" "$TMP/r2" 6 5
fi
if mpi 2 resume2plain checkpoint.load="$TMP/dp4" checkpoint.save="$TMP/r2p" checkpoint.save_interval=0; then
  same_run "DP4 checkpoint resumed at DP2 without it" "$TMP/r2p" 6 5
fi
expect_ok "DP4 checkpoint in one process" '^ iteration +6/ +6 ' "${run[@]}" checkpoint.load="$TMP/dp4" \
  checkpoint.save="$TMP/r1" checkpoint.save_interval=0
same_run "DP4 checkpoint resumed in one process" "$TMP/r1" 6 5

# convert export gathers the sharded iteration into Hugging Face format.
expect_ok "convert export of DP4" 'wrote' "$BIN" convert export --checkpoint "$TMP/dp4" --out "$TMP/hf4"
expect_ok "convert export of one process" 'wrote' "$BIN" convert export --checkpoint "$TMP/dp1/iter_0000004" --out "$TMP/hf1"
if msg=$(python3 tests/cli/safetensors_diff.py "$TMP/hf4/model.safetensors" "$TMP/hf1/model.safetensors" 5e-5 1e-4); then
  echo "ok: the DP4 export equals the single process's ($msg)"
else
  fail "the DP4 export differs: $msg"
fi

# A rank killed mid-save (rank 1, at its second save: iteration 4): the tracker keeps iteration 2,
# and the same command resumes from it and ends as the uninterrupted run.
NEMOTRON_TEST_CRASH_AT=rank_file:1:2 "${MPIRUN[@]}" -np 2 "${run[@]}" "${zero[@]}" checkpoint.save="$TMP/k" \
  checkpoint.save_interval=2 >"$TMP/out.k" 2>"$TMP/err.k"
rc=$?
if [[ $rc -ne 0 && "$(cat "$TMP/k/latest_checkpointed_iteration.txt" 2>/dev/null)" == 2 && ! -e "$TMP/k/iter_0000004" ]] &&
  grep -q "killing this rank at save stage rank_file" "$TMP/err.k"; then
  echo "ok: a rank killed mid-save (exit $rc): the tracker still names iteration 2, no iteration 4"
else
  fail "kill mid-save: exit $rc, tracker $(cat "$TMP/k/latest_checkpointed_iteration.txt" 2>/dev/null): $(ls "$TMP/k") $(tail -3 "$TMP/err.k")"
fi
if mpi 2 k2 "${zero[@]}" checkpoint.save="$TMP/k" checkpoint.load="$TMP/k" checkpoint.save_interval=2; then
  grep -q "resumed from $TMP/k/iter_0000002 at iteration 2" "$TMP/out.k2" || fail "after the kill: not resumed at 2: $(head -5 "$TMP/out.k2")"
  same_run "after a rank killed mid-save, resumed" "$TMP/k" 6 3
fi

# SIGTERM to every rank mid-run: one consistent iteration saved, exit; a second run resumes it.
long=("${run[@]/train.train_iters=6/train.train_iters=400}")
"${MPIRUN[@]}" -np 2 "${long[@]}" "${zero[@]}" checkpoint.save="$TMP/t" checkpoint.save_interval=0 \
  >"$TMP/out.t" 2>"$TMP/err.t" &
mpid=$!
for _ in $(seq 600); do grep -qE '^ iteration +3/' "$TMP/out.t" 2>/dev/null && break; sleep 0.1; done
ranks=$(pgrep -P "$mpid")
[[ $(wc -w <<<"$ranks") -eq 2 ]] || fail "SIGTERM: expected the 2 ranks as mpirun's children, got [$ranks]"
kill -TERM $ranks
wait "$mpid"
rc=$?
saved=$(cat "$TMP/t/latest_checkpointed_iteration.txt" 2>/dev/null)
if [[ "$saved" =~ ^[0-9]+$ && $saved -ge 3 && $saved -lt 400 ]] && grep -q "received SIGTERM" "$TMP/out.t" &&
  python3 -c 'import json,sys; s = json.load(open(sys.argv[1])); assert s["sharded"]["world_size"] == 2' \
    "$(printf '%s/iter_%07d/train_state.json' "$TMP/t" "$saved")"; then
  echo "ok: SIGTERM on every rank: iteration $saved saved (sharded, committed), exit $rc"
  resume=("${long[@]/train.train_iters=400/train.train_iters=$((saved + 2))}")
  if "${MPIRUN[@]}" -np 2 "${resume[@]}" "${zero[@]}" checkpoint.save="$TMP/t" checkpoint.load="$TMP/t" \
    >"$TMP/out.t2" 2>"$TMP/err.t2" && grep -q "resumed from $(printf '%s/iter_%07d' "$TMP/t" "$saved") at iteration $saved" "$TMP/out.t2" &&
    grep -qE "^ iteration +$((saved + 2))/" "$TMP/out.t2"; then
    echo "ok: the second run resumed from iteration $saved and trained to $((saved + 2))"
  else
    fail "after SIGTERM: the second run did not resume from $saved: $(head -5 "$TMP/out.t2") $(tail -3 "$TMP/err.t2")"
  fi
else
  fail "SIGTERM on every rank: exit $rc, saved [$saved]: $(tail -3 "$TMP/out.t") $(tail -3 "$TMP/err.t")"
fi

# The tokenizer travels with the checkpoint (pretraining on prepared data at DP2): generate needs
# no --tokenizer.
expect_ok "data prep pretrain" 'blend: ' "$BIN" super3 data prep pretrain -c tiny output_dir="$TMP/prep"
if "${MPIRUN[@]}" -np 2 "$BIN" super3 pretrain -c tiny dataset.per_split_data_args_path="$TMP/prep/blend.json" \
  train.train_iters=1 train.eval_iters=0 train.eval_interval=0 scheduler.lr_warmup_iters=0 scheduler.lr_wsd_decay_iters=1 \
  checkpoint.save="$TMP/p" logger.tensorboard_dir=null >"$TMP/out.p" 2>"$TMP/err.p"; then
  cmp -s "$TMP/p/iter_0000001/tokenizer/tokenizer.json" "$TMP/prep/tokenizer/tokenizer.json" &&
    grep -q '"tokenizer/tokenizer.json"' "$TMP/p/iter_0000001/train_state.json" &&
    echo "ok: the checkpoint carries the run's tokenizer, listed in train_state.json" ||
    fail "no tokenizer in $TMP/p/iter_0000001: $(ls "$TMP/p/iter_0000001")"
  expect_ok "generate from the sharded checkpoint without --tokenizer" '.' "$BIN" generate --checkpoint "$TMP/p" \
    --prompt "2+2=" --max-new-tokens 3 --temperature 0
else
  fail "DP2 pretrain on prepared data: $(tail -3 "$TMP/err.p")"
fi

# A rank file changed after the save: refused by its content hash, naming the file.
if [[ -f "$TMP/dp4/iter_0000004/rank_00002.safetensors" ]]; then
  printf '\x7f' | dd of="$TMP/dp4/iter_0000004/rank_00002.safetensors" bs=1 seek=$(($(stat -c %s "$TMP/dp4/iter_0000004/rank_00002.safetensors") - 3)) conv=notrunc 2>/dev/null
  "${run[@]}" checkpoint.load="$TMP/dp4" checkpoint.save="$TMP/bad" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  [[ $rc -eq 2 ]] && grep -q "^error: $TMP/dp4/iter_0000004/rank_00002.safetensors: content hash xxh64:" "$TMP/err" &&
    echo "ok: a changed rank file is refused by its content hash" || fail "changed rank file: exit $rc: $(cat "$TMP/err")"
fi

finish "sharded checkpoints: DP4 -> DP2 / one process / HF export with the uninterrupted run's losses; a rank killed mid-save; SIGTERM on every rank; tokenizer carried; hashes checked"
