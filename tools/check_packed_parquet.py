#!/usr/bin/env python3
"""Checks nemotron-cpp's packed SFT Parquet shards with pyarrow and writes pyarrow-made fixtures.

Run on a machine with pyarrow (the GPU machine):

    python3 tools/check_packed_parquet.py --ours tests/fixtures/parquet/ours \
        --json tests/fixtures/parquet/ours/rows.json --write-fixtures tests/fixtures/parquet

For every *.parquet in --ours (its rows are in --json: {"file.parquet": [{"input_ids": [...],
"loss_mask": [...], "seq_start_id": [...]}, ...]}), it reads the file as Megatron-Bridge and
Nemotron do (pq.read_table, and row group by row group through pq.ParquetFile), checks that the
Arrow types are list<int32> / list<uint8> / list<int32> exactly as pyarrow gives for a table
written by Nemotron's writer (pa.list_(pa.int32()) etc.), and compares every value.

With --write-fixtures OUTDIR it also writes the rows of the first file with pyarrow in the shapes
Nemotron and pyarrow produce, each with its rows in a .json beside it, for our reader's test
(tests/io/packed_parquet_fixture_test.cpp):
  pyarrow_default.parquet      pq.write_table defaults: dictionary encoding, snappy
  pyarrow_zstd.parquet         compression="zstd" (Nemotron's writer), dictionary encoding
  pyarrow_zstd_small_pages.parquet  zstd with 64-byte data pages written 5 values at a time
  pyarrow_plain_v2.parquet     no dictionary, no compression, data pages v2
All use row groups of 3 rows. Prints PASS or FAIL per check and exits non-zero on any failure.
"""
import argparse
import json
import os
import sys
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq

COLUMNS = ["input_ids", "loss_mask", "seq_start_id"]
# The schema Nemotron's writer uses (NVIDIA-NeMo/Nemotron: src/nemotron/data_prep/packing/writers.py).
NEMOTRON_SCHEMA = pa.schema([
    ("input_ids", pa.list_(pa.int32())),
    ("loss_mask", pa.list_(pa.uint8())),
    ("seq_start_id", pa.list_(pa.int32())),
])

failures = []


def check(ok, what):
    print(("PASS  " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)
    return ok


def same_list_type(got, want):
    """list<x> equality that ignores the element field's name ("element" vs "item")."""
    return (pa.types.is_list(got) and got.value_type == want.value_type
            and got.value_field.nullable == want.value_field.nullable)


def pyarrow_reference_types(rows):
    """The Arrow types a reader gets back from a file pyarrow wrote with Nemotron's schema."""
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "ref.parquet")
        pq.write_table(pa.Table.from_pylist(rows, schema=NEMOTRON_SCHEMA), p, compression="zstd")
        t = pq.read_table(p)
        return {f.name: (f.type, f.nullable) for f in t.schema}


def check_file(path, rows, reference):
    name = os.path.basename(path)
    table = pq.read_table(path)
    check(table.column_names[:3] == COLUMNS, f"{name}: columns {table.column_names}")
    for col in COLUMNS:
        if col not in table.column_names:
            continue
        f = table.schema.field(col)
        want = NEMOTRON_SCHEMA.field(col).type
        check(same_list_type(f.type, want), f"{name}: {col} has Arrow type {f.type}, expected {want}")
        ref_type, ref_nullable = reference[col]
        check(same_list_type(f.type, ref_type) and f.nullable == ref_nullable,
              f"{name}: {col} reads as {f.type} (nullable={f.nullable}) like pyarrow's own file "
              f"({ref_type}, nullable={ref_nullable})")
    check(table.num_rows == len(rows), f"{name}: {table.num_rows} rows, expected {len(rows)}")
    got = table.select(COLUMNS).to_pylist()
    bad = [i for i, (g, w) in enumerate(zip(got, rows)) if g != w]
    check(not bad and len(got) == len(rows), f"{name}: every value equals the JSON dump"
          + (f" (first mismatch at row {bad[0]})" if bad else ""))

    # Row group by row group, as a streaming dataset reader does.
    pf = pq.ParquetFile(path)
    md = pf.metadata
    streamed = []
    for g in range(pf.num_row_groups):
        streamed.extend(pf.read_row_group(g, columns=COLUMNS).to_pylist())
    check(streamed == rows, f"{name}: {pf.num_row_groups} row groups read one by one equal the dump")
    codecs = sorted({md.row_group(g).column(c).compression for g in range(md.num_row_groups)
                     for c in range(md.num_columns)})
    print(f"      {name}: created_by={md.created_by!r} format_version={md.format_version} codecs={codecs} "
          f"row_groups={md.num_row_groups}")
    for c in range(md.num_columns):
        s = md.schema.column(c)
        print(f"      {s.path}: physical={s.physical_type} logical={s.logical_type} "
              f"max_def={s.max_definition_level} max_rep={s.max_repetition_level}")


def write_fixtures(outdir, rows):
    os.makedirs(outdir, exist_ok=True)
    table = pa.Table.from_pylist(rows, schema=NEMOTRON_SCHEMA)
    variants = {
        "pyarrow_default": {},
        "pyarrow_zstd": {"compression": "zstd"},
        "pyarrow_zstd_small_pages": {"compression": "zstd", "data_page_size": 64, "write_batch_size": 5},
        "pyarrow_plain_v2": {"compression": "none", "use_dictionary": False, "data_page_version": "2.0"},
    }
    for stem, kw in variants.items():
        p = os.path.join(outdir, stem + ".parquet")
        pq.write_table(table, p, row_group_size=3, **kw)
        with open(os.path.join(outdir, stem + ".json"), "w") as f:
            json.dump(rows, f)
            f.write("\n")
        back = pq.read_table(p).to_pylist()
        check(back == rows, f"wrote {p} ({kw or 'defaults'}); pyarrow reads it back equal")
        md = pq.ParquetFile(p).metadata
        encodings = sorted({e for g in range(md.num_row_groups) for c in range(md.num_columns)
                            for e in md.row_group(g).column(c).encodings})
        print(f"      {stem}: encodings={encodings} codec={md.row_group(0).column(0).compression}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ours", required=True, help="directory of .parquet shards written by nemotron-cpp")
    ap.add_argument("--json", required=True, help="JSON dump of their rows: {file name: [rows]}")
    ap.add_argument("--write-fixtures", metavar="OUTDIR", help="also write pyarrow-made shards + .json here")
    args = ap.parse_args()
    print(f"pyarrow {pa.__version__}")

    with open(args.json) as f:
        dump = json.load(f)
    files = sorted(n for n in os.listdir(args.ours) if n.endswith(".parquet"))
    check(bool(files), f"{args.ours} holds .parquet files")
    reference = pyarrow_reference_types(next(iter(dump.values()))) if dump else None
    for name in files:
        if not check(name in dump, f"{name} has rows in {args.json}"):
            continue
        try:
            check_file(os.path.join(args.ours, name), dump[name], reference)
        except Exception as e:  # a file pyarrow cannot read at all is a failure, not a crash
            check(False, f"{name}: pyarrow cannot read it: {type(e).__name__}: {e}")
    if args.write_fixtures and files and files[0] in dump:
        write_fixtures(args.write_fixtures, dump[files[0]])

    print("FAIL: %d check(s) failed" % len(failures) if failures else "PASS: all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
