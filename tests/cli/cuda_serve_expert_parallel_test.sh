#!/usr/bin/env bash
# `nemotron serve --expert-parallel-size 2 --device cuda` on 2 GPUs (cli.serve_expert_parallel is
# the CPU proof): the tiny super3 checkpoint (4 routed experts, 2 on each GPU, the routed rows
# crossing by NCCL all-to-all) pretrained 2 steps on the CPU, served in float32 by `mpirun -np 2`
# (rank i on GPU i, rank 0 serving HTTP and handing each request to the data rank running the
# fewest) and by one process on one GPU: at temperature 0 the same answers (texts and finish
# reasons equal, log-probs within 2e-3: the experts' GEMMs see other batch shapes) for
# tests/cli/serve_ep_client.py's queries (a completion, a chat, an echo, a seeded n = 2 on one data
# rank, a stream, a completion beside a long stream on data rank 1) and its burst (7 requests at
# once, streams among them, spread over both data ranks); the stop line counts each data rank's
# requests. Exit 77 (skipped) without 2 GPUs or without a CUDA build.
# Usage: cuda_serve_expert_parallel_test.sh path/to/nemotron (a bundled binary works: the recipes
# are read from the repository's recipes/ unless NEMOTRON_RECIPES names others)
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
source "$ROOT/tests/cli/serve_lib.sh"
export NEMOTRON_RECIPES=${NEMOTRON_RECIPES:-$ROOT/recipes}

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [[ ${gpus:-0} -lt 2 ]]; then echo "skipped: $gpus GPU(s) visible, 2 needed"; exit 77; fi
"$BIN" super3 pretrain -c tiny dataset.mock=true device=cuda --dry-run >/dev/null 2>&1 || { echo "skipped: no CUDA build"; exit 77; }

source "$ROOT/tests/cli/cuda_mpi_lib.sh"  # MPIRUN: every rank's environment passed on

DENSE=tests/fixtures/hf/dense
client() { python3 "$ROOT/tests/cli/serve_ep_client.py" "$1" "$URL"; }
# close_answers NAME A B: the client's answers agree line for line, a log-prob line's number within
# 2e-3 (its token equal).
close_answers() {
  if msg=$(python3 - "$2" "$3" <<'PY'
import sys
a, b = open(sys.argv[1]).read().splitlines(), open(sys.argv[2]).read().splitlines()
assert a and len(a) == len(b), (len(a), len(b))
worst, logprobs = 0.0, 0
for x, y in zip(a, b):
    if x == y and not x.startswith("    "):
        continue
    if x.startswith("    ") and y.startswith("    "):  # "    'token' -1.2345": a token and its log-prob
        (tx, px), (ty, py) = x.rsplit(" ", 1), y.rsplit(" ", 1)
        assert tx == ty, (x, y)
        if px != "none" or py != "none":
            worst = max(worst, abs(float(px) - float(py)))
            logprobs += 1
        continue
    raise AssertionError(f"{x!r} != {y!r}")
assert worst <= 2e-3, worst
print(f"{len(a)} lines, texts equal, {logprobs} log-probs within {worst:.1e}")
PY
  ); then echo "ok: $1: $msg"; else fail "$1: $msg"; fi
}

expect_ok "pretrain 2 steps (cpu)" '^ iteration +2/ +2 ' "$BIN" super3 pretrain -c tiny dataset.mock=true \
  dataset.seq_length=32 train.global_batch_size=2 train.micro_batch_size=2 train.train_iters=2 train.eval_iters=0 \
  train.eval_interval=0 scheduler.lr_warmup_iters=1 scheduler.lr_wsd_decay_iters=0 checkpoint.save="$TMP/tiny"
SERVE=(--checkpoint "$TMP/tiny" --tokenizer $DENSE/tokenizer.json --served-model-name m --max-seq-len 512
  --max-slots 4 --device cuda --dtype float32)

# One GPU.
if start_server "${SERVE[@]}"; then
  client queries >"$TMP/queries1" && client burst >"$TMP/burst1" || fail "one GPU: the client failed"
  stop_server TERM
fi

# EP 2 on 2 GPUs.
SERVE_LAUNCH=("${MPIRUN[@]}" -np 2)
if start_server "${SERVE[@]}" --expert-parallel-size 2; then
  grep -Eq '^model: .* float32 on cuda:0 ' "$TMP/server.log" && grep -q '^expert parallel: 2 data ranks x 1 tensor ranks' \
    "$TMP/server.log" && echo "ok: EP 2 start lines: float32 on cuda:0, 2 data ranks" ||
    fail "EP 2 start lines: $(head -6 "$TMP/server.log")"
  if client queries >"$TMP/queries2"; then
    close_answers "EP 2 on 2 GPUs, one request at a time and a pair = one GPU" "$TMP/queries1" "$TMP/queries2"
  else
    fail "EP 2: queries failed: $(tail -3 "$TMP/server.log")"
  fi
  if client burst >"$TMP/burst2"; then
    close_answers "EP 2 on 2 GPUs, 7 requests at once = one GPU" "$TMP/burst1" "$TMP/burst2"
  else
    fail "EP 2: burst failed: $(tail -3 "$TMP/server.log")"
  fi
  stop_server TERM
  spread=$(sed -nE 's/^stopped by SIGTERM: served .*; generating requests by data rank: ([0-9]+), ([0-9]+)$/\1 \2/p' \
    "$TMP/server.log")
  read -r d0 d1 <<<"$spread"
  [[ ${d0:-0} -gt 0 && ${d1:-0} -gt 0 ]] && echo "ok: EP 2 stops on SIGTERM; generating requests by data rank: $d0, $d1" ||
    fail "EP 2: both data ranks should have generated: $(grep '^stopped' "$TMP/server.log" || tail -3 "$TMP/server.log")"
fi
SERVE_LAUNCH=()
finish "serve at EP 2 on 2 GPUs against one GPU"
