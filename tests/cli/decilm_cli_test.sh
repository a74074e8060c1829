#!/usr/bin/env bash
# DeciLM (Llama-3.3-Nemotron-Super-49B, issue 15) from the command line: `model info` on the real
# 49B block_configs (the super49b recipe), the memory plans of its SFT and RL stages, the
# Llama-3.1-8B bench shape (bench/configs/llama31_8b.yaml), generation on a tiny DeciLM checkpoint
# (cached with 3 slots = 1 slot = recompute), and bad block_configs rejected with one line naming
# the key (exit 2).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

R=recipes/super49b
expect_ok "49B total" '^  total +49,867,145,216  \(49\.87 B\)$' "$BIN" model info -c $R/sft/default.yaml
expect_ok "49B per-block table: a no-op attention" '^ +6  no_op +swiglu F=14336 \(2\.625\) ' \
  "$BIN" model info -c $R/sft/default.yaml
expect_ok "49B per-block table: GQA with 8 KV heads" '^ +52  gqa kv_heads=8 +swiglu F=28672 \(5\.25\) ' \
  "$BIN" model info -c $R/sft/default.yaml
expect_ok "49B RoPE line" 'llama3 scaling x8' "$BIN" model info -c $R/sft/default.yaml
expect_ok "49B --json" '"total": 49867145216' "$BIN" model info -c $R/rl/default.yaml --json
for f in $R/*/tiny.yaml; do
  case $f in */eval/* | */pipeline/*) continue ;; esac
  expect_ok "model info $f" '^  total +[0-9,]+  \(' "$BIN" model info -c "$f"
done
# The rollout bench's Llama-3.1-8B shape (32 uniform DeciLM blocks): Llama-3.1-8B's parameter count.
expect_ok "llama31_8b bench config total" '^  total +8,030,261,248  \(8\.03 B\)$' "$BIN" model info -c bench/configs/llama31_8b.yaml
expect_ok "llama31_8b: SwiGLU width 14336, 8 KV heads" '^ +31  gqa kv_heads=8 +swiglu F=14336 \(5\.25\) ' \
  "$BIN" model info -c bench/configs/llama31_8b.yaml
expect_ok "sft --dry-run (49B)" 'parameters' "$BIN" super49b sft -c default --dry-run
expect_ok "rl --dry-run (49B)" '.' "$BIN" super49b rl -c default --dry-run

# Generation on a DeciLM checkpoint (two tiny pretraining steps of the super49b recipe: GQA with
# llama3 RoPE, no-op attentions, SwiGLU of three widths): the cached engine with 3 slots, with 1
# slot, and the exact recompute reference give the same tokens for the same seed.
expect_ok "super49b pretrain 2 steps" '^ iteration +2/ +2 ' "$BIN" super49b pretrain -c tiny dataset.mock=true \
  dataset.seq_length=32 train.global_batch_size=2 train.micro_batch_size=2 train.train_iters=2 train.eval_iters=0 \
  train.eval_interval=0 scheduler.lr_warmup_iters=1 scheduler.lr_wsd_decay_iters=0 checkpoint.save="$TMP/ck"
printf '%s\n' '{"prompt": "1+1="}' '{"messages": [{"role": "user", "content": "Say hi"}]}' '{"prompt": "12*3="}' >"$TMP/in.jsonl"
gen=("$BIN" generate --checkpoint "$TMP/ck" --tokenizer tests/fixtures/hf/dense/tokenizer.json --input "$TMP/in.jsonl"
  --max-new-tokens 6 --temperature 0.9 --seed 5 --ignore-eos)
expect_ok "DeciLM generate, 3 slots" '^wrote 3 completions' "${gen[@]}" --output "$TMP/g3.jsonl" --max-slots 3
expect_ok "DeciLM generate, 1 slot" '^wrote 3 completions' "${gen[@]}" --output "$TMP/g1.jsonl" --max-slots 1
expect_ok "DeciLM generate, recompute" '^wrote 3 completions' "${gen[@]}" --output "$TMP/gr.jsonl" --max-slots 3 --recompute
python3 - "$TMP/g3.jsonl" "$TMP/g1.jsonl" "$TMP/gr.jsonl" <<'PY' || fail "DeciLM generate: the three runs differ"
import json, sys
runs = [[json.loads(l)["tokens"] for l in open(p)] for p in sys.argv[1:]]
assert all(len(t) == 6 for t in runs[0]), runs[0]
assert runs[0] == runs[1] == runs[2], runs
PY

# Bad input: one line naming the key, exit 2.
python3 - "$TMP" <<'PY'
import json, sys
base = {"model_type": "nemotron-nas", "vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 4, "rope_theta": 10000.0,
        "block_configs": [{"attention": {"n_heads_in_group": 2}, "ffn": {"ffn_mult": 1.0}},
                          {"attention": {"no_op": True}, "ffn": {"replace_with_linear": True}}]}
json.dump(base, open(f"{sys.argv[1]}/ok.json", "w"))
b = json.loads(json.dumps(base)); b["num_hidden_layers"] = 3
json.dump(b, open(f"{sys.argv[1]}/layers.json", "w"))
b = json.loads(json.dumps(base)); b["block_configs"][0]["attention"]["n_heads_in_group"] = 3
json.dump(b, open(f"{sys.argv[1]}/group.json", "w"))
PY
expect_ok "tiny DeciLM config.json" '^  total +[0-9,]+  \(' "$BIN" model info -c "$TMP/ok.json"
expect_error "block_configs length" \
  "$TMP/layers.json: block_configs: has 2 entries but num_hidden_layers is 3 (one entry per layer)" \
  "$BIN" model info -c "$TMP/layers.json"
expect_error "n_heads_in_group" \
  "$TMP/group.json: block_configs[0].attention.n_heads_in_group: 3 does not divide num_attention_heads 4" \
  "$BIN" model info -c "$TMP/group.json"
expect_error "recipe: block_configs length" \
  "$R/sft/tiny.yaml: model.block_configs: has 8 entries but num_hidden_layers is 9 (one entry per layer)" \
  "$BIN" model info -c $R/sft/tiny.yaml model.num_hidden_layers=9

finish "DeciLM model info, dry runs, generation and bad block_configs"
