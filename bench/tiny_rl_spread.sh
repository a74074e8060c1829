#!/usr/bin/env bash
# The tiny RL recipe's gain across seeds and OpenBLAS core types: the spread the pipeline's GRPO
# verdict (recipes/super3/pipeline/tiny.yaml) must clear on every machine. SFT checkpoints are
# shared by every GRPO variant, so they are made once per seed in WORK and reused:
#   WORK/base            data prep (pretrain, SFT, RL) + pretraining (seed 1234), OPENBLAS_CORETYPE=Haswell
#   WORK/sft-S           base + SFT with rng.seed = dataset.seed = S (Haswell), its eval
#   WORK/TAG/S-CORE      sft-S + GRPO (grpo.seed 42 for S = 1234 as the recipe, else S) under
#                        OPENBLAS_CORETYPE=CORE, then eval of the RL checkpoint
# One job at a time. Threads: SFT and GRPO run with OMP_NUM_THREADS (default 1); the count
# changes the rounding and so, over 100 GRPO steps, the samples (README, "Quick start": at one
# thread Haswell and SkylakeX drew the same samples for 100 steps, at 2 threads they part), so
# measure at the thread count the pipeline gets (2 on 2 cores). The SFT checkpoints are reused by
# every later call, whatever its thread count: remove WORK/sft-S to remake one.
# Prints one line per run (SFT and GRPO one-step pass@1, the change, the RL stage's CPU seconds and
# its generation rounds: one a step, more under grpo.use_dynamic_sampling) and the mean and spread.
# Usage: bench/tiny_rl_spread.sh path/to/nemotron WORK TAG [key=value ... for `super3 rl -c tiny`]
#   SEEDS="1234 1 2" CORES="Haswell SkylakeX" (the defaults) pick the runs.
set -euo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
WORK=$2
TAG=$3
shift 3
SEEDS=${SEEDS:-1234 1 2}
CORES=${CORES:-Haswell SkylakeX}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
export OMP_WAIT_POLICY=PASSIVE
unset NEMOTRON_ARTIFACTS_ROOT
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)

# One-step pass@1 of the model an eval run scored last, from its log's task line.
onestep() { grep -oP 'arithmetic_onestep +[0-9]+ items in .*pass@1 \K[0-9.]+' "$1" | tail -1; }

if [[ ! -f $WORK/base/.done ]]; then
  rm -rf "$WORK/base"; mkdir -p "$WORK/base"
  (cd "$WORK/base" && export OPENBLAS_CORETYPE=Haswell &&
    "$BIN" super3 data prep pretrain -c tiny && "$BIN" super3 pretrain -c tiny &&
    "$BIN" super3 data prep sft -c tiny && "$BIN" super3 data prep rl -c tiny) >"$WORK/base.log" 2>&1
  touch "$WORK/base/.done"
fi

for s in $SEEDS; do
  d=$WORK/sft-$s
  if [[ ! -f $d/.done ]]; then
    rm -rf "$d"; cp -a "$WORK/base" "$d"; rm -f "$d/.done"
    (cd "$d" && export OPENBLAS_CORETYPE=Haswell &&
      /usr/bin/time -f "sft cpu %U s" "$BIN" super3 sft -c tiny rng.seed=$s dataset.seed=$s &&
      "$BIN" super3 eval -c tiny run.model=super3-tiny-sft:latest) >"$WORK/sft-$s.log" 2>&1
    onestep "$WORK/sft-$s.log" >"$d/onestep"
    touch "$d/.done"
  fi
done

for s in $SEEDS; do
  for core in $CORES; do
    d=$WORK/$TAG/$s-$core
    [[ -f $d/.done ]] && continue
    rm -rf "$d"; mkdir -p "$WORK/$TAG"; cp -a "$WORK/sft-$s" "$d"; rm -f "$d/.done"
    gseed=$([[ $s == 1234 ]] && echo 42 || echo "$s")
    (cd "$d" && export OPENBLAS_CORETYPE=$core &&
      /usr/bin/time -f "rl cpu %U s wall %e s" "$BIN" super3 rl -c tiny grpo.seed=$gseed "$@" &&
      "$BIN" super3 eval -c tiny run.model=super3-tiny-rl:latest) >"$d.log" 2>&1
    onestep "$d.log" >"$d/onestep"
    touch "$d/.done"
  done
done

python3 - "$WORK" "$TAG" "$SEEDS" "$CORES" <<'PY'
import json, statistics, sys, re
work, tag, seeds, cores = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
gains = []
for s in seeds:
    sft = float(open(f"{work}/sft-{s}/onestep").read())
    for c in cores:
        rl = float(open(f"{work}/{tag}/{s}-{c}/onestep").read())
        cpu = re.findall(r"rl cpu ([0-9.]+) s", open(f"{work}/{tag}/{s}-{c}.log").read())
        # Generation rounds over the run (grpo.use_dynamic_sampling takes more than one a step).
        rounds = 0
        try:
            for line in open(f"{work}/{tag}/{s}-{c}/runs/super3/tiny/rl/metrics.jsonl"):
                r = json.loads(line)
                if r.get("type") == "train": rounds += r.get("dynamic_sampling_num_gen_batches", 1)
        except OSError:
            rounds = "?"
        gains.append(100 * (rl - sft))
        print(f"{tag} seed {s:>4} {c:<8} SFT {100*sft:5.1f}%  GRPO {100*rl:5.1f}%  {gains[-1]:+5.1f} points  rl cpu {cpu[0] if cpu else '?'} s  rounds {rounds}")
if len(gains) > 1:
    print(f"{tag}: mean {statistics.mean(gains):+.1f}, sd {statistics.stdev(gains):.1f}, min {min(gains):+.1f}, max {max(gains):+.1f} points over {len(gains)} runs")
PY
