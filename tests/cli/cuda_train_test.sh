#!/usr/bin/env bash
# The GPU path as a user runs it, for each tiny pretraining recipe: super3 (latent MoE, a dense MLP
# layer), nano3 (MoE without latent projections, attention without RoPE) and super49b (DeciLM:
# per-layer GQA groups, no-op and linear sublayers, Llama-3 RoPE).
# `nemotron <recipe> pretrain -c tiny device=cuda` (bf16 compute, fp32 masters) must track the CPU
# float32 run of the same recipe, seed and data: every iteration's lm loss within bf16 noise of the
# CPU's (checked: relative gap <= 2% over the first 10 iterations, <= 5% mean over the run, final
# within 5%), then a checkpoint written on the GPU resumes on the CPU. Without a GPU (or a CUDA
# build) it prints why and exits 77 (ctest: skipped).
# Usage: cuda_train_test.sh path/to/nemotron
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

recipes=(super3 nano3 super49b)
losses() { grep '"type":"train"' "$1" | sed -E 's/.*"lm_loss":([^,}]*).*/\1/'; }
args=(pretrain -c tiny dataset.mock=true train.train_iters=100 train.eval_interval=0 logger.log_interval=20
  checkpoint.save_interval=0)

probe=$("$BIN" "${recipes[0]}" "${args[@]}" device=cuda train.train_iters=1 scheduler.lr_wsd_decay_iters=1 \
  checkpoint.save="$TMP/probe" 2>&1)
if [[ $? -ne 0 ]]; then
  if grep -Eq 'CUDA device\(s\) are visible|built without CUDA' <<<"$probe"; then
    echo "skipped: $(tail -1 <<<"$probe")"
    exit 77
  fi
  fail "probe run on cuda: $probe"
  finish "tiny pretraining on CUDA"
fi

for recipe in "${recipes[@]}"; do
  run=("$recipe" "${args[@]}")
  out="$TMP/$recipe"
  expect_ok "$recipe cpu fp32 run" 'training done' "$BIN" "${run[@]}" checkpoint.save="$out/cpu"
  expect_ok "$recipe cuda bf16 run" 'bf16 compute, fp32 masters on cuda' "$BIN" "${run[@]}" device=cuda \
    checkpoint.save="$out/gpu"
  grep -q 'peak device memory' "$TMP/out" || fail "$recipe cuda run: no peak memory line"
  [[ -f "$out/cpu/metrics.jsonl" && -f "$out/gpu/metrics.jsonl" ]] || { fail "$recipe: a run wrote no metrics"; continue; }

  paste <(losses "$out/cpu/metrics.jsonl") <(losses "$out/gpu/metrics.jsonl") >"$out/pairs"
  [[ $(wc -l <"$out/pairs") -eq 100 ]] || fail "$recipe: expected 100 loss pairs, got $(wc -l <"$out/pairs")"
  verdict=$(awk '{ r = ($2 - $1) / $1; if (r < 0) r = -r; s += r; if (NR <= 10 && r > m10) m10 = r; last = r }
    END { printf "%s first10_max=%.4f mean=%.4f final=%.4f", (NR > 0 && m10 <= 0.02 && s / NR <= 0.05 && last <= 0.05) ? "ok" : "bad", m10, s / (NR ? NR : 1), last }' "$out/pairs")
  echo "$recipe cpu vs cuda relative loss gaps: $verdict (cpu final $(tail -1 "$out/pairs" | cut -f1), cuda final $(tail -1 "$out/pairs" | cut -f2))"
  [[ $verdict == ok* ]] || fail "$recipe: cuda loss curve does not track the cpu one: $verdict"

  # The GPU checkpoint (fp32 masters) continues on the CPU.
  expect_ok "$recipe resume gpu checkpoint on cpu" 'resumed from' "$BIN" "${run[@]}" train.train_iters=110 \
    checkpoint.load="$out/gpu" checkpoint.save="$out/gpu"
done

finish "tiny pretraining on CUDA tracks the CPU (${recipes[*]})"
