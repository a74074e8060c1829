#!/usr/bin/env python3
"""Reads the packed SFT shards of `nemotron <family> data prep sft` with pyarrow, as Megatron-Bridge's
GPTSFTPackedParquetDataset does, and checks them against reference/data-formats.md §6.5:
the three columns with their Arrow types (list<int32>, list<uint8>, list<int32>), the row
validation rules, and the totals of the prep's metadata.json (bins and tokens).
usage: python3 tools/check_sft_shards.py OUTPUT_DIR     (the data prep's output_dir)
Prints PASS or FAIL lines; exit status 0 only when everything passes."""
import glob, json, os, sys

import pyarrow as pa
import pyarrow.parquet as pq


def main(out_dir):
    meta = json.load(open(os.path.join(out_dir, "metadata.json")))
    want = {"input_ids": pa.list_(pa.int32()), "loss_mask": pa.list_(pa.uint8()), "seq_start_id": pa.list_(pa.int32())}
    failures, bins, tokens = [], 0, 0
    files = sorted(glob.glob(os.path.join(out_dir, "splits", "*", "*.parquet")))
    if not files:
        failures.append(f"no shards under {out_dir}/splits/*/")
    for f in files:
        t = pq.read_table(f)
        for name, typ in want.items():
            if name not in t.column_names:
                failures.append(f"{f}: no column {name}")
            elif not t.schema.field(name).type.equals(typ, check_metadata=False) and \
                    t.schema.field(name).type.value_type != typ.value_type:
                failures.append(f"{f}: {name} is {t.schema.field(name).type}, expected {typ}")
        rows = t.to_pylist()
        for i, r in enumerate(rows):
            ids, mask, starts = r["input_ids"], r["loss_mask"], r["seq_start_id"]
            ok = (len(ids) == len(mask) and starts and starts[0] == 0 and all(s < len(ids) for s in starts)
                  and all(a < b for a, b in zip(starts, starts[1:])) and len(ids) <= meta["pack_size"]
                  and set(mask) <= {0, 1})
            # The shift rule: the last token of every packed sequence trains nothing.
            ends = starts[1:] + [len(ids)]
            ok = ok and all(mask[e - 1] == 0 for e in ends)
            if not ok:
                failures.append(f"{f}: row {i} breaks the §6.5 rules")
                break
            tokens += len(ids)
        bins += len(rows)
    if bins != meta["bins"]:
        failures.append(f"bins: {bins} in the shards, metadata.json says {meta['bins']}")
    if tokens != meta["total_tokens"]:
        failures.append(f"tokens: {tokens} in the shards, metadata.json says {meta['total_tokens']}")
    for line in failures:
        print("FAIL:", line)
    print(f"{'PASS' if not failures else 'FAIL'}: {len(files)} shards, {bins} bins, {tokens} tokens read with "
          f"pyarrow {pa.__version__}")
    return 0 if not failures else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
