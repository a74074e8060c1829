#!/usr/bin/env bash
# LoRA fine-tuning (`super3 sft -c tiny_lora`: adapters on q/k/v, o, the MLP and shared expert, and
# Mamba's in_proj/out_proj) under tensor, sequence and context parallelism, as the seeds' Super 3
# LoRA command runs it (TP 4 x CP 2 with sequence parallelism). An adapter follows its weight's
# split: on a column-parallel weight A is whole and B split by rows, on a row-parallel one A split
# by columns and B whole (the partial h B^T joins the layer's own output reduction); the whole
# factor's gradient is summed over the tensor group. 4 steps with validation at TP 2 and TP 2 + SP
# with adapter dropout on (the masks drawn at each element's place in one process's input), TP 2 x
# DP 2 with the distributed optimizer (np 4) with it too (each data rank's micro-batches keyed by
# their place in the global batch), and at CP 2 and CP 2 x TP 2 + SP (each token's masks keyed by
# its place in the whole row): every loss and the adapters at iteration 4 equal the single process's (cli.tensor_parallel's
# tolerances; the split factors are saved with their global shapes, which the comparison with one
# process's whole tensors checks). Then a TP 2 checkpoint continues in one process, `convert
# export-lora` and `merge-lora` of the TP 2 run equal one process's.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
source "$(dirname "${BASH_SOURCE[0]}")/mpi_lib.sh"

# Stage 0 briefly (the frozen base) and a small SFT set without held-out prompts.
sft_setup 2 60 0

run=("$BIN" super3 sft -c tiny_lora "${sft_data[@]}"
  checkpoint.load= train.global_batch_size=4 train.micro_batch_size=2 train.train_iters=4 train.eval_interval=2
  train.eval_iters=1 scheduler.lr_warmup_iters=1 checkpoint.save_interval=2 logger.log_interval=1
  logger.tensorboard_dir=null)
drop=(peft.dropout=0.1)

# The single process with adapter dropout ($TMP/dp1, same_run's reference).
expect_ok "one process, dropout 0.1" '^ iteration +4/ +4 ' "${run[@]}" "${drop[@]}" checkpoint.save="$TMP/dp1"

lora_layout() {  # NAME NP OVERRIDES...
  local name=$1 np=$2
  shift 2
  if mpi "$np" "$name" checkpoint.save="$TMP/$name" "$@" "${drop[@]}"; then same_run "LoRA $name" "$TMP/$name" 4 0 1e-4; fi
}
lora_layout tp2 2 model.tensor_model_parallel_size=2
lora_layout tp2sp 2 model.tensor_model_parallel_size=2 model.sequence_parallel=true
lora_layout cp2 2 model.context_parallel_size=2
lora_layout cp2tp2sp 4 model.context_parallel_size=2 model.tensor_model_parallel_size=2 model.sequence_parallel=true
# TP 2 x DP 2 with the distributed optimizer: the whole factors' partial gradients summed over the
# tensor group before the data group's reduce-scatter; each sample's dropout masks one process's.
lora_layout tp2dp2zero 4 model.tensor_model_parallel_size=2 "${zero[@]}"
grep -q '^rank layout: DP 1 x EP 1 x TP 2 x CP 2 over 4 ranks' "$TMP/out.cp2tp2sp" ||
  fail "the CP 2 x TP 2 run does not print its layout: $(head -5 "$TMP/out.cp2tp2sp")"

# A TP 2 checkpoint (iteration 2) continues in one process as the uninterrupted one.
expect_ok "TP 2 LoRA checkpoint in one process" '^ iteration +4/ +4 ' "${run[@]}" "${drop[@]}" \
  checkpoint.load="$TMP/tp2/iter_0000002" checkpoint.save="$TMP/tp2to1"
same_run "TP 2 LoRA checkpoint resumed in one process" "$TMP/tp2to1" 4 3 1e-4

# PEFT's adapter files of the TP 2 run: the one process's.
expect_ok "export-lora of TP 2" 'wrote' "$BIN" convert export-lora --adapter "$TMP/tp2" --output "$TMP/peft_tp2"
expect_ok "export-lora of one process" 'wrote' "$BIN" convert export-lora --adapter "$TMP/dp1" --output "$TMP/peft1"
if msg=$(python3 tests/cli/safetensors_diff.py "$TMP/peft_tp2/adapter_model.safetensors" \
  "$TMP/peft1/adapter_model.safetensors" 1e-4 1e-4); then
  echo "ok: export-lora of the TP 2 run equals one process's ($msg)"
else
  fail "export-lora of the TP 2 run differs: $msg"
fi

# merge-lora of the TP 2 run (its split adapters loaded whole into one process's model): the merged
# weights of one process's run.
expect_ok "merge-lora of TP 2" 'wrote' "$BIN" convert merge-lora --adapter "$TMP/tp2" --output "$TMP/merged_tp2"
expect_ok "merge-lora of one process" 'wrote' "$BIN" convert merge-lora --adapter "$TMP/dp1" --output "$TMP/merged1"
if msg=$(python3 tests/cli/safetensors_diff.py "$TMP/merged_tp2/model.safetensors" "$TMP/merged1/model.safetensors" \
  1e-4 1e-4); then
  echo "ok: merge-lora of the TP 2 run equals one process's ($msg)"
else
  fail "merge-lora of the TP 2 run differs: $msg"
fi

finish "LoRA under tensor, sequence and context parallelism"
