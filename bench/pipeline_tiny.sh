#!/usr/bin/env bash
# The tiny pipeline from scratch, timed: `nemotron FAMILY pipeline -c CONFIG` in a new temporary
# directory (no runs/, no artifacts: every stage runs), then the seconds of each stage as
# pipeline.json recorded them and the wall time of the whole command. Target: under 600 s on 2
# cores for `super3 pipeline -c tiny`.
# Usage: bench/pipeline_tiny.sh [path/to/nemotron] [super3|nano3] [CONFIG] [key=value ...]
#   (defaults: build/nemotron, super3, tiny; the run directory is kept and printed)
set -euo pipefail
BIN=${1:-build/nemotron}
FAMILY=${2:-super3}
CONFIG=${3:-tiny}
shift $(($# < 3 ? $# : 3))
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
[[ $CONFIG == */* || $CONFIG == *.yaml ]] && CONFIG=$(cd "$(dirname "$CONFIG")" && pwd)/$(basename "$CONFIG")
WORK=$(mktemp -d "${TMPDIR:-/tmp}/pipeline_tiny.XXXXXX")
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
unset NEMOTRON_ARTIFACTS_ROOT  # the run's own store, ./runs/artifacts in $WORK

echo "bench: $FAMILY pipeline -c $CONFIG in $WORK ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
cd "$WORK"
start=$(date +%s.%N)
"$BIN" "$FAMILY" pipeline -c "$CONFIG" "$@" >pipeline.log 2>&1 || { tail -20 pipeline.log; echo "bench: the pipeline failed (log: $WORK/pipeline.log)"; exit 1; }
end=$(date +%s.%N)
python3 - "$(find runs -name pipeline.json -not -path "runs/artifacts/*" | head -1)" "$start" "$end" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
total = 0.0
print(f"{'stage':<20} {'result':<12} {'seconds':>8}")
for s in p["stages"]:
    total += s["seconds"]
    print(f"{s['name']:<20} {s['result']:<12} {s['seconds']:>8.1f}")
print(f"{'stages':<20} {'':<12} {total:>8.1f}")
print(f"{'wall (command)':<20} {'':<12} {float(sys.argv[3]) - float(sys.argv[2]):>8.1f}")
PY
sed -n '/^==> evaluation/,/^$/p' pipeline.log
grep '^verdict ' pipeline.log || true
grep '^report: ' pipeline.log || true
echo "bench: load at the end $(cut -d' ' -f1-3 /proc/loadavg); log $WORK/pipeline.log"
