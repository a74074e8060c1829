#!/usr/bin/env bash
# LoRA (super3 tiny_lora, bf16 with float32 masters) over NCCL against one GPU: TP 2 and TP 2 + SP
# with adapter dropout 0.1, CP 2 without; 6 steps with validation, bf16 tolerances of
# cli.cuda_tensor_parallel (losses 2e-3 relative, adapters 2e-2 absolute). The CPU proof of the
# same layouts in float32 is cli.sft_lora_parallel. Exit 77 (skipped) without 2 GPUs or a CUDA build.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [[ ${gpus:-0} -lt 2 ]]; then echo "skipped: $gpus GPU(s) visible, 2 needed"; exit 77; fi
"$BIN" super3 pretrain -c tiny dataset.mock=true device=cuda --dry-run >/dev/null 2>&1 || { echo "skipped: no CUDA build"; exit 77; }
source "$(dirname "${BASH_SOURCE[0]}")/cuda_mpi_lib.sh"

expect_ok "data prep pretrain" 'blend: ' "$BIN" super3 data prep pretrain -c tiny output_dir="$TMP/dp"
expect_ok "pretrain 2 steps" '^ iteration +2/ +2 ' "$BIN" super3 pretrain -c tiny device=cuda \
  dataset.per_split_data_args_path="$TMP/dp/blend.json" train.train_iters=2 train.eval_iters=0 train.eval_interval=0 \
  scheduler.lr_warmup_iters=1 scheduler.lr_wsd_decay_iters=1 checkpoint.save="$TMP/pre" logger.tensorboard_dir=null
expect_ok "data prep sft" 'efficiency' "$BIN" super3 data prep sft -c tiny output_dir="$TMP/sft" \
  tokenizer.model="$TMP/dp/tokenizer/tokenizer.json" sources.0.generator.num_examples=200 heldout_examples=0
run=("$BIN" super3 sft -c tiny_lora device=cuda dataset.dataset_root="$TMP/sft" checkpoint.pretrained_checkpoint="$TMP/pre"
  checkpoint.load= train.global_batch_size=8 train.micro_batch_size=2 train.train_iters=6 train.eval_interval=3
  train.eval_iters=1 scheduler.lr_warmup_iters=1 checkpoint.save_interval=0 logger.log_interval=1 logger.tensorboard_dir=null)
expect_ok "one GPU, dropout 0.1" '^ iteration +6/ +6 ' "${run[@]}" peft.dropout=0.1 checkpoint.save="$TMP/g1"
expect_ok "one GPU, dropout 0" '^ iteration +6/ +6 ' "${run[@]}" peft.dropout=0 checkpoint.save="$TMP/g1nd"
for layout in "tp2 g1 model.tensor_model_parallel_size=2 peft.dropout=0.1" \
  "tp2sp g1 model.tensor_model_parallel_size=2 model.sequence_parallel=true peft.dropout=0.1" \
  "cp2 g1nd model.context_parallel_size=2 peft.dropout=0"; do
  read -r name ref args <<<"$layout"
  # shellcheck disable=SC2086  # $args: several overrides
  if ! "${MPIRUN[@]}" -np 2 "${run[@]}" $args checkpoint.save="$TMP/$name" >"$TMP/out$name" 2>"$TMP/err$name"; then
    fail "LoRA $name: $(tail -5 "$TMP/err$name")"
    continue
  fi
  same_as_one_gpu "LoRA $name" "$TMP/$name" "$TMP/$ref"
done

finish "LoRA over NCCL"
