#!/usr/bin/env bash
# `nemotron serve --expert-parallel-size E` (issue 22) as users start it: `mpirun -np T x E`, the
# tiny super3 checkpoint's 4 routed experts split over E data ranks, rank 0 serving HTTP and handing
# each request to the data rank running the fewest, every engine stepping in lockstep (one without
# requests steps idle for the others' MoE exchange) and rank 0 gathering the other data ranks'
# tokens each step. Against the one-process server at temperature 0: a completion, a chat, an echo
# with log-probs, a seeded n = 2 (its choices on one data rank, as vLLM keeps a request's samples on
# one engine) and a stream, one at a time (data rank 1 without requests), then a completion with
# log-probs beside a long stream (on data rank 1); 7 requests at once, streams among them (also at EP 2 x TP 2 over 4
# ranks, and with --scheduler-delay-factor); two streams on both data ranks whose clients leave
# mid-stream (their text a prefix of the whole stream's; data rank 0 idle while rank 1 goes on).
# The stop line counts each data rank's requests; SIGTERM ends every rank; `--run` passes the size
# on; an engine failure on one rank (data rank 1, rank 0, a tensor rank, rank 0 at TP 2) ends every
# rank within seconds with its message, logged once, and no stop line reading like a clean stop
# (one process logs it once and keeps answering 500); layouts that cannot run (a dense model among
# them) are one line naming the flags, exit 2.
# Usage: serve_expert_parallel_test.sh path/to/nemotron
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
source "$(dirname "${BASH_SOURCE[0]}")/mpi_lib.sh"
source "$ROOT/tests/cli/serve_lib.sh"

DENSE=tests/fixtures/hf/dense
client() { python3 "$ROOT/tests/cli/serve_ep_client.py" "$1" "$URL"; }
# same NAME A B: the files hold the same answers.
same() {
  if [[ -s "$2" ]] && cmp -s "$2" "$3"; then echo "ok: $1"; else fail "$1: $(diff "$2" "$3" | head -8)"; fi
}
params_of() { grep -oE '^model: .* [0-9]+ parameters' "$1" | grep -oE '[0-9]+ parameters'; }

expect_ok "pretrain 2 steps" '^ iteration +2/ +2 ' "$BIN" super3 pretrain -c tiny dataset.mock=true \
  dataset.seq_length=32 train.global_batch_size=2 train.micro_batch_size=2 train.train_iters=2 train.eval_iters=0 \
  train.eval_interval=0 scheduler.lr_warmup_iters=1 scheduler.lr_wsd_decay_iters=0 checkpoint.save="$TMP/tiny"
SERVE=(--checkpoint "$TMP/tiny" --tokenizer $DENSE/tokenizer.json --served-model-name m --max-seq-len 512)

# The one-process server's answers.
if start_server "${SERVE[@]}" --max-slots 4; then
  client queries >"$TMP/queries1" && client burst >"$TMP/burst1" && client full >"$TMP/full1" ||
    fail "one process: the client failed"
  stop_server TERM
  cp "$TMP/server.log" "$TMP/server1.log"
fi

# Open MPI 4's mpirun answers a SIGTERM by sending the ranks SIGCONT, then SIGTERM a second later,
# then SIGKILL a second after that (odls_base_sigkill_timeout, default 1 s): rank 0 has about one
# second to stop the server and print its stop line. On a loaded 2-core CI machine the 4-rank
# server once took longer and was killed before its line (session 19). The SIGTERM checks below
# are about our stop path, not that second: give the ranks 5 s.
MPIRUN_STOP=("${MPIRUN[@]}" --mca odls_base_sigkill_timeout 5)
SERVE_LAUNCH=("${MPIRUN_STOP[@]}" -np 2)
# EP 2: requests one at a time (data rank 1 has none), a pair (its second on data rank 1), then two
# clients leaving mid-stream, then SIGTERM.
if start_server "${SERVE[@]}" --max-slots 4 --expert-parallel-size 2; then
  grep -q '^expert parallel: 2 data ranks x 1 tensor ranks (rank 0 serves HTTP' "$TMP/server.log" ||
    fail "serve EP 2: no layout line: $(head -5 "$TMP/server.log")"
  [[ -n "$(params_of "$TMP/server1.log")" && "$(params_of "$TMP/server.log")" == "$(params_of "$TMP/server1.log")" ]] ||
    fail "serve EP 2 counts $(params_of "$TMP/server.log"), one process $(params_of "$TMP/server1.log")"
  client queries >"$TMP/queries2" || fail "serve EP 2: queries failed"
  same "serve EP 2, one request at a time and a pair = one process (completion, chat, echo, seeded n = 2, stream; log-probs on data rank 1)" \
    "$TMP/queries1" "$TMP/queries2"
  if client leave >"$TMP/leave2"; then
    python3 - "$TMP/leave2" "$TMP/full1" <<'PY' && echo "ok: serve EP 2: two clients leave mid-stream (data ranks 0 and 1), their text so far the one process's" || fail "serve EP 2 leave: $(cat "$TMP/leave2")"
import ast, sys
partial = [ast.literal_eval(l) for l in open(sys.argv[1])]
whole = [ast.literal_eval(l) for l in open(sys.argv[2])]
assert len(partial) == len(whole) == 2, (partial, whole)
for p, w in zip(partial, whole):
    assert p and w.startswith(p) and len(p) < len(w), (p, w)
PY
  else
    fail "serve EP 2: leave failed"
  fi
  ask_after() { client queries >"$TMP/queries3" && same "serve EP 2 after clients left = one process" "$TMP/queries1" "$TMP/queries3"; }
  ask_after
  kill -TERM $SERVER_PID
  for ((i = 0; i < 300; ++i)); do kill -0 $SERVER_PID 2>/dev/null || break; sleep 0.1; done
  if kill -0 $SERVER_PID 2>/dev/null; then fail "serve EP 2: still running 30 s after SIGTERM"; else
    # queries: 6 requests (the n = 2's both choices) and the pair's stream on data rank 0, the
    # pair's second on 1; leave: one each; queries again. A split n = 2 would read 13, 5.
    grep -q '^stopped by SIGTERM: served 18 requests (2 cancelled), .*; generating requests by data rank: 15, 3$' \
      "$TMP/server.log" && echo "ok: serve EP 2 stops every rank on SIGTERM; requests by data rank 15, 3 (an n = 2 on one)" ||
      fail "serve EP 2 stop: $(tail -3 "$TMP/server.log")"
  fi
  wait $SERVER_PID 2>/dev/null
fi

# burst NAME FLAGS...: 7 requests at once on an expert-parallel server (SLOTS slots per data rank,
# default 4) = the one process's answers.
burst() {
  local name=$1
  shift
  start_server "${SERVE[@]}" --max-slots "${SLOTS:-4}" "$@" || return
  if client burst >"$TMP/burst.$name"; then
    same "serve $name: 7 requests at once (streams, log-probs, n = 2) = one process" "$TMP/burst1" "$TMP/burst.$name"
  else
    fail "serve $name: burst failed"
  fi
  stop_server TERM  # (mpirun's exit status, not the ranks', is what comes back)
  local spread
  spread=$(sed -nE 's/^stopped by SIGTERM: served .*; generating requests by data rank: ([0-9]+, [0-9]+)$/\1/p' "$TMP/server.log")
  [[ -n "$spread" ]] && echo "ok: serve $name stops on SIGTERM; generating requests by data rank: $spread" ||
    fail "serve $name: no stop line with the requests by data rank: $(tail -2 "$TMP/server.log")"
}
burst "EP 2" --expert-parallel-size 2
# 2 slots a data rank: requests queue while others decode, so each data rank weighs the delay.
SLOTS=2 burst "EP 2, 2 slots, admissions delayed" --expert-parallel-size 2 --scheduler-delay-factor 0.5
SERVE_LAUNCH=("${MPIRUN_STOP[@]}" -np 4)
burst "EP 2 x TP 2" --expert-parallel-size 2 --tensor-parallel-size 2 &&
  grep -q '^expert parallel: 2 data ranks x 2 tensor ranks' "$TMP/server.log" ||
  fail "serve EP 2 x TP 2: no layout line: $(head -5 "$TMP/server.log")"
SERVE_LAUNCH=()

# --run PROFILE: the profile's 2 ranks are 2 data ranks of tensor size 1.
printf '[local2]\nexecutor = "local"\nnproc_per_node = 2\n' >"$TMP/env.toml"
if start_server "${SERVE[@]}" --max-slots 4 --expert-parallel-size 2 --run local2 --env-file "$TMP/env.toml"; then
  grep -q '^expert parallel: 2 data ranks x 1 tensor ranks' "$TMP/server.log" ||
    fail "serve --run local2 at EP 2: $(head -5 "$TMP/server.log")"
  client queries >"$TMP/queries.run" && same "serve --run local2 --expert-parallel-size 2 = one process" \
    "$TMP/queries1" "$TMP/queries.run"
  stop_server TERM
fi

# An engine failure on one rank (NEMOTRON_TEST_ENGINE_FAIL=RANK:STEP: that rank's engine throws
# before its STEP-th step, mid-request) ends every rank within seconds with that rank's message and
# a non-zero exit, rather than leave the others waiting in its collectives: rank 0's client is
# answered 500 with the error; another rank's failure ends the job under the client (its
# connection closes, no answer).
# engine_fails NAME RANK FLAGS...: a 40-token completion on a 2-rank server whose rank RANK fails.
engine_fails() {
  local name=$1 rank=$2
  shift 2
  SERVE_LAUNCH=(env NEMOTRON_TEST_ENGINE_FAIL="$rank:3" "${MPIRUN[@]}" -np 2)
  start_server "${SERVE[@]}" --max-slots 4 "$@" || return
  local t0=$SECONDS i code
  code=$(curl -s -m 60 -o "$TMP/fail.body" -w '%{http_code}' "$URL/v1/completions" -H 'Content-Type: application/json' \
    -d '{"model": "m", "prompt": "Once upon a time", "max_tokens": 40, "temperature": 0}')
  for ((i = 0; i < 300; ++i)); do kill -0 $SERVER_PID 2>/dev/null || break; sleep 0.1; done
  if kill -0 $SERVER_PID 2>/dev/null; then
    fail "serve $name: rank $rank's engine failed and the job still runs $((SECONDS - t0)) s later: $(tail -3 "$TMP/server.log")"
    kill -KILL $SERVER_PID
    wait $SERVER_PID 2>/dev/null
    return
  fi
  wait $SERVER_PID
  local rc=$? message="the generation engine failed: NEMOTRON_TEST_ENGINE_FAIL: rank $rank fails at its engine step 3"
  # The message once: the failed rank's `error:` line (its worker does not print it first).
  [[ $rc -ne 0 ]] && grep -q "^error: rank $rank of 2: $message\$" "$TMP/server.log" &&
    [[ $(grep -c "NEMOTRON_TEST_ENGINE_FAIL: rank $rank fails" "$TMP/server.log") -eq 1 ]] &&
    echo "ok: serve $name: rank $rank's engine failure ends every rank in $((SECONDS - t0)) s (exit $rc) with its message, once" ||
    fail "serve $name: rank $rank's failure: exit $rc, log: $(grep -v '^POST' "$TMP/server.log" | tail -4)"
  # No line that reads like a clean stop: rank 0's stop line (when it gets to print one) names the
  # failure, whichever side of the error line mpirun puts it.
  if grep -qE '^stopped(:| by SIG)' "$TMP/server.log"; then
    fail "serve $name: a failed run with a clean stop line: $(grep '^stopped' "$TMP/server.log")"
  elif [[ $rank -eq 0 ]] && ! grep -q '^stopped by the engine failure: served ' "$TMP/server.log"; then
    fail "serve $name: rank 0 failed and stopped the server, with no stop line naming the failure: $(grep -v '^POST' "$TMP/server.log" | tail -4)"
  else
    echo "ok: serve $name: no clean stop line ($(grep '^stopped' "$TMP/server.log" || echo 'no stop line'))"
  fi
  if [[ $rank -eq 0 ]]; then
    [[ $code == 500 ]] && grep -q "NEMOTRON_TEST_ENGINE_FAIL: rank 0 fails" "$TMP/fail.body" &&
      echo "ok: serve $name: the client is answered 500 with the error" ||
      fail "serve $name: the client got $code: $(head -c 300 "$TMP/fail.body")"
  else
    [[ $code != 200 ]] && echo "ok: serve $name: the client gets no answer ($code), not a hang" ||
      fail "serve $name: the client got 200 from a failed server: $(head -c 300 "$TMP/fail.body")"
  fi
}
# One process: the worker logs the failure once and the server keeps answering, every request 500.
SERVE_LAUNCH=(env NEMOTRON_TEST_ENGINE_FAIL=0:3)
if start_server "${SERVE[@]}" --max-slots 4; then
  codes=
  for i in 1 2; do
    codes+=$(curl -s -m 60 -o "$TMP/fail$i.body" -w '%{http_code} ' "$URL/v1/completions" -H 'Content-Type: application/json' \
      -d '{"model": "m", "prompt": "Once upon a time", "max_tokens": 40, "temperature": 0}')
  done
  line="serve: the generation engine failed: NEMOTRON_TEST_ENGINE_FAIL: rank 0 fails at its engine step 3"
  [[ $codes == "500 500 " ]] && kill -0 $SERVER_PID 2>/dev/null && grep -qx "$line" "$TMP/server.log" &&
    [[ $(grep -c "NEMOTRON_TEST_ENGINE_FAIL: rank 0 fails" "$TMP/server.log") -eq 1 ]] &&
    echo "ok: serve, one process: the engine failure logged once, the server still up answering 500" ||
    fail "serve, one process, engine failure: codes $codes, log: $(grep -v '^POST' "$TMP/server.log" | tail -4)"
  stop_server TERM
fi
engine_fails "EP 2, data rank 1 fails" 1 --expert-parallel-size 2
engine_fails "EP 2, rank 0 fails" 0 --expert-parallel-size 2
engine_fails "TP 2, tensor rank 1 fails" 1 --tensor-parallel-size 2
engine_fails "TP 2, rank 0 fails" 0 --tensor-parallel-size 2
SERVE_LAUNCH=()

bad_layout "serve: EP not dividing the routed experts" 3 \
  "--tensor-parallel-size 1 x --expert-parallel-size 3: $TMP/tiny: model.expert_model_parallel_size: 3 does not divide model.n_routed_experts 4" \
  "$BIN" serve "${SERVE[@]}" --expert-parallel-size 3
bad_layout "serve: EP 2 on a dense model (no routed experts)" 2 \
  "--tensor-parallel-size 1 x --expert-parallel-size 2: $DENSE: model.expert_model_parallel_size: 2: the model has no routed experts (no E layer in hybrid_override_pattern)" \
  "$BIN" serve --checkpoint $DENSE --expert-parallel-size 2
bad_layout "serve: EP x TP not the launch's ranks" 2 \
  "--tensor-parallel-size 2 x --expert-parallel-size 2 = 4 ranks: the model is split over every rank of the launch, and this one has 2 (start it with \`mpirun -np 4\` or \`srun --ntasks 4\`)" \
  "$BIN" serve "${SERVE[@]}" --tensor-parallel-size 2 --expert-parallel-size 2
bad_layout "serve: EP 2 x TP 2 pinned to one GPU" 4 \
  "--device cuda:0 pins all 4 ranks to one GPU; use --device cuda (rank i of a node takes GPU i)" \
  "$BIN" serve "${SERVE[@]}" --tensor-parallel-size 2 --expert-parallel-size 2 --device cuda:0
expect_error "serve: EP 2 in one process" \
  "--tensor-parallel-size 1 x --expert-parallel-size 2 = 2 ranks: the model is split over every rank of the launch, and this one has 1 (start it with \`mpirun -np 2\` or \`srun --ntasks 2\`)" \
  "$BIN" serve "${SERVE[@]}" --expert-parallel-size 2
finish "serve under expert parallelism"
