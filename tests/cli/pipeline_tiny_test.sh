#!/usr/bin/env bash
# The laptop demo proves itself (issue 25 §6): README command 1's pipeline, `nemotron super3 pipeline
# -c tiny`, unshortened, in a fresh directory; every verdict line of the recipe (SFT and GRPO each
# raise the one-step skill by the recipe's min_gain, set far outside the spread measured across
# seeds and OpenBLAS core types) must read PASS, and pipeline.json must record them passed. A stage
# that stops teaching its skill fails here. About 7 minutes on 2 cores (label slow).
# Usage: pipeline_tiny_test.sh path/to/nemotron [key=value ... for the pipeline recipe]
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$1"
shift

cd "$TMP"
expect_ok "tiny pipeline" '^report: runs/super3/tiny/report.html ' "$BIN" super3 pipeline -c tiny "$@"
sed -n '/^==> evaluation/,$p' "$TMP/out" >tail.out
cat tail.out
n=$(grep -c '^verdict ' tail.out)
[[ $n -ge 2 ]] || fail "expected a verdict line for SFT and for GRPO, got $n"
grep -Eq '^verdict sft: .*: PASS$' tail.out || fail "SFT verdict: $(grep '^verdict sft' tail.out)"
grep -Eq '^verdict rl: .*: PASS$' tail.out || fail "GRPO verdict: $(grep '^verdict rl' tail.out)"
grep '^verdict ' tail.out | grep -v ': PASS$' && fail "a verdict failed"
python3 - runs/super3/tiny/pipeline.json <<'PY' || fail "pipeline.json: verdicts not recorded as passed"
import json, sys
v = json.load(open(sys.argv[1]))["verdicts"]
assert len(v) >= 2 and all(x["passed"] and x["after_value"] - x["before_value"] >= x["min_gain"] - 1e-9 for x in v), v
PY

finish "tiny pipeline: every stage's verdict reads PASS"
