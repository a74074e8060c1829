#!/usr/bin/env bash
# `nemotron super3 eval -c tiny deployment.device=cuda` as a user runs it: a tiny model pretrained
# on the CPU, scored by the tiny eval recipe (multiple choice, two generation tasks through the
# engine, perplexity) on the CPU in float32 and on the GPU in float32 and bf16, batched
# (rows_per_forward 8). On the GPU in float32 every metric must equal the CPU's but for summation
# order: perplexities within 1e-3 relative, and the same acc/pass@1 (a near tie may flip one item:
# at most one per task); in bf16 perplexities within 3% and acc within 10 points. Without a GPU (or
# a CUDA build) it prints why and exits 77 (ctest: skipped).
# Usage: cuda_eval_test.sh path/to/nemotron
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

cd "$TMP"
# A bundled binary (outside build/, as on the GPU machine) finds no recipes beside it: name them.
export NEMOTRON_RECIPES=${NEMOTRON_RECIPES:-$ROOT/recipes}
# The device opens before any model loads: this fails fast without a GPU.
probe=$("$BIN" super3 eval -c tiny run.model= deployment.checkpoint_path=none deployment.device=cuda \
  output_dir=probe 2>&1)
if grep -Eq 'CUDA device\(s\) are visible|built without CUDA' <<<"$probe"; then
  echo "skipped: $(tail -1 <<<"$probe")"
  exit 77
fi

expect_ok "data prep pretrain" 'artifact:  tiny-data:v1' "$BIN" super3 data prep pretrain -c tiny output_dir=runs/tiny/data
expect_ok "pretrain 30 steps" '^ iteration +30/ +30 ' "$BIN" super3 pretrain -c tiny \
  dataset.per_split_data_args_path=runs/tiny/data/blend.json train.eval_iters=0 train.eval_interval=0 \
  train.train_iters=30 scheduler.lr_warmup_iters=3 scheduler.lr_wsd_decay_iters=3 checkpoint.save=runs/tiny/base
ev=("$BIN" super3 eval -c tiny run.model=tiny-base:latest tokenizer.model=runs/tiny/data/tokenizer/tokenizer.json
  evaluation.limit_samples=40)

expect_ok "eval cpu float32" '^arithmetic_facts +acc ↑' "${ev[@]}" output_dir=runs/eval_cpu deployment.device=cpu
expect_ok "eval cuda float32" '^arithmetic_facts +acc ↑' "${ev[@]}" output_dir=runs/eval_f32 deployment.device=cuda \
  deployment.dtype=float32
grep -Eq '^model tiny-base:v1: .*, cuda.*, float32$' "$TMP/out" || fail "cuda float32: no model line: $(head -3 "$TMP/out")"
expect_ok "eval cuda bf16" '^arithmetic_facts +acc ↑' "${ev[@]}" output_dir=runs/eval_bf16 deployment.device=cuda
grep -Eq '^model tiny-base:v1: .*, cuda.*, bfloat16$' "$TMP/out" || fail "cuda bf16: no model line: $(head -3 "$TMP/out")"
grep -Eq '^ +[0-9]+ forwards of [0-9.]+ rows x 512 tokens' "$TMP/out" || fail "cuda bf16: no scoring line: $(cat "$TMP/out")"
cat "$TMP/out"

python3 - runs/eval_cpu/results.json runs/eval_f32/results.json runs/eval_bf16/results.json <<'PY' || fail "cuda metrics do not track the cpu's"
import json, sys
cpu, f32, bf16 = (json.load(open(p))["models"][0]["results"] for p in sys.argv[1:])
bad = []
for task, m in cpu.items():
    for key, v in m.items():
        if "stderr" in key or not isinstance(v, (int, float)) or key == "alias":
            continue
        for name, other, ppl_tol, acc_tol in (("float32", f32, 1e-3, 1 / 40 + 1e-9), ("bf16", bf16, 0.03, 0.10)):
            w = other[task][key]
            if "perplexity" in key or "bits_per_byte" in key:
                ok = abs(w - v) <= ppl_tol * abs(v)
            else:
                ok = abs(w - v) <= acc_tol
            print(f"{task:20s} {key:28s} cpu {v:10.5f}  cuda {name:7s} {w:10.5f}  {'ok' if ok else 'BAD'}")
            if not ok:
                bad.append((task, key, name))
sys.exit(1 if bad else 0)
PY

finish "tiny eval on CUDA (float32 and bf16, batched scoring, generation) tracks the CPU float32 run"
