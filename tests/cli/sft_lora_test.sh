#!/usr/bin/env bash
# `nemotron super3 sft -c tiny_lora` (LoRA: adapters on a frozen base) as a user runs it, with
# adapter dropout on (peft.dropout=0.1): the trainable share printed, checkpoints holding the
# adapters only, dropout changing the training (not the first step's loss: B starts at zero), an
# interrupted run resumed with the uninterrupted run's losses bit for bit (the masks follow the
# seed, the iteration and the micro-batch); `convert merge-lora` giving a checkpoint whose
# teacher-forced accuracy equals the adapter run's, that `convert export` takes; `convert
# export-lora` writing PEFT's layout (lora_dropout included); `generate` on the adapter checkpoint
# pointing to merge-lora; bad targets and a dropout outside
# [0, 1) as one `error:` line, exit 2, nothing written.
# Usage: sft_lora_test.sh path/to/nemotron
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

losses() { grep '"type":"train"' "$1" | sed -E 's/.*"lm_loss":([^,}]*).*/\1/'; }
# The percentage of the teacher-forced accuracy line at iteration $2 in file $1.
accuracy() { sed -nE "s/^held-out answers, teacher-forced, at iteration $2: ([0-9.]+)% .*/\1/p" "$1"; }

# --- stage 0, briefly, and the SFT data ---------------------------------------------------------
sft_setup 3 200 20

lora=("$BIN" super3 sft -c tiny_lora "${sft_data[@]}"
  train.global_batch_size=2 train.micro_batch_size=1 train.train_iters=4 train.eval_interval=2 train.eval_iters=1
  scheduler.lr_warmup_iters=1 checkpoint.save_interval=2 logger.log_interval=1 peft.dropout=0.1)

# --- a short LoRA run: trainable share, adapters-only checkpoints ----------------------------------
expect_ok "lora 4 steps" '^ iteration +4/ +4 .*lm loss' "${lora[@]}" checkpoint.save="$TMP/a" checkpoint.load="$TMP/a"
grep -Eq '^trainable params: [0-9.]+ ?[KM]? of [0-9.]+ ?[KM]? \([0-9.]+%\): LoRA adapters, base frozen$' "$TMP/out" ||
  fail "no trainable-params line: $(head -8 "$TMP/out")"
LORA_ACC=$(accuracy "$TMP/out" 4)
w="$TMP/a/iter_0000004/model.safetensors"
grep -aq 'backbone.layers.0.mixer.in_proj.lora_A.weight' "$w" || fail "the checkpoint lacks the in_proj adapter"
grep -aq 'backbone.embeddings.weight' "$w" && fail "the LoRA checkpoint holds base weights"
grep -aq 'exp_avg.backbone.layers.1.mixer.q_proj.lora_B.weight' "$TMP/a/iter_0000004/optimizer.safetensors" ||
  fail "optimizer.safetensors lacks the adapters' moments"
grep -aq 'exp_avg.backbone.embeddings.weight' "$TMP/a/iter_0000004/optimizer.safetensors" &&
  fail "optimizer.safetensors holds moments of the frozen base"
expect_ok "dry run" 'trainable params: .*LoRA adapters' "${lora[@]}" --dry-run

# --- dropout acts in training: the same run without it trains differently -----------------------
expect_ok "lora 4 steps, dropout 0" '^ iteration +4/ +4 ' "${lora[@]}" checkpoint.save="$TMP/nd" \
  checkpoint.load="$TMP/nd" peft.dropout=0
with=($(losses "$TMP/a/metrics.jsonl")) without=($(losses "$TMP/nd/metrics.jsonl"))
[[ ${#with[@]} -eq 4 && "${with[0]}" == "${without[0]}" ]] ||
  fail "step 1 (B = 0: the adapters add nothing yet) differs with dropout: ${with[*]} vs ${without[*]}"
[[ "${with[*]:1}" != "${without[*]:1}" ]] || fail "dropout 0.1 trained exactly as dropout 0: ${with[*]}"

# --- exact resume: 2 steps, exit, resume to 4 == 4 uninterrupted steps ---------------------------
expect_ok "exit at 2" '^exiting at iteration 2 ' "${lora[@]}" checkpoint.save="$TMP/part" checkpoint.load="$TMP/part" \
  train.exit_interval=2
expect_ok "resume" "^resumed from $TMP/part/iter_0000002 at iteration 2 " "${lora[@]}" checkpoint.save="$TMP/part" \
  checkpoint.load="$TMP/part"
if [[ "$(losses "$TMP/a/metrics.jsonl")" == "$(losses "$TMP/part/metrics.jsonl")" &&
  $(losses "$TMP/part/metrics.jsonl" | wc -l) -eq 4 ]]; then
  echo "ok: resumed losses equal the uninterrupted run's bit for bit"
else
  fail "resumed losses differ: $(losses "$TMP/a/metrics.jsonl" | tr '\n' ' ') vs $(losses "$TMP/part/metrics.jsonl" | tr '\n' ' ')"
fi
cmp -s "$TMP/a/iter_0000004/model.safetensors" "$TMP/part/iter_0000004/model.safetensors" ||
  fail "final adapters differ after resume"

# --- merge-lora: the merged model predicts what base + adapter predicted ---------------------------
# 20 adapted weights: 14 in the trunk (M*M-ME) and 6 in the MTP block "*E" (q, k, v, o, shared up/down).
expect_ok "merge-lora" "^wrote $TMP/merged: W' = W \+ 2 B A on 20 weights" "$BIN" convert merge-lora \
  --adapter "$TMP/a" --output "$TMP/merged"
expect_ok "sft from the merged weights" '^ iteration +1/ +1 ' "$BIN" super3 sft -c tiny dataset.dataset_root="$TMP/sft" \
  checkpoint.pretrained_checkpoint="$TMP/merged" checkpoint.save="$TMP/m" checkpoint.load="$TMP/m" \
  train.global_batch_size=2 train.micro_batch_size=1 train.train_iters=1 train.eval_iters=0 train.eval_interval=0 \
  scheduler.lr_warmup_iters=0
got=$(accuracy "$TMP/out" 0)
[[ -n "$LORA_ACC" && "$got" == "$LORA_ACC" ]] || fail "merged accuracy $got% differs from base + adapter's $LORA_ACC%"
expect_ok "export the merged checkpoint" 'wrote' "$BIN" convert export --checkpoint "$TMP/merged" --out "$TMP/hf"
[[ -f "$TMP/hf/config.json" ]] || fail "convert export of the merged checkpoint wrote no config.json"

# A LoRA checkpoint holds adapters only: generate (and serve, eval: the same loader) point to merge-lora.
expect_usage_error "generate from a LoRA checkpoint" \
  "^error: $TMP/a/iter_0000004: a LoRA checkpoint \(adapters only; its config.yaml has a peft: section\): merge it into its base first with \`nemotron convert merge-lora --adapter $TMP/a --output DIR\`, then give DIR$" \
  "$BIN" generate --checkpoint "$TMP/a" --prompt "1 + 1 ="

expect_ok "export-lora" "^wrote $TMP/peft: adapter_config.json" "$BIN" convert export-lora --adapter "$TMP/a" \
  --output "$TMP/peft"
grep -q '"peft_type": "LORA"' "$TMP/peft/adapter_config.json" || fail "adapter_config.json: no peft_type LORA"
grep -q '"r": 16' "$TMP/peft/adapter_config.json" || fail "adapter_config.json: no r"
grep -q '"lora_dropout": 0.1' "$TMP/peft/adapter_config.json" || fail "adapter_config.json: no lora_dropout 0.1"
grep -aq 'base_model.model.backbone.layers.0.mixer.in_proj.lora_A.weight' "$TMP/peft/adapter_model.safetensors" ||
  fail "adapter_model.safetensors: no PEFT tensor names"

# --- bad input: one line, exit 2, nothing written --------------------------------------------------
expect_error "unknown target" \
  "recipes/super3/sft/tiny_lora.yaml: peft.target_modules: unknown module \"linear_q\" (expected some of linear_qkv, linear_proj, linear_fc1, linear_fc2, in_proj, out_proj)" \
  "${lora[@]}" checkpoint.save="$TMP/b" checkpoint.load="$TMP/b" 'peft.target_modules=[linear_q]'
expect_error "a target with no module in the model" \
  "recipes/super3/sft/tiny_lora.yaml: peft.target_modules: linear_qkv names no module of this model (pattern M-ME)" \
  "${lora[@]}" checkpoint.save="$TMP/b" checkpoint.load="$TMP/b" model.hybrid_override_pattern=M-ME
expect_error "routed experts" \
  "recipes/super3/sft/tiny_lora.yaml: peft.target_modules: experts: the routed experts run as one grouped GEMM that takes no adapter; target linear_fc1/linear_fc2 (the dense MLP and the shared expert)" \
  "${lora[@]}" checkpoint.save="$TMP/b" checkpoint.load="$TMP/b" 'peft.target_modules=[experts]'
expect_error "dropout 1" \
  "recipes/super3/sft/tiny_lora.yaml: peft.dropout: expected a probability in [0, 1) (the adapter input's dropout), got 1" \
  "${lora[@]}" checkpoint.save="$TMP/b" checkpoint.load="$TMP/b" peft.dropout=1
expect_error "dropout below 0" \
  "recipes/super3/sft/tiny_lora.yaml: peft.dropout: expected a probability in [0, 1) (the adapter input's dropout), got -0.2" \
  "${lora[@]}" checkpoint.save="$TMP/b" checkpoint.load="$TMP/b" peft.dropout=-0.2
expect_error "merge-lora of a full fine-tuning checkpoint" \
  "$TMP/m/iter_0000001: not a LoRA checkpoint (its config has no peft: section; a full fine-tuning checkpoint exports directly with \`nemotron convert export\`)" \
  "$BIN" convert merge-lora --adapter "$TMP/m" --output "$TMP/b"
[[ -e "$TMP/b" ]] && fail "a refused run wrote $TMP/b"

finish "sft LoRA checks"
