#!/usr/bin/env python3
"""Reads nemotron's TensorBoard event files with the `tensorboard` package itself (EventAccumulator)
and checks them: the scalar tags Megatron logs are there, steps increase, values are finite, and,
when the run's metrics.jsonl is found (beside the tb_logs directory, or given with --metrics),
every train/validation value in it appears in TensorBoard at the same iteration (to float32
precision). Prints PASS or FAIL lines; exit status 0 only on PASS.

usage: python3 tools/check_tensorboard_events.py PATH [--metrics FILE] [--tags "lm loss,grad-norm"]
  PATH: an events.out.tfevents.* file or a directory holding them (e.g. runs/super3/tiny/pretrain/tb_logs)
Needs: pip install tensorboard
"""
import argparse
import glob
import json
import math
import os
import sys

from tensorboard.backend.event_processing import event_accumulator

# metrics.jsonl key -> TensorBoard tag (train records); validation records add " validation".
TRAIN_TAGS = {"lm_loss": "lm loss", "lr": "learning-rate", "grad_norm": "grad-norm",
              "step_seconds": "iteration-time", "tokens_per_second": "tokens-per-second"}
DEFAULT_TAGS = ["lm loss", "learning-rate", "grad-norm", "iteration-time"]


def load_scalars(path):
    """{tag: {step: value}} over every event file at path (a file or a directory)."""
    files = [path] if os.path.isfile(path) else sorted(glob.glob(os.path.join(path, "events.out.tfevents.*")))
    if not files:
        raise SystemExit(f"FAIL {path}: no events.out.tfevents.* file")
    out = {}
    for f in files:
        acc = event_accumulator.EventAccumulator(f, size_guidance={event_accumulator.SCALARS: 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            steps = [e.step for e in acc.Scalars(tag)]
            if steps != sorted(steps):
                raise SystemExit(f"FAIL {f}: tag {tag!r}: steps not increasing: {steps[:10]}...")
            for e in acc.Scalars(tag):
                out.setdefault(tag, {})[e.step] = e.value
    return files, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--metrics", help="metrics.jsonl to compare with (default: ../metrics.jsonl of a tb_logs dir)")
    ap.add_argument("--tags", default=",".join(DEFAULT_TAGS), help="comma-separated tags that must be present")
    a = ap.parse_args()

    files, scalars = load_scalars(a.path)
    failures = []
    for tag in [t for t in a.tags.split(",") if t]:
        if tag not in scalars:
            failures.append(f"tag {tag!r} missing (found: {sorted(scalars)})")
    for tag, by_step in scalars.items():
        bad = [s for s, v in by_step.items() if not math.isfinite(v)]
        if bad:
            failures.append(f"tag {tag!r}: non-finite values at steps {bad[:5]}")

    metrics = a.metrics
    if metrics is None:
        d = a.path if os.path.isdir(a.path) else os.path.dirname(a.path)
        guess = os.path.join(os.path.dirname(os.path.abspath(d)), "metrics.jsonl")
        metrics = guess if os.path.isfile(guess) else None
    compared = 0
    if metrics:
        wanted = {}  # (tag, step) -> (value, line); a resumed run's repeated step keeps its last line
        with open(metrics) as f:
            for n, line in enumerate(f, 1):
                rec = json.loads(line)
                kind = rec.get("type")
                if kind not in ("train", "validation"):
                    continue
                for key, tag in TRAIN_TAGS.items():
                    if key in rec:
                        wanted[(tag + (" validation" if kind == "validation" else ""), rec["iteration"])] = (rec[key], n)
        for (tag, step), (want, n) in sorted(wanted.items(), key=lambda kv: kv[1][1]):
            got = scalars.get(tag, {}).get(step)
            if got is None:
                failures.append(f"{metrics}:{n}: {tag!r} at step {step} missing")
            elif not math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-30):
                failures.append(f"{metrics}:{n}: {tag!r} at step {step}: {got} != {want}")
            else:
                compared += 1

    summary = ", ".join(f"{t} ({len(v)} steps {min(v)}..{max(v)})" for t, v in sorted(scalars.items()))
    print(f"read {len(files)} event file(s): {summary}")
    if metrics:
        print(f"compared {compared} values with {metrics}")
    for msg in failures:
        print(f"FAIL {msg}")
    print("PASS" if not failures else f"FAIL ({len(failures)} problem(s))")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
