#!/usr/bin/env bash
# Context parallelism (issue 23, model.context_parallel_size) under a real launcher: each context
# rank holds 2 of the 2C chunks of every sequence (chunks r and 2C-1-r, Megatron's causal load
# balance); attention all-gathers K/V over the context group, Mamba passes its conv halo and its
# scan state from chunk to chunk, per-token layers run on the local rows, and the gradients are
# summed over data x context. The tiny super3 recipe (trunk M*M-ME: Mamba-2, GQA attention, MLP,
# latent MoE with a shared expert and the expert-bias update; MTP block *E at two depths, whose
# shifted targets read the tokens after each chunk), first without seq_aux_loss, 4 steps with
# validation, as one process and at CP 2, CP 4, CP 2 x TP 2 and CP 2 x DP 2: every loss and the
# weights at iteration 4 equal the single process's within float32 rounding of another summation
# order (cli.tensor_parallel's tolerances); then with seq_aux_loss. Then packed SFT at CP 2
# (sequence boundaries inside and across chunks), DeciLM (RoPE at global positions, per-layer GQA)
# at CP 2, a CP 2 checkpoint continued in one process, and the layouts that cannot run.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
source "$(dirname "${BASH_SOURCE[0]}")/mpi_lib.sh"

noaux=(moe.moe_router_load_balancing_type=none)
run=("$BIN" super3 pretrain -c tiny dataset.mock=true train.train_iters=6 train.global_batch_size=4
  train.micro_batch_size=2 train.eval_interval=2 train.eval_iters=1 logger.tensorboard_dir=null
  scheduler.lr_warmup_iters=1 scheduler.lr_wsd_decay_iters=3 "${noaux[@]}")
expect_ok "one process" '^ iteration +6/ +6 ' "${run[@]}" checkpoint.save="$TMP/dp1" checkpoint.save_interval=2

LAYOUT_ATOL=1e-4  # weights: cli.tensor_parallel's tolerance for partial sums in another order
# CP 4 with full recomputation (the mixers' forwards rerun on the chunks in the backward), CP 2 x
# TP 2 with sequence parallelism, CP 2 x DP 2 with the distributed optimizer (the gradients summed
# over context, then reduce-scattered over data).
layout cp2 2 model.context_parallel_size=2
layout cp4 4 model.context_parallel_size=4 model.recompute_granularity=full
layout cp2tp2 4 model.context_parallel_size=2 model.tensor_model_parallel_size=2 model.sequence_parallel=true
layout cp2dp2 4 model.context_parallel_size=2 "${zero[@]}"
# Small buckets: each summed over context and reduce-scattered from the last backward's layer hook.
layout cp2dp2b 4 model.context_parallel_size=2 "${zero[@]}" ddp.bucket_size=20000
grep -q '^rank layout: DP 2 x EP 1 x TP 1 x CP 2 over 4 ranks' "$TMP/out.cp2dp2" ||
  fail "the run does not print its layout: $(head -5 "$TMP/out.cp2dp2")"

# seq_aux_loss (the recipes' balancing) at CP 2, CP 2 x TP 2 (sequence parallel) and CP 2 x DP 2:
# each row's expert counts are summed over the context group and the row length is the whole
# row's, so the router's gradient on each rank's tokens is one process's (a coefficient 1000 times
# the recipe's makes a wrong one show in the weights), and the logged load-balancing loss (each
# rank's part, summed) is one process's.
run=("${run[@]}" moe.moe_router_load_balancing_type=seq_aux_loss moe.moe_aux_loss_coeff=0.1)
expect_ok "one process, seq_aux_loss" '^ iteration +6/ +6 ' "${run[@]}" checkpoint.save="$TMP/aux1" checkpoint.save_interval=2
aux_losses() {
  python3 -c 'import json,sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") == "train" and r["iteration"] <= 4: print(repr(r["load_balancing_loss"]))' "$1"
}
aux_losses "$TMP/aux1/metrics.jsonl" >"$TMP/aux1.lb"
mv "$TMP/dp1" "$TMP/dp1.keep" && cp -r "$TMP/aux1" "$TMP/dp1"
for l in "auxcp2 2 model.context_parallel_size=2" \
  "auxcp2tp2 4 model.context_parallel_size=2 model.tensor_model_parallel_size=2 model.sequence_parallel=true" \
  "auxcp2dp2 4 model.context_parallel_size=2 ${zero[*]}"; do
  read -r -a args <<<"$l"
  layout "${args[@]}"
  [[ -f $TMP/${args[0]}/metrics.jsonl ]] || continue
  aux_losses "$TMP/${args[0]}/metrics.jsonl" >"$TMP/${args[0]}.lb"
  if msg=$(close "$TMP/${args[0]}.lb" "$TMP/aux1.lb" 1e-5); then
    echo "ok: ${args[0]}: load-balancing losses equal one process's ($msg)"
  else
    fail "${args[0]}: load-balancing losses differ ($msg): $(paste -d' ' "$TMP/${args[0]}.lb" "$TMP/aux1.lb" | tr '\n' ';')"
  fi
done
rm -rf "$TMP/dp1" && mv "$TMP/dp1.keep" "$TMP/dp1"
run=("${run[@]}" "${noaux[@]}")

# A CP 2 checkpoint (params replicated over the context ranks: one writer) continues in one process.
expect_ok "CP 2 checkpoint in one process" '^ iteration +6/ +6 ' "${run[@]}" checkpoint.load="$TMP/cp2" \
  checkpoint.save="$TMP/cp2to1" checkpoint.save_interval=0
same_run "CP 2 checkpoint resumed in one process" "$TMP/cp2to1" 6 5 1e-4

# Packed SFT at CP 2: rows of several conversations whose boundaries fall inside and across the
# chunks (attention masks and Mamba state restarts from the global sequence ids).
sft_setup 0 60 0
run=("$BIN" super3 sft -c tiny "${sft_data[@]}" checkpoint.load= train.global_batch_size=2
  train.micro_batch_size=1 train.train_iters=2 train.eval_interval=2 train.eval_iters=1 scheduler.lr_warmup_iters=1
  checkpoint.save_interval=2 logger.log_interval=1 logger.tensorboard_dir=null "${noaux[@]}")
expect_ok "SFT, one process" '^ iteration +2/ +2 ' "${run[@]}" checkpoint.save="$TMP/sft1"
if mpi 2 sft_cp2 model.context_parallel_size=2 checkpoint.save="$TMP/sft_cp2"; then
  same_run_as sft1 1e-4 "packed SFT at CP 2" "$TMP/sft_cp2" 2 0
fi

# DeciLM (super49b tiny: RoPE, per-layer KV heads, no_op attention, SwiGLU) at CP 2.
run=("$BIN" super49b pretrain -c tiny dataset.mock=true train.train_iters=2 train.global_batch_size=4
  train.micro_batch_size=2 train.eval_interval=2 train.eval_iters=1 logger.tensorboard_dir=null
  scheduler.lr_warmup_iters=1 scheduler.lr_wsd_decay_iters=1 checkpoint.save_interval=2)
expect_ok "DeciLM, one process" '^ iteration +2/ +2 ' "${run[@]}" checkpoint.save="$TMP/decilm1"
if mpi 2 decilm_cp2 model.context_parallel_size=2 checkpoint.save="$TMP/decilm_cp2"; then
  same_run_as decilm1 1e-4 "DeciLM at CP 2" "$TMP/decilm_cp2" 2 0
fi

# Layouts that cannot run: one line naming the key, exit 2, before anything starts.
recipe=recipes/super3/pretrain/tiny.yaml
tiny=("$BIN" super3 pretrain -c tiny dataset.mock=true checkpoint.save="$TMP/bad")
bad_layout "CP not dividing the sequence" 2 \
  "$recipe: model.context_parallel_size: 2 cuts each sequence into 2 x 2 = 4 equal chunks (two per rank, for causal load balance), which must divide dataset.seq_length 130" \
  "${tiny[@]}" "${noaux[@]}" model.context_parallel_size=2 dataset.seq_length=130
bad_layout "CP chunks shorter than the conv window" 2 \
  "$recipe: model.context_parallel_size: 2 cuts each sequence into chunks of 2 tokens, fewer than the 3 before a token that Mamba's conv1d reads (model.conv_kernel - 1)" \
  "${tiny[@]}" "${noaux[@]}" model.context_parallel_size=2 dataset.seq_length=8
bad_layout "CP x TP over too few ranks" 2 \
  "$recipe: model.tensor_model_parallel_size: 2 x model.context_parallel_size 2 = 4 does not divide the world size 2 (ranks started by the launcher)" \
  "${tiny[@]}" "${noaux[@]}" model.context_parallel_size=2 model.tensor_model_parallel_size=2

finish "context parallelism (CP 2, CP 4, CP 2 x TP 2, CP 2 x DP 2, seq_aux_loss, packed SFT, DeciLM) equals one process; bad layouts refused"
