#!/usr/bin/env bash
# `generate --tensor-parallel-size 2` on 2 GPUs over NCCL (cli.engine_tensor_parallel is the CPU
# proof): the decode steps replay CUDA graphs with the tensor group's collectives captured in
# them, and give the tokens of the eager steps (NEMOTRON_DECODE_GRAPHS=0) bit for bit in bf16; in
# float32 they give one GPU's tokens (log-probs within 1e-4: the split sums round otherwise).
# Exit 77 (skipped) without 2 GPUs or without a CUDA build.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [[ ${gpus:-0} -lt 2 ]]; then echo "skipped: $gpus GPU(s) visible, 2 needed"; exit 77; fi
"$BIN" super3 pretrain -c tiny dataset.mock=true device=cuda --dry-run >/dev/null 2>&1 || { echo "skipped: no CUDA build"; exit 77; }

source "$(dirname "${BASH_SOURCE[0]}")/cuda_mpi_lib.sh"

DENSE=tests/fixtures/hf/dense
python3 -c '
import json
for i in range(12):
    print(json.dumps({"id": str(i), "prompt": f"Row {i}: the answer is" if i % 2 else "Once upon a time " * (1 + i)}))' >"$TMP/in.jsonl"

# gen NAME NP DTYPE: greedy generation over $TMP/in.jsonl into $TMP/NAME.jsonl on NP GPUs.
gen() {
  local name=$1 np=$2 dtype=$3
  local cmd=("$BIN" generate --checkpoint $DENSE --input "$TMP/in.jsonl" --output "$TMP/$name.jsonl" --max-new-tokens 40
    --ignore-eos --batch 5 --temperature 0 --device cuda --dtype "$dtype")
  if [[ $np -gt 1 ]]; then cmd=("${MPIRUN[@]}" ${NEMOTRON_DECODE_GRAPHS:+-x NEMOTRON_DECODE_GRAPHS} -np "$np" "${cmd[@]}" --tensor-parallel-size "$np"); fi
  "${cmd[@]}" >"$TMP/out.$name" 2>"$TMP/err.$name" || { fail "$name: exit $?: $(tail -3 "$TMP/err.$name")"; return 1; }
}
# compare NAME A B TOL: the same tokens row for row, log-probs within TOL.
compare() {
  if msg=$(python3 - "$2" "$3" "$4" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 12, (len(a), len(b))
worst = 0.0
for x, y in zip(a, b):
    assert x["tokens"] == y["tokens"], (x["id"], x["tokens"], y["tokens"])
    worst = max([worst] + [abs(p - q) for p, q in zip(x["logprobs"], y["logprobs"])])
assert worst <= float(sys.argv[3]), worst
print(f"{sum(len(x['tokens']) for x in a)} tokens equal, log-probs within {worst:.1e}")
PY
  ); then echo "ok: $1: $msg"; else fail "$1: $msg"; fi
}
replayed() { grep -oE '\(([0-9]+) decode steps replayed as CUDA graphs\)' "$1" | grep -oE '[0-9]+' | head -1; }

gen f32-1 1 float32 && gen f32-tp2 2 float32 && compare "float32: TP 2 with decode graphs = one GPU" "$TMP/f32-1.jsonl" "$TMP/f32-tp2.jsonl" 1e-4
gen bf16-tp2 2 bfloat16 && NEMOTRON_DECODE_GRAPHS=0 gen bf16-tp2-eager 2 bfloat16 &&
  compare "bfloat16: TP 2 decode graphs = TP 2 eager steps" "$TMP/bf16-tp2.jsonl" "$TMP/bf16-tp2-eager.jsonl" 0
n=$(replayed "$TMP/out.bf16-tp2")
[[ ${n:-0} -gt 0 ]] && ! grep -q 'cannot be captured' "$TMP/err.bf16-tp2" && echo "ok: TP 2 replayed $n decode steps as graphs" ||
  fail "TP 2 did not replay graphs: $(grep -h 'generated\|graph' "$TMP/out.bf16-tp2" "$TMP/err.bf16-tp2")"
[[ -z "$(replayed "$TMP/out.bf16-tp2-eager")" ]] || fail "NEMOTRON_DECODE_GRAPHS=0 still replayed graphs"
finish "generate at TP 2 on 2 GPUs with decode graphs"
