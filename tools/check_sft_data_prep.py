#!/usr/bin/env python3
"""Checks `nemotron data prep sft` against the Python stack it must match (run where pyarrow,
transformers and jinja2 are installed, e.g. the GPU machine):

  1. every packed shard reads with pyarrow with the §6.5 schema (input_ids list<int32>,
     loss_mask list<uint8>, seq_start_id list<int32>);
  2. the rows, templated with NVIDIA-NeMo/Nemotron's nano3.jinja through HF apply_chat_template,
     cut and masked by its data prep (core/chat_template.py: replace_json_args,
     create_masked_messages, split_system_user_chunks; chunks tokenized one by one with
     add_special_tokens=False), filtered and dropped as its chat_sft_shard_core.py does, then
     packed per shard by its packing/algorithms.py and shifted as packing/materialize.py does,
     give exactly the same shards, row for row and token for token.

Nemotron's files are not part of this repository: pass the folder holding nano3.jinja,
chat_template.py and algorithms.py from a checkout of NVIDIA-NeMo/Nemotron.

usage: check_sft_data_prep.py --rows rows.jsonl --tokenizer tokenizer.json --out OUTPUT_DIR
                              --nemotron DIR [--pack-size 512] [--algorithm first_fit_shuffle]
                              [--seed 42] [--num-shards 4] [--used-in-filter nano_v3]
"""
import argparse
import glob
import importlib.util
import json
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq
from transformers import PreTrainedTokenizerFast


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def used_in_matches(used_in, tag):
    if used_in is None:
        return False
    if isinstance(used_in, list):
        return tag in used_in
    if isinstance(used_in, str):
        return used_in == tag or tag in [v.strip() for v in used_in.split(",")]
    return False


def sequences_of(row, tok, ct, a):
    """chat_sft_shard_core._process_record_to_spool, one row -> list of (ids, mask) or None."""
    if a.used_in_filter and not used_in_matches(row.get("used_in"), a.used_in_filter):
        return None
    messages, tools = row.get("messages"), row.get("tools")
    if not messages:
        return None
    if not ct.validate_conversation(messages, tools)[0]:
        return None
    try:
        local = ct.replace_json_args(messages)
    except (json.JSONDecodeError, KeyError, TypeError):
        return None
    try:
        masked = ct.create_masked_messages(local, tok, tools)
    except Exception:
        return None
    out = []
    for chunks, _ in masked:
        ids, mask = [], []
        for c in ct.split_system_user_chunks(chunks):
            t = tok.encode(c["content"], add_special_tokens=False)
            ids += t
            mask += [1 if c["role"] == "assistant" else 0] * len(t)
        if ids:
            out.append((ids, mask))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--nemotron", required=True)
    ap.add_argument("--pack-size", type=int, default=512)
    ap.add_argument("--algorithm", default="first_fit_shuffle")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--num-shards", type=int, default=4)
    ap.add_argument("--used-in-filter", default="nano_v3")
    a = ap.parse_args()

    ct = load("nemotron_chat_template", os.path.join(a.nemotron, "chat_template.py"))
    algos = load("nemotron_algorithms", os.path.join(a.nemotron, "algorithms.py"))
    tok = PreTrainedTokenizerFast(tokenizer_file=a.tokenizer)
    with open(os.path.join(a.nemotron, "nano3.jinja")) as f:
        tok.chat_template = f.read()

    shards = [[] for _ in range(a.num_shards)]
    with open(a.rows) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    dropped = 0
    for i, row in enumerate(rows):
        seqs = sequences_of(row, tok, ct, a)
        if seqs is None:
            dropped += 1
            continue
        shards[i % a.num_shards] += seqs
    print(f"python: {len(rows)} rows, {dropped} dropped, {sum(len(s) for s in shards)} sequences")

    schema = pa.schema([("input_ids", pa.list_(pa.int32())), ("loss_mask", pa.list_(pa.uint8())),
                        ("seq_start_id", pa.list_(pa.int32()))])
    problems = 0
    bins_total = 0
    for k, seqs in enumerate(shards):
        files = glob.glob(os.path.join(a.out, "runs", "*", "datasets", "*", f"shard_{k:06d}.parquet"))
        if not seqs:
            continue
        if len(files) != 1:
            print(f"FAIL shard {k}: expected one file, found {files}")
            problems += 1
            continue
        table = pq.read_table(files[0])
        if not table.schema.equals(schema):
            print(f"FAIL {files[0]}: schema {table.schema} != {schema}")
            problems += 1
        ours = table.to_pylist()
        lengths = [min(len(ids), a.pack_size) for ids, _ in seqs]
        bins, _ = algos.get_packer(a.algorithm, a.pack_size, seed=a.seed).pack(lengths)
        if len(bins) != len(ours):
            print(f"FAIL shard {k}: {len(ours)} rows, Python packs {len(bins)} bins")
            problems += 1
        for b, (bin_, got) in enumerate(zip(bins, ours)):
            ids, mask, starts = [], [], []
            for s in bin_:
                sid, smask = seqs[s][0][: a.pack_size], seqs[s][1][: a.pack_size]
                starts.append(len(ids))
                ids += sid
                mask += [int(smask[j + 1]) for j in range(len(sid) - 1)] + [0]
            want = {"input_ids": ids, "loss_mask": mask, "seq_start_id": starts}
            for col in want:
                if got[col] != want[col]:
                    print(f"FAIL shard {k} row {b} {col}: first difference at "
                          f"{next((j for j, (x, y) in enumerate(zip(got[col], want[col])) if x != y), min(len(got[col]), len(want[col])))}")
                    problems += 1
                    break
        bins_total += len(bins)
    print(f"compared {bins_total} packed rows in {sum(1 for s in shards if s)} shards: {problems} problem(s)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
