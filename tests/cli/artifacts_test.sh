#!/usr/bin/env bash
# Artifacts and lineage as a user sees them: data prep publishes its output, training publishes a
# model artifact per checkpoint save, a fine-tune records the data and the checkpoint it started
# from; an unchanged rerun makes no new version, a changed output makes the next one and leaves the
# old one as it was; `nemotron artifacts list|show|lineage`; bad references as one line, exit 2.
# Usage: artifacts_test.sh path/to/nemotron
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

cd "$TMP"  # names come from paths below ./runs
expect_ok "data prep pretrain" 'artifact:  tiny-data-pretrain:v1 \(PretrainBlendsArtifact\)' \
  "$BIN" super3 data prep pretrain -c tiny output_dir=runs/tiny/data/pretrain
expect_ok "pretrain 2 steps" '^ iteration +2/ +2 ' "$BIN" super3 pretrain -c tiny \
  dataset.per_split_data_args_path=runs/tiny/data/pretrain/blend.json train.train_iters=2 train.eval_iters=0 \
  train.eval_interval=0 scheduler.lr_warmup_iters=1 scheduler.lr_wsd_decay_iters=1 checkpoint.save=runs/tiny/pretrain \
  checkpoint.save_interval=1
expect_ok "data prep sft" 'artifact:  tiny-data-sft:v1 \(SFTDataArtifact\)' "$BIN" super3 data prep sft -c tiny \
  output_dir=runs/tiny/data/sft tokenizer.model=runs/tiny/data/pretrain/tokenizer/tokenizer.json \
  sources.0.generator.num_examples=100 heldout_examples=10
expect_ok "sft 1 step" '^ iteration +1/ +1 ' "$BIN" super3 sft -c tiny dataset.dataset_root=runs/tiny/data/sft \
  checkpoint.pretrained_checkpoint=runs/tiny/pretrain checkpoint.save=runs/tiny/sft checkpoint.load=runs/tiny/sft \
  train.global_batch_size=2 train.micro_batch_size=1 train.train_iters=1 train.eval_interval=0 train.eval_iters=0 \
  scheduler.lr_warmup_iters=0

expect_ok "list" '^tiny-pretrain +v2 +model .*iteration=2 +\(2 versions\)' "$BIN" artifacts list
for n in tiny-data-pretrain tiny-data-sft tiny-sft; do grep -q "^$n " "$TMP/out" || fail "list: no $n: $(cat "$TMP/out")"; done
[[ -f artifacts/tiny-pretrain/v1/manifest.json && -f artifacts/tiny-pretrain/v1/metadata.json &&
  "$(cat artifacts/tiny-pretrain/latest)" == v2 ]] || fail "store layout: $(find artifacts | head -20)"

expect_ok "lineage" '^tiny-sft:v1 \(model\)' "$BIN" artifacts lineage tiny-sft
expected="tiny-sft:v1
  <- tiny-data-sft:v1
    <- tiny-data-pretrain:v1
  <- tiny-pretrain:v2
    <- tiny-data-pretrain:v1"
[[ "$(sed -E 's/ \(.*//' "$TMP/out")" == "$expected" ]] || fail "lineage: $(cat "$TMP/out")"
expect_ok "show by alias" '^tiny-pretrain:v1 \(model\)' "$BIN" artifacts show tiny-pretrain:iter_0000001
expect_ok "show --json" '"content_hash"' "$BIN" artifacts show tiny-data-sft:v1 --json

# Unchanged: no new version. Changed output: the next version, the old one untouched.
expect_ok "data prep sft again" 'artifact:  tiny-data-sft:v1 ' "$BIN" super3 data prep sft -c tiny \
  output_dir=runs/tiny/data/sft tokenizer.model=runs/tiny/data/pretrain/tokenizer/tokenizer.json \
  sources.0.generator.num_examples=100 heldout_examples=10
before=$(cat artifacts/tiny-data-sft/v1/manifest.json)
expect_ok "data prep sft changed" 'artifact:  tiny-data-sft:v2 ' "$BIN" super3 data prep sft -c tiny --force \
  output_dir=runs/tiny/data/sft tokenizer.model=runs/tiny/data/pretrain/tokenizer/tokenizer.json \
  sources.0.generator.num_examples=120 heldout_examples=10
[[ "$(cat artifacts/tiny-data-sft/v1/manifest.json)" == "$before" ]] || fail "v1 changed when v2 was written"

# A recipe that names its inputs by artifact (§5.6): run.data / run.model and ${art:NAME,FIELD}.
expect_ok "sft from artifacts" '^artifact tiny-data-sft:v1: '"$TMP"'/runs/tiny/data/sft$' "$BIN" super3 sft -c tiny \
  run.data=tiny-data-sft:v1 'dataset.dataset_root=${art:data,path}' run.model=tiny-pretrain:iter_0000002 \
  'checkpoint.pretrained_checkpoint=${art:model,path}' checkpoint.save=runs/tiny/sft2 checkpoint.load=runs/tiny/sft2 \
  train.global_batch_size=2 train.micro_batch_size=1 train.train_iters=1 train.eval_interval=0 train.eval_iters=0 \
  scheduler.lr_warmup_iters=0
grep -q "^artifact tiny-pretrain:v2: $TMP/runs/tiny/pretrain$" "$TMP/out" || fail "sft from artifacts: no model line"
expect_error "missing artifact in a recipe" \
  "artifact tiny-data-sft:v9 not found in $TMP/artifacts (have: tiny-data-sft has v1 v2)" \
  "$BIN" super3 sft -c tiny run.data=tiny-data-sft:v9 'dataset.dataset_root=${art:data,path}'
expect_error "no run.model" \
  "$ROOT/recipes/super3/sft/tiny.yaml: checkpoint.pretrained_checkpoint: \${art:model,...} needs run.model = an artifact reference (NAME:latest or NAME:vN)" \
  "$BIN" super3 sft -c tiny 'checkpoint.pretrained_checkpoint=${art:model,path}'

# Bad references.
expect_error "unknown version" "artifact tiny-sft:v7 not found in $TMP/artifacts (have: tiny-sft has v1)" \
  "$BIN" artifacts show tiny-sft:v7
expect_error "bad name" 'artifacts show: "../x" is not an artifact reference (NAME or NAME:VERSION, NAME of letters, digits, '"'"'.'"'"', '"'"'_'"'"', '"'"'-'"'"')' \
  "$BIN" artifacts show ../x
expect_ok "another root" '^no artifacts in ' "$BIN" artifacts list --root "$TMP/empty"

finish "artifacts published by data prep, pretrain and sft; versions, aliases, lineage, bad references"
