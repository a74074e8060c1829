#!/usr/bin/env bash
# `nemotron convert ...` and `nemotron compare` as a user runs them on tests/fixtures/hf: the happy
# paths (import, export, round trip, compare against transformers' reference) and bad input (exit
# 2 with one `error: <file>: ...` line, nothing on stdout), failed verdicts (exit 1).
# Usage: convert_cli_test.sh path/to/nemotron
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
F=tests/fixtures/hf

# --- import, export, round trip ------------------------------------------------------------------
expect_ok "import" "^wrote $TMP/ckpt in .*model.safetensors, config.yaml, tokenizer/ \(tokenizer.json, tokenizer_config.json\)$" \
  "$BIN" convert import --hf-model $F/dense --out "$TMP/ckpt"
expect_ok "model info reads the imported config.yaml" '^  total +37,016 ' "$BIN" model info -c "$TMP/ckpt/config.yaml"
expect_ok "export (sharded)" 'model.safetensors.index.json, config.json, tokenizer.json, tokenizer_config.json$' \
  "$BIN" convert export --checkpoint "$TMP/ckpt" --out "$TMP/hf" --max-shard-size 50KB
expect_ok "roundtrip fused layout" '^verdict: LOSSLESS \(63 tensors identical in name, dtype, shape and bytes\)$' \
  "$BIN" convert roundtrip --hf-model $F/moe-fused
expect_ok "roundtrip bf16 with --work" '^backbone.layers.\*.mixer.gate.e_score_correction_bias +2  F32 +identical$' \
  "$BIN" convert roundtrip --hf-model $F/moe-bf16 --work "$TMP/work"
expect_ok "import --dtype bf16" 'BF16 \(\+ F32: 2 tensors\)' \
  bash -c "'$BIN' convert import --hf-model $F/moe --out '$TMP/bf16' --dtype bf16 && '$BIN' convert export --checkpoint '$TMP/bf16' --out '$TMP/bf16-hf'"

# --- compare against transformers' reference -----------------------------------------------------
expect_ok "compare float64 with gradients" '^verdict: PASS \(63 tensors compared, 0 failed' \
  "$BIN" compare --hf-model $F/moe --input-ids $F/moe.reference.safetensors --grads --reference $F/moe.reference.safetensors
expect_ok "compare prints the loss" '^mean next-token loss: 5\.834864 over 30 tokens' \
  "$BIN" compare --hf-model $F/dense-fused --input-ids $F/dense.reference.safetensors
expect_ok "compare --dump then check the dump" '^verdict: PASS' \
  bash -c "'$BIN' compare --hf-model $F/ragged --input-ids $F/ragged.reference.safetensors --grads --dtype float32 --dump '$TMP/dump.safetensors' >/dev/null && '$BIN' compare --hf-model $F/ragged --input-ids $F/ragged.reference.safetensors --grads --reference '$TMP/dump.safetensors' --grads-tol 1e-4"
expect_failure "compare against the wrong reference" 'FAIL: reference shape \[2, 12, 96\]' 'tensors differ from' \
  "$BIN" compare --hf-model $F/tied --input-ids $F/tied.reference.safetensors --reference $F/moe.reference.safetensors
expect_failure "compare with a tolerance float32 cannot meet" '^verdict: FAIL' 'compare: [12] of 2 tensors differ' \
  "$BIN" compare --hf-model $F/moe_flat --input-ids $F/moe_flat.reference.safetensors --dtype float32 \
  --reference $F/moe_flat.reference.safetensors --logits-tol 1e-9 --grads-tol 1

# Tolerances: 0 asks for an exact match (float32 against float64 is not); a negative or NaN one is
# bad input, not the default in disguise.
expect_failure "compare --logits-tol 0 is exact" 'FAIL \(tolerance 0 \(exact\)\)' 'compare: [12] of 2 tensors differ' \
  "$BIN" compare --hf-model $F/moe_flat --input-ids $F/moe_flat.reference.safetensors --dtype float32 \
  --reference $F/moe_flat.reference.safetensors --logits-tol 0
expect_ok "compare --logits-tol 0 passes an identical dump" '^verdict: PASS \(2 tensors compared, 0 failed; tolerances: logits 0 \(exact\)' \
  bash -c "'$BIN' compare --hf-model $F/dense --input-ids $F/dense.reference.safetensors --dtype float32 --dump '$TMP/exact.safetensors' >/dev/null && '$BIN' compare --hf-model $F/dense --input-ids $F/dense.reference.safetensors --dtype float32 --reference '$TMP/exact.safetensors' --logits-tol 0"
expect_error "compare negative tolerance" "--logits-tol: expected a relative error >= 0 (0 = exact match), got -0.0001" \
  "$BIN" compare --hf-model $F/dense --input-ids $F/dense.reference.safetensors --reference $F/dense.reference.safetensors --logits-tol -1e-4
expect_error "compare NaN tolerance" "--grads-tol: expected a relative error >= 0 (0 = exact match), got nan" \
  "$BIN" compare --hf-model $F/dense --input-ids $F/dense.reference.safetensors --grads --reference $F/dense.reference.safetensors --grads-tol nan
# Gradients missing from the reference are counted apart from the tensors compared.
expect_failure "compare counts missing references apart" '^verdict: FAIL \(2 tensors compared, 0 failed, [0-9]+ missing from the reference;' \
  'compare: 0 of 2 tensors differ from .*; [0-9]+ have no reference' \
  "$BIN" compare --hf-model $F/dense --input-ids $F/dense.reference.safetensors --grads --reference "$TMP/exact.safetensors"

# --prompt: the ids are the ones HF tokenizers 0.23.2 gave for this text when the fixture was made
# (tools/make_hf_fixtures.py logs them), and the exported directory carries the same tokenizer.
expect_ok "compare --prompt" '^prompt: 10 tokens \(.*tokenizer.json\): \[276, 78, 81, 14, 223, 89, 287, 260, 84, 71\]$' \
  "$BIN" compare --hf-model $F/dense --prompt "Hello, who are"
expect_ok "compare --prompt shows the next tokens" '^  1\. +[0-9]+  p = 0\.[0-9]{4}  ' \
  "$BIN" compare --hf-model "$TMP/hf" --prompt "Hello, who are"

# --- bad input: exit 2, one line ------------------------------------------------------------------
mkdir -p "$TMP/empty" "$TMP/noweights" "$TMP/wrongshape"
cp $F/dense/config.json "$TMP/noweights/"
sed 's/"vocab_size": 96/"vocab_size": 97/' $F/ragged/config.json >"$TMP/wrongshape/config.json"
cp $F/ragged/model.safetensors "$TMP/wrongshape/"
expect_error "no config.json" "$TMP/empty: no config.json (expected a Hugging Face model directory with config.json and *.safetensors)" \
  "$BIN" convert import --hf-model "$TMP/empty" --out "$TMP/x1"
expect_error "no weights" "$TMP/noweights: no weights (expected model.safetensors or model.safetensors.index.json)" \
  "$BIN" convert import --hf-model "$TMP/noweights" --out "$TMP/x2"
expect_error "wrong shape" "$TMP/wrongshape/model.safetensors: tensor \"backbone.embeddings.weight\" has shape [96, 32], expected [97, 32] from config.json (pattern \"MM*-M\", hidden_size 32, vocab_size 97)" \
  "$BIN" convert import --hf-model "$TMP/wrongshape" --out "$TMP/x3"
expect_error "compare wrong shape" "$TMP/wrongshape/model.safetensors: tensor \"backbone.embeddings.weight\" has shape [96, 32], expected [97, 32] from config.json (pattern \"MM*-M\", hidden_size 32, vocab_size 97)" \
  "$BIN" compare --hf-model "$TMP/wrongshape" --input-ids $F/dense.reference.safetensors
expect_error "non-empty --out" "$TMP/ckpt: exists and is not empty (pass --force to replace the checkpoint files in it)" \
  "$BIN" convert import --hf-model $F/dense --out "$TMP/ckpt"
expect_ok "--force replaces" '^wrote ' "$BIN" convert import --hf-model $F/dense --out "$TMP/ckpt" --force
# The tokenizer is validated on import (with the tokenizer code that training and compare use),
# before anything is written.
mkdir -p "$TMP/badtok" "$TMP/wordpiece" "$TMP/bigtok"
cp $F/dense/config.json $F/dense/model.safetensors "$TMP/badtok/"
cp $F/dense/config.json $F/dense/model.safetensors "$TMP/wordpiece/"
cp $F/dense/config.json $F/dense/model.safetensors "$TMP/bigtok/"
printf '{"version": "1.0", "model": {' >"$TMP/badtok/tokenizer.json"
sed 's/"type": "BPE"/"type": "WordPiece"/' $F/dense/tokenizer.json >"$TMP/wordpiece/tokenizer.json"
# One added token more than the 288 rows of the embedding table (HF numbers it 288, whatever its "id").
sed 's/"added_tokens": \[/"added_tokens": [{"id": 400, "content": "<extra>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},/' \
  $F/dense/tokenizer.json >"$TMP/bigtok/tokenizer.json"
"$BIN" convert import --hf-model "$TMP/badtok" --out "$TMP/x6" >"$TMP/out" 2>"$TMP/err"
rc=$?
if [[ $rc -eq 2 && "$(cat "$TMP/err")" == "error: $TMP/badtok/tokenizer.json: JSON parse error"* && ! -e "$TMP/x6" ]]; then
  echo "ok: import refuses an unparsable tokenizer.json"
else
  fail "import of an unparsable tokenizer.json: exit $rc, stderr $(cat "$TMP/err"), out $(ls "$TMP/x6" 2>&1)"
fi
"$BIN" convert import --hf-model "$TMP/wordpiece" --out "$TMP/x7" >"$TMP/out" 2>"$TMP/err"
rc=$?
if [[ $rc -eq 2 && "$(cat "$TMP/err")" == "error: $TMP/wordpiece/tokenizer.json: "*WordPiece* && ! -e "$TMP/x7" ]]; then
  echo "ok: import refuses an unsupported tokenizer.json"
else
  fail "import of an unsupported tokenizer.json: exit $rc, stderr $(cat "$TMP/err"), out $(ls "$TMP/x7" 2>&1)"
fi
expect_error "import refuses a tokenizer larger than the vocabulary" \
  "$TMP/bigtok/tokenizer.json: 289 tokens, more than the model's vocab_size 288 (config.json): a tokenizer of another model?" \
  "$BIN" convert import --hf-model "$TMP/bigtok" --out "$TMP/x8"

# export --force replaces the model as a whole: no tokenizer of an earlier model is left behind,
# and files convert does not write (the user's notes) are kept.
expect_ok "import without a tokenizer" '^wrote ' "$BIN" convert import --hf-model $F/moe --out "$TMP/notok"
echo "my notes" >"$TMP/hf/NOTES.md"
expect_ok "export --force over an export with a tokenizer" '^wrote ' \
  "$BIN" convert export --checkpoint "$TMP/notok" --out "$TMP/hf" --force
[[ ! -e "$TMP/hf/tokenizer.json" && ! -e "$TMP/hf/tokenizer_config.json" && ! -e "$TMP/hf/model.safetensors.index.json" ]] &&
  echo "ok: no stale tokenizer or shard index after export --force" || fail "export --force left $(ls "$TMP/hf")"
[[ "$(cat "$TMP/hf/NOTES.md")" == "my notes" ]] && echo "ok: export --force keeps the user's files" ||
  fail "export --force lost NOTES.md: $(ls "$TMP/hf")"
[[ -z "$(ls -d "$TMP"/hf.* 2>/dev/null)" ]] || fail "export left staging directories: $(ls -d "$TMP"/hf.*)"
expect_error "export of a non-checkpoint" "$F/dense: not a checkpoint (expected config.yaml, or latest_checkpointed_iteration.txt naming an iteration)" \
  "$BIN" convert export --checkpoint $F/dense --out "$TMP/x4"
expect_error "bad shard size" '--max-shard-size: expected a size such as 5GB, 500MB or 2GiB, got "lots"' \
  "$BIN" convert export --checkpoint "$TMP/ckpt" --out "$TMP/x5" --max-shard-size lots
expect_error "--prompt without a tokenizer" \
  "$F/moe: no tokenizer.json to encode --prompt with; pass --input-ids FILE (safetensors with int64 input_ids [B, T])" \
  "$BIN" compare --hf-model $F/moe --prompt "Hello, who are"
expect_error "input ids outside the vocabulary" "$F/dense.reference.safetensors: input_ids[0, 0] = 210 is outside the vocabulary [0, 96)" \
  "$BIN" compare --hf-model $F/moe --input-ids $F/dense.reference.safetensors
expect_error "input file without input_ids" "$F/moe/model.safetensors: no tensor \"input_ids\" (expected int64 input_ids [B, T])" \
  "$BIN" compare --hf-model $F/moe --input-ids $F/moe/model.safetensors

finish "convert/compare CLI checks"
