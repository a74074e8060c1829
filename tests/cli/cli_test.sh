#!/usr/bin/env bash
# Runs the built `nemotron` binary as a user would: --version, --help, `model info` on every
# recipe and fixture (exit 0), and on broken inputs (exit 2 with one `error: <file>: <key>:
# <problem>` line on stderr). Usage: cli_test.sh path/to/nemotron
set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

# --- version and help -----------------------------------------------------------------------------
expect_ok "--version" '^nemotron [0-9]+\.[0-9]+\.[0-9]+$' "$BIN" --version
expect_ok "--help lists the commands" '^  model +Inspect model configurations' "$BIN" --help
expect_ok "model info --help" '--seq-len' "$BIN" model info --help

# --- model info on every recipe and fixture ------------------------------------------------------
for f in recipes/*/pretrain/*.yaml tests/fixtures/configs/*.json; do
  expect_ok "model info $f" '^  total +[0-9,]+  \(' "$BIN" model info -c "$f"
done
expect_ok "nano 30B total" '^  total +31,577,940,288  \(31\.58 B\)$' \
  "$BIN" model info -c tests/fixtures/configs/nano3-30b-a3b.json
expect_ok "nano 30B active" '^  active per token +3,580,076,352  \(3\.58 B; MoE routes 6 of 128 experts\)$' \
  "$BIN" model info -c tests/fixtures/configs/nano3-30b-a3b.json
expect_ok "8B total" '^  total +8,100,852,736' "$BIN" model info -c tests/fixtures/configs/nemotron-h-8b.json
expect_ok "super MTP note" '^note: MTP: 1 block of pattern "\*E" \(2,942,325,248 params = 2\.94 B, counted in the total\)' \
  "$BIN" model info -c tests/fixtures/configs/super3-120b-a12b.json
grep -Eq '^  total +123,611,033,088  \(123\.61 B\)$' "$TMP/out" || fail "super total is not the published 123,611,033,088"
expect_ok "--seq-len" '^compute per token at seq_len 8192:$' \
  "$BIN" model info -c recipes/super3/pretrain/tiny.yaml --seq-len 8192
expect_ok "--json" '"total": 31577940288' "$BIN" model info -c recipes/nano3/pretrain/default.yaml --json
expect_ok "key=value override" 'hidden 128, vocab 1024' \
  "$BIN" model info -c recipes/super3/pretrain/tiny.yaml model.hidden_size=128

# --- model demo: the whole-model gradient check passes and the copy task is learned -------------
expect_ok "model demo gradient check" '^gradient check \(float64, whole model.*\(ok\)$' \
  "$BIN" model demo -c recipes/super3/pretrain/tiny.yaml --steps 1
expect_ok "model demo learns to copy" 'the model learned to copy from its context$' \
  "$BIN" model demo -c recipes/super3/pretrain/tiny.yaml
expect_error "model demo bad alphabet" "--alphabet 5000 exceeds the vocabulary (1024)" \
  "$BIN" model demo -c recipes/super3/pretrain/tiny.yaml --alphabet 5000

expect_error "model demo --seq-len beyond the model" \
  "--seq-len 100000 exceeds model.max_position_embeddings 512 of recipes/super3/pretrain/tiny.yaml" \
  "$BIN" model demo -c recipes/super3/pretrain/tiny.yaml --seq-len 100000
expect_error "model demo that cannot fit in memory" \
  "--batch 8 x --seq-len 100000: the demo needs about 21.38 TiB of memory, this machine has $(free -b | awk '/^Mem:/ {printf "%.2f GiB", $2 / 1073741824}')" \
  "$BIN" model demo -c recipes/super3/pretrain/default.yaml --seq-len 100000

# --- broken inputs: exit 2 and one clear line ----------------------------------------------------
tiny=recipes/super3/pretrain/tiny.yaml
expect_error "missing file" "$TMP/nope.yaml: cannot open: No such file or directory" \
  "$BIN" model info -c "$TMP/nope.yaml"

printf 'model:\n  vocab_size: b: c\n' >"$TMP/malformed.yaml"
expect_error "malformed YAML" "$TMP/malformed.yaml: YAML parse error at line 2, column 16: illegal map value" \
  "$BIN" model info -c "$TMP/malformed.yaml"

printf '{\n  "vocab_size": 16,\n}\n' >"$TMP/malformed.json"
expect_error "malformed JSON" \
  "$TMP/malformed.json: JSON parse error at line 3, column 1: syntax error while parsing object key - unexpected '}'; expected string literal" \
  "$BIN" model info -c "$TMP/malformed.json"

sed 's/^  hidden_size:/  hidden_sze:/' "$tiny" >"$TMP/typo.yaml"
expect_error "unknown key" "$TMP/typo.yaml: model.hidden_sze: unknown key (did you mean \"hidden_size\"?)" \
  "$BIN" model info -c "$TMP/typo.yaml"

sed 's/^  hybrid_override_pattern: .*/  hybrid_override_pattern: "M*M-MX"/' "$tiny" >"$TMP/pattern.yaml"
expect_error "bad pattern symbol" \
  "$TMP/pattern.yaml: model.hybrid_override_pattern: unknown layer symbol 'X' at position 5 in \"M*M-MX\" (expected M, *, - or E)" \
  "$BIN" model info -c "$TMP/pattern.yaml"

# Issue 11: a size past any real model overflowed the parameter count (negative counts printed).
expect_error "absurd hidden size" \
  "$tiny: model.hidden_size: 4611686018427387904 is beyond any real model (at most 131072)" \
  "$BIN" model info -c "$tiny" model.hidden_size=4611686018427387904

sed 's/^  num_key_value_heads: .*/  num_key_value_heads: 3/' "$tiny" >"$TMP/heads.yaml"
expect_error "inconsistent heads" "$TMP/heads.yaml: model.num_attention_heads: 4 is not divisible by num_key_value_heads 3" \
  "$BIN" model info -c "$TMP/heads.yaml"

expect_error "bad override value" "$tiny: model.hidden_size: expected a positive integer, got \"eight\"" \
  "$BIN" model info -c "$tiny" model.hidden_size=eight

sed 's/"num_key_value_heads": 2/"num_key_value_heads": 5/' tests/fixtures/configs/nano3-30b-a3b.json >"$TMP/config.json"
expect_error "config.json heads" "$TMP/config.json: num_attention_heads: 32 is not divisible by num_key_value_heads 5" \
  "$BIN" model info -c "$TMP/config.json"

# "Billion laughs": 378 bytes of aliases nested 9 deep would expand to 9^9 values.
{
  echo 'a: &a [x, x, x, x, x, x, x, x, x]'
  prev=a
  for k in b c d e f g h i; do
    echo "$k: &$k [*$prev, *$prev, *$prev, *$prev, *$prev, *$prev, *$prev, *$prev, *$prev]"
    prev=$k
  done
} >"$TMP/aliases.yaml"
expect_error "nested YAML aliases" \
  "$TMP/aliases.yaml: line 6: aliases expand the document beyond 4 MiB (aliases nested in aliases?); write the values out or nest fewer aliases" \
  "$BIN" model info -c "$TMP/aliases.yaml"
expect_error "override below a scalar" \
  "command line: model.hidden_size.0: cannot set it: model.hidden_size is not a mapping (it is 64)" \
  "$BIN" model info -c "$tiny" model.hidden_size.0=1

# The override recipes/*/data_prep/pretrain/default.yaml documents reaches the list item.
expect_error "override of a list item (sources.0.files)" \
  "recipes/super3/data_prep/pretrain/default.yaml: sources[0].files: $TMP/nope.jsonl: no such file" \
  "$BIN" super3 data prep pretrain -c default output_dir="$TMP/dp" "sources.0.files=[$TMP/nope.jsonl]"

printf 'train:\n  steps: 3\n' >"$TMP/no_model.yaml"
expect_error "recipe without model:" "$TMP/no_model.yaml: model: missing (a recipe holds the model's shape in its model: section)" \
  "$BIN" model info -c "$TMP/no_model.yaml"

# --- command-line usage errors: CLI11's message, exit 2 like any bad input --------------------------
expect_usage_error "model info without -c" '--config is required' "$BIN" model info
expect_usage_error "unknown option" 'unknown-flag' "$BIN" model info -c "$tiny" --unknown-flag
expect_usage_error "stray positional" 'expected key=value' "$BIN" model info -c "$tiny" tiny
expect_usage_error "bad --seq-len" 'seq-len' "$BIN" model info -c "$tiny" --seq-len -5
expect_usage_error "model without a subcommand" 'subcommand is required' "$BIN" model
# An unknown command word is named, with the commands there (CLI11 alone said "A subcommand is required").
expect_usage_error "unknown command word" '^error: `nemotron super3` has no command "bogus" \(its commands: .*\bsft\b.*\)$' "$BIN" super3 bogus
expect_usage_error "unknown word two levels down" '^error: `nemotron super3 data prep` has no command "sfd" \(its commands: pretrain, sft, rl\)$' \
  "$BIN" super3 data prep sfd -c tiny
expect_usage_error "unknown top-level word" '^error: `nemotron` has no command "bogus"' "$BIN" bogus
expect_usage_error "not a number" 'seq-len' "$BIN" model info -c "$tiny" --seq-len abc
expect_usage_error "usage errors point at the command's --help" '^Run `nemotron model info --help` for the options\.$' \
  "$BIN" model info -c "$tiny" --unknown-flag

# One rule for every command group: --help prints and exits 0, an unknown option exits 2.
for cmd in "" "model" "model info" "model demo" "super3" "super3 data prep" "super3 data prep pretrain" \
  "super3 pretrain" "nano3" "nano3 data prep pretrain" "nano3 pretrain" "convert" "convert import" \
  "convert export" "convert roundtrip" "compare"; do
  # shellcheck disable=SC2086  # $cmd is the words of the command
  expect_ok "nemotron $cmd --help" '^Usage: ' "$BIN" $cmd --help
  # shellcheck disable=SC2086
  expect_usage_error "nemotron $cmd --no-such-option" '^error: ' "$BIN" $cmd --no-such-option
done
expect_usage_error "a bad value for a checked option" 'dtype' "$BIN" convert import --hf-model x --out y --dtype fp7
expect_usage_error "compare: a non-number tolerance" 'logits-tol' "$BIN" compare --hf-model x --input-ids y --logits-tol abc

finish "CLI checks"
