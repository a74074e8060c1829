#!/usr/bin/env bash
# The planner (issue 23 §5, train/gpu_plan.h) in `--dry-run`: the default super3 recipe launched
# on 8 nodes x 8 GPUs (an env.toml slurm profile; a dry run needs no cluster) prints a compact rank
# table with each rank's node and GPU, each GPU's memory (weights, gradients, optimizer,
# activations with and without recompute), the communication per step of every group and whether
# it crosses nodes, and, as it does not fit an 80 GB H100, the knob: the overrides it prints are
# then applied and the plan fits. A profile's gpu_memory_gib replaces the assumed 80 GiB; nano3
# and super49b plan too; full parameter sharding divides nano3's weights; a bad gpu_memory_gib is
# one line naming the key.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

cat >"$TMP/env.toml" <<'TOML'
[nodes8]
executor = "slurm"
nodes = 8
ntasks_per_node = 8
gpus_per_node = 8

[nodes16]
extends = "nodes8"
nodes = 16

[h200]
extends = "nodes8"
gpu_memory_gib = 141

[bad]
extends = "nodes8"
gpu_memory_gib = "lots"
TOML
launch=(--run nodes8 --env-file "$TMP/env.toml")

expect_ok "super3 pretrain --dry-run on 8 x 8 GPUs plans each GPU" \
  '^--- per GPU: DP 64 x EP 1 x TP 1 x CP 1 over 64 ranks on 64 GPUs \(8 per node\), 80\.00 GiB each \(assumed' \
  "$BIN" super3 pretrain --dry-run "${launch[@]}"
for want in '^  rank 0 \(node 0, GPU 0\): dp 0, ' '^  \.\.\. rank = tp \+ 1 x \(cp \+ 1 x dp\).*node = rank / 8' \
  '^  rank 63 \(node 7, GPU 7\): dp 63, ' '^  parameters +123\.61 B ' '^  weights +230\.2[0-9] GiB  \(bf16\)' \
  '^  gradients +[0-9.]+ GiB  \(float32' '^  optimizer +[0-9.]+ TiB  \(float32 masters \+ Adam moments, whole' \
  '^  activations +[0-9.]+ GiB  \(one micro-batch of 1 x 8192 tokens, bf16\) <- in use' \
  '^    with recompute +[0-9.]+ GiB  \(model\.recompute_granularity=full\)$' '^  per GPU +[0-9.]+ TiB  DOES NOT FIT 80\.00 GiB' \
  '^    data +64 ranks, across 8 nodes: [0-9.]+ GiB -> sends [0-9.]+ GiB; all-reduce of 123\.61 B float32 gradients' \
  '^  knob: set .*ddp\.use_distributed_optimizer=true.* \(about [0-9.]+ GiB per GPU\)$'; do
  grep -qE -- "$want" "$TMP/out" || fail "super3 plan: no line /$want/"
done
rows=$(grep -cE '^  rank [0-9]+ ' "$TMP/out")
[[ $rows -le 17 ]] || fail "super3 plan: $rows rank rows for 64 ranks (expected the first ranks and the pattern)"

# The knob's overrides, applied: the plan fits, every group that talks is listed, no knob.
read -r -a knob <<<"$(sed -n 's/^  knob: set \(.*\) (about .*/\1/p' "$TMP/out")"
[[ ${#knob[@]} -gt 0 ]] || fail "super3 plan: no knob to apply"
expect_ok "the knob's overrides make super3 fit" '^  per GPU +[0-9.]+ GiB  fits 80\.00 GiB$' \
  "$BIN" super3 pretrain --dry-run "${launch[@]}" "${knob[@]}"
grep -q '^  knob:' "$TMP/out" && fail "a plan that fits names a knob"
for want in '^    tensor +[0-9]+ ranks, inside a node: ' '^    expert +[0-9]+ ranks, across [0-9]+ nodes: .* all-to-alls of \[8192 x top-22 x 1024\] bf16 rows'; do
  grep -qE -- "$want" "$TMP/out" || fail "super3 with the knob: no line /$want/ ($(grep -A4 communication "$TMP/out"))"
done

expect_ok "the profile's gpu_memory_gib replaces the assumed H100" '^--- per GPU: .*, 141\.00 GiB each \(the profile.s gpu_memory_gib\)' \
  "$BIN" super3 pretrain --dry-run --run h200 --env-file "$TMP/env.toml"
expect_ok "nano3 pretrain plans on 16 nodes" '^--- per GPU: DP 128 x EP 1 x TP 1 x CP 1 over 128 ranks on 128 GPUs' \
  "$BIN" nano3 pretrain --dry-run --run nodes16 --env-file "$TMP/env.toml"
grep -qE '^  knob: set ' "$TMP/out" || fail "nano3 plan: no knob"
expect_ok "super49b sft plans on 8 nodes" '^  per GPU +[0-9.]+ [GT]iB  (fits|DOES NOT FIT) 80\.00 GiB' \
  "$BIN" super49b sft --dry-run "${launch[@]}" train.global_batch_size=64
# Full parameter sharding (ddp.data_parallel_sharding_strategy=optim_grads_params) on nano3 over 8
# x 8 GPUs: the bf16 weights split over the 64 data ranks plus the gathered buffers, less than
# the whole weights, and the float32 gradients split too (plus the embedding's, head's, MTP's and
# two layers' whole), so the plan fits an 80 GB GPU (the whole gradient buffer alone would not);
# the data group gathers the weights per micro-batch.
fsdp=(ddp.use_megatron_fsdp=true ddp.data_parallel_sharding_strategy=optim_grads_params)
expect_ok "nano3 plans with full parameter sharding" \
  '^  weights +[0-9.]+ GiB  \(bf16, split over 64 data-parallel ranks by full parameter sharding \+ [0-9.]+ GiB gathered' \
  "$BIN" nano3 pretrain --dry-run "${launch[@]}" "${fsdp[@]}"
sharded=$(sed -n 's/^  weights \+\([0-9.]*\) GiB.*/\1/p' "$TMP/out")
grep -qE '^    data +64 ranks.*all-gather of their bf16 values twice per micro-batch \(full parameter sharding\)' "$TMP/out" ||
  fail "nano3 with FSDP: no per-micro-batch gather in the data group's traffic"
grep -qE '^  gradients +[0-9.]+ GiB  \(float32, split over 64 data-parallel ranks by gradient sharding \+ [0-9.]+ GiB whole' "$TMP/out" ||
  fail "nano3 with FSDP: the gradients are not split: $(grep -E '^  gradients' "$TMP/out")"
grep -qE '^  per GPU +[0-9.]+ GiB  fits 80\.00 GiB' "$TMP/out" ||
  fail "nano3 with FSDP: does not fit: $(grep -E '^  (per GPU|knob)' "$TMP/out")"
"$BIN" nano3 pretrain --dry-run "${launch[@]}" >"$TMP/out" 2>&1
whole=$(sed -n 's/^  weights \+\([0-9.]*\) GiB.*/\1/p' "$TMP/out")
python3 -c 'import sys; sys.exit(0 if 0 < float(sys.argv[1]) < float(sys.argv[2]) else 1)' "$sharded" "$whole" &&
  echo "ok: full parameter sharding plans $sharded GiB of weights per GPU instead of $whole" ||
  fail "full parameter sharding plans $sharded GiB of weights per GPU, without it $whole"

# A single process plans one GPU (no profile, no rank table).
expect_ok "a single process plans its one GPU" '^--- per GPU: DP 1 x EP 1 x TP 1 x CP 1 over 1 rank on 1 GPU, ' \
  "$BIN" super3 pretrain -c tiny --dry-run
grep -q '^rank layout' "$TMP/out" && fail "one process printed a rank table"
expect_usage_error "a bad gpu_memory_gib names the key" 'env\.toml: \[bad\] gpu_memory_gib: expected a positive number of GiB, got "lots"' \
  "$BIN" super3 pretrain --dry-run --run bad --env-file "$TMP/env.toml"

finish "planner checks"
