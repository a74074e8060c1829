#!/usr/bin/env python3
"""Megatron compatibility fixture for nemotron-cpp's data layer.

Runs Megatron-LM's own dataset code (megatron/core/datasets at the commit named in
shared/reference/data-formats.md) on a machine with Python, numpy, torch, pybind11 and a C++
compiler, and writes what it saw, so that tests/data/megatron_fixture_test.cpp can prove:

  1. `.bin/.idx` pairs written by Megatron's IndexedDatasetBuilder (int32 and uint16, documents
     from tests/fixtures/megatron/spec.json, an empty document and an empty sequence included)
     are read correctly by our reader, and are byte-identical to what our builder writes;
  2. pairs written by our builder (ours_int32, ours_uint16) are read by Megatron's
     IndexedDataset with the same content (verdict.json), and add_index concatenation agrees;
  3. numpy's legacy RandomState draws (MT19937 outputs, shuffles, permutations), numpy.sum and
     Megatron's normalize/split/blending helpers give the values our C++ reproduces
     (numpy_vectors.json);
  4. Megatron's GPTDataset / BlendedDataset / BlendedMegatronDatasetBuilder produce the document,
     sample and shuffle indices, blending indices and sample tokens that ours do for the same
     files and configs (gpt_vectors.json).

Megatron-LM is not installed anywhere: pass a folder holding a copy of megatron/core/datasets
(plus megatron/core/msc_utils.py) and minimal shims for the few other modules those import
(megatron/__init__.py, megatron/core/__init__.py, megatron/core/utils.py with log_single_rank,
megatron/core/safe_globals.py with safe_numpy_load, megatron/core/tokenizers/__init__.py with
MegatronTokenizerBase). Such a copy is for the run only and is never committed.

Usage:
  python3 tools/make_megatron_idx_fixture.py --megatron DIR --fixtures tests/fixtures/megatron --out OUT

Writes to OUT: megatron_int32.{bin,idx}, megatron_uint16.{bin,idx}, verdict.json,
numpy_vectors.json, gpt_vectors.json. Copy them into tests/fixtures/megatron/.
"""

import argparse
import glob
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import traceback


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def file_digest(path):
    with open(path, "rb") as f:
        data = f.read()
    return {"bytes": len(data), "fnv1a64": fnv1a64(data), "sha256": hashlib.sha256(data).hexdigest()}


def build_helpers(megatron_dir, log):
    """Compiles megatron/core/datasets/helpers.cpp as Megatron's Makefile does."""
    ds_dir = os.path.join(megatron_dir, "megatron", "core", "datasets")
    import pybind11

    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    out = os.path.join(ds_dir, "helpers_cpp" + suffix)
    includes = ["-I" + pybind11.get_include(), "-I" + sysconfig.get_paths()["include"]]
    last = None
    for cxx in [os.environ.get("CXX"), "g++", "c++", "clang++"]:
        if not cxx or not shutil.which(cxx):
            continue
        cmd = [cxx, "-O3", "-Wall", "-shared", "-std=c++17", "-fPIC"] + includes
        cmd += [os.path.join(ds_dir, "helpers.cpp"), "-o", out]
        r = subprocess.run(cmd, capture_output=True, text=True)
        log("helpers build: " + " ".join(cmd) + " -> rc %d %s" % (r.returncode, r.stderr[-2000:]))
        if r.returncode == 0:
            return cxx
        last = r.stderr[-2000:]
    raise RuntimeError("no C++ compiler built helpers.cpp: %s" % last)


def write_megatron(idx_mod, prefix, dtype, documents):
    """Writes `documents` with Megatron's IndexedDatasetBuilder (rule documented in spec.json)."""
    import numpy
    import torch

    builder = idx_mod.IndexedDatasetBuilder(prefix + ".bin", dtype=dtype)
    for doc in documents:
        if len(doc) == 0:
            builder.end_document()
        elif len(doc) == 1:
            builder.add_item(torch.tensor(doc[0], dtype=torch.int64))
            builder.end_document()
        else:
            flat = [t for seq in doc for t in seq]
            builder.add_document(numpy.array(flat, dtype=numpy.int64), [len(s) for s in doc])
    builder.finalize(prefix + ".idx")


def megatron_read(idx_mod, prefix):
    """Everything Megatron's IndexedDataset reads from a prefix."""
    ds = idx_mod.IndexedDataset(prefix)
    out = {
        "dtype": ds.index.dtype.__name__,
        "num_sequences": len(ds),
        "sequence_lengths": [int(x) for x in ds.sequence_lengths],
        "sequence_pointers": [int(x) for x in ds.index.sequence_pointers],
        "document_indices": [int(x) for x in ds.document_indices],
        "sequences": [[int(t) for t in ds[i]] for i in range(len(ds))],
        # Partial reads: get(i, offset=1) of every sequence longer than 1, and a middle slice.
        "partial": [],
    }
    for i in range(len(ds)):
        n = int(ds.sequence_lengths[i])
        if n >= 3:
            out["partial"].append(
                {"i": i, "offset": 1, "length": n - 2, "tokens": [int(t) for t in ds.get(i, offset=1, length=n - 2)]}
            )
    return out


def expected_from_spec(documents):
    lengths, docs, seqs = [], [0], []
    for doc in documents:
        for seq in doc:
            lengths.append(len(seq))
            seqs.append(list(seq))
        docs.append(len(lengths))
    return {"sequence_lengths": lengths, "document_indices": docs, "sequences": seqs}


def compare_read(read, spec_docs, dtype_name):
    want = expected_from_spec(spec_docs)
    problems = []
    if read["dtype"] != dtype_name:
        problems.append("dtype %s != %s" % (read["dtype"], dtype_name))
    for key in ["sequence_lengths", "document_indices", "sequences"]:
        if read[key] != want[key]:
            problems.append("%s differs: read %s, spec %s" % (key, read[key], want[key]))
    for p in read["partial"]:
        if p["tokens"] != want["sequences"][p["i"]][p["offset"]: p["offset"] + p["length"]]:
            problems.append("partial read of sequence %d differs" % p["i"])
    return problems


def index_files(idx_mod, spec, fixtures, out, tmp, verdict, log):
    import numpy

    for name, dtype in [("int32", numpy.int32), ("uint16", numpy.uint16)]:
        docs = spec[name]["documents"]
        split_at = spec[name]["split_at"]
        entry = {}
        # 1. Megatron writes the spec.
        prefix = os.path.join(out, "megatron_" + name)
        write_megatron(idx_mod, prefix, dtype, docs)
        entry["megatron_files"] = {ext: file_digest(prefix + "." + ext) for ext in ["bin", "idx"]}
        entry["megatron_reads_megatron"] = compare_read(megatron_read(idx_mod, prefix), docs, name)
        # 2. add_index of two shards equals writing everything at once.
        a, b, merged = (os.path.join(tmp, "%s_%s" % (name, s)) for s in ["shard_a", "shard_b", "merged"])
        write_megatron(idx_mod, a, dtype, docs[:split_at])
        write_megatron(idx_mod, b, dtype, docs[split_at:])
        builder = idx_mod.IndexedDatasetBuilder(merged + ".bin", dtype=dtype)
        builder.add_index(a)
        builder.add_index(b)
        builder.finalize(merged + ".idx")
        entry["megatron_add_index_equals_direct"] = all(
            open(merged + "." + ext, "rb").read() == open(prefix + "." + ext, "rb").read() for ext in ["bin", "idx"]
        )
        # 3. Megatron reads the files our builder wrote.
        ours = os.path.join(fixtures, "ours_" + name)
        if os.path.exists(ours + ".idx"):
            read = megatron_read(idx_mod, ours)
            entry["ours_files"] = {ext: file_digest(ours + "." + ext) for ext in ["bin", "idx"]}
            entry["megatron_reads_ours"] = read
            entry["megatron_reads_ours_problems"] = compare_read(read, docs, name)
            entry["ours_bytes_equal_megatron"] = all(
                open(ours + "." + ext, "rb").read() == open(prefix + "." + ext, "rb").read() for ext in ["bin", "idx"]
            )
        else:
            entry["megatron_reads_ours_problems"] = ["missing " + ours + ".idx"]
        verdict["index_files"][name] = entry
        log("%s: %s" % (name, json.dumps({k: v for k, v in entry.items() if k != "megatron_reads_ours"})))


def numpy_vectors(megatron_dir, out, log):
    import numpy
    from megatron.core.datasets import helpers
    from megatron.core.datasets.blended_megatron_dataset_config import (
        convert_split_vector_to_split_matrix,
        parse_and_normalize_split,
    )
    from megatron.core.datasets.utils import normalize

    nv = {"numpy_version": numpy.__version__}
    raw = {}
    for seed in [0, 1, 1234, 5489, 4294967295]:
        bg = numpy.random.MT19937()
        bg._legacy_seeding(seed)
        raw[str(seed)] = [int(x) for x in bg.random_raw(16)]
    nv["mt19937_raw"] = raw
    nv["permutations"] = [
        {"seed": s, "n": n, "perm": [int(x) for x in numpy.random.RandomState(s).permutation(n)]}
        for s, n in [(0, 10), (42, 10), (1234, 1), (1234, 2), (1234, 100), (7, 1000), (3, 257), (2**32 - 1, 33)]
    ]
    # Several shuffles drawn one after another from one RandomState, arrays of different dtypes.
    rs = numpy.random.RandomState(1234)
    seq = []
    for n, dt in [(50, numpy.int32), (77, numpy.uint32), (5, numpy.int64), (1, numpy.int32), (300, numpy.int64)]:
        a = numpy.arange(n, dtype=dt)
        rs.shuffle(a)
        seq.append({"n": n, "dtype": numpy.dtype(dt).name, "shuffled": [int(x) for x in a]})
    nv["sequential_shuffles"] = {"seed": 1234, "shuffles": seq}
    # numpy.sum and Megatron's normalize() on weight lists of several lengths (hex floats: exact).
    sums = []
    wrs = numpy.random.RandomState(99)
    for n in [1, 3, 7, 8, 9, 17, 128, 129, 130, 300, 1000]:
        w = wrs.random_sample(n) * 10.0
        sums.append({
            "values": [float(x).hex() for x in w],
            "sum": float(numpy.sum(w)).hex(),
            "normalized": [float(x).hex() for x in normalize(list(w))],
        })
    nv["sums"] = sums
    # Split strings as BlendedMegatronDatasetConfig parses them, and the sequence ranges the builder cuts.
    splits = []
    for text in ["99,1,0", "969,30,1", "9999,8,2", "1,1,1", "98,2", "7,3,5", "1,1", "100"]:
        vec = parse_and_normalize_split(text)
        matrix = convert_split_vector_to_split_matrix(vec)
        ranges = {}
        for n in [5, 7, 1000, 12345, 100000]:
            ranges[str(n)] = [
                None if b is None else [int(round(b[0] * float(n))), int(round(b[1] * float(n)))] for b in matrix
            ]
        splits.append({
            "split": text,
            "vector": [float(x).hex() for x in vec],
            "matrix": [None if b is None else [float(b[0]).hex(), float(b[1]).hex()] for b in matrix],
            "ranges": ranges,
        })
    nv["splits"] = splits
    # helpers.cpp blending indices for normalized weights, and the exhaustive variant.
    blends = []
    for n_w, size in [(3, 1000), (10, 5000), (130, 20000)]:
        w = normalize(list(wrs.random_sample(n_w) + 0.05))
        di = numpy.zeros(size, dtype=numpy.int16)
        dsi = numpy.zeros(size, dtype=numpy.int64)
        helpers.build_blending_indices(di, dsi, numpy.array(w, dtype=numpy.float64), n_w, size, False)
        blends.append({"weights": [float(x).hex() for x in w], "size": size,
                       "dataset_index": [int(x) for x in di], "dataset_sample_index": [int(x) for x in dsi]})
    nv["blending"] = blends
    sizes = numpy.array([5, 3, 11, 1, 7], dtype=numpy.int64)
    total = int(sizes.sum())
    di = numpy.zeros(total, dtype=numpy.int16)
    dsi = numpy.zeros(total, dtype=numpy.int64)
    helpers.build_exhaustive_blending_indices(di, dsi, sizes, len(sizes))
    nv["exhaustive_blending"] = {"sizes": [int(x) for x in sizes], "dataset_index": [int(x) for x in di],
                                 "dataset_sample_index": [int(x) for x in dsi]}
    with open(os.path.join(out, "numpy_vectors.json"), "w") as f:
        json.dump(nv, f)
    log("numpy_vectors.json written (numpy %s)" % numpy.__version__)


def gpt_file_documents(spec, k):
    g = spec["gpt_files"]
    docs = []
    for i in range(g["num_documents"][k]):
        n = (37 * i + 11 * (k + 1)) % 97
        toks = [(131 * i + 7 * j + 1000 * k) % 50000 + 3 for j in range(n - 1)] + ([g["eod"]] if n > 0 else [])
        docs.append([toks])
    return docs


GPT_CONFIGS = [
    {"name": "single_split", "blend": [["gpt_a"], None], "split": "90,5,5", "seed": 1234,
     "sequence_length": 32, "sizes": [300, 40, 5]},  # train: 2 epochs, the last one shuffled apart
    {"name": "multi_epoch_joint", "blend": [["gpt_c"], None], "split": "1", "seed": 21,
     "sequence_length": 16, "sizes": [800, None, None]},  # 3 epochs shuffled together
    {"name": "single_valid_partial", "blend": [["gpt_b"], None], "split": "90,10,0", "seed": 7,
     "sequence_length": 16, "sizes": [100, None, None], "drop_last_partial_validation_sequence": False},
    {"name": "weighted_blend", "blend": [["gpt_a", "gpt_b", "gpt_c"], [0.5, 0.3, 0.2]], "split": "90,8,2",
     "seed": 1234, "sequence_length": 24, "sizes": [300, 30, 10]},
    {"name": "unweighted_blend", "blend": [["gpt_a", "gpt_c"], None], "split": "95,5,0", "seed": 99,
     "sequence_length": 20, "sizes": [120, None, None]},
    {"name": "per_split", "blend_per_split": [[["gpt_a", "gpt_b"], [0.7, 0.3]], [["gpt_c"], None],
                                              [["gpt_b", "gpt_c"], None]],
     "seed": 5, "sequence_length": 16, "sizes": [200, 20, None]},
    {"name": "no_extra_token", "blend": [["gpt_c"], None], "split": "1", "seed": 11, "sequence_length": 20,
     "sizes": [50, None, None], "add_extra_token_to_sequence": False},
    {"name": "eod_mask", "blend": [["gpt_b"], None], "split": "1", "seed": 3, "sequence_length": 12,
     "sizes": [40, None, None], "eod_mask_loss": True},
]


class ShimTokenizer:
    """What GPTDataset reads from a tokenizer: eod, vocab_size, unique_identifiers (no pad)."""

    def __init__(self, eod):
        self.eod = eod
        self.vocab_size = None
        self.unique_identifiers = {"class": "ShimTokenizer", "eod": eod}


def gpt_record(ds):
    return {
        "len": len(ds),
        "document_index": [int(x) for x in ds.document_index],
        "sample_index": [int(x) for x in numpy_ravel(ds.sample_index)],
        "shuffle_index": [int(x) for x in ds.shuffle_index],
    }


def numpy_ravel(a):
    import numpy

    return numpy.asarray(a).reshape(-1)


def gpt_vectors(idx_mod, spec, out, tmp, log):
    import numpy
    from megatron.core.datasets.blended_dataset import BlendedDataset
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig

    gdir = os.path.join(tmp, "gpt")
    os.makedirs(gdir, exist_ok=True)
    for k, name in enumerate(spec["gpt_files"]["names"]):
        write_megatron(idx_mod, os.path.join(gdir, name), numpy.int32, gpt_file_documents(spec, k))

    def path(names):
        return [os.path.join(gdir, n) for n in names]

    from megatron.core.datasets.blended_megatron_dataset_config import (
        convert_split_vector_to_split_matrix,
        parse_and_normalize_split,
    )

    def doc_lengths(name):
        k = spec["gpt_files"]["names"].index(name)
        return [len(d[0]) for d in gpt_file_documents(spec, k)]

    def empty_split(cfg):
        """A split Megatron would build from fewer than 2 tokens: _get_num_epochs then loops
        forever (0 tokens, a size given) or helpers.cpp asserts. Returns why, or None."""
        if "blend" in cfg:
            matrix = convert_split_vector_to_split_matrix(parse_and_normalize_split(cfg["split"]))
            uses = [(i, name, matrix[i]) for name in cfg["blend"][0] for i in range(3) if matrix[i] is not None]
        else:
            uses = [(i, name, (0.0, 1.0)) for i, b in enumerate(cfg["blend_per_split"]) if b is not None for name in b[0]]
        for i, name, (lo, hi) in uses:
            lengths = doc_lengths(name)
            beg, end = int(round(lo * float(len(lengths)))), int(round(hi * float(len(lengths))))
            if sum(lengths[beg:end]) < 2:
                return "split %d of %s: sequences [%d, %d) hold %d tokens" % (i, name, beg, end, sum(lengths[beg:end]))
        return None

    def on_alarm(signum, frame):
        raise TimeoutError("Megatron took over 60 s on this config")

    signal.signal(signal.SIGALRM, on_alarm)
    results = []
    for cfg in GPT_CONFIGS:
        rec = {"config": cfg, "splits": []}
        why = empty_split(cfg)
        if why:
            rec["error"] = "skipped, Megatron would hang or abort: " + why
            log("gpt config %s: %s" % (cfg["name"], rec["error"]))
            results.append(rec)
            continue
        signal.alarm(60)
        try:
            kwargs = dict(
                random_seed=cfg["seed"],
                sequence_length=cfg["sequence_length"],
                tokenizer=ShimTokenizer(spec["gpt_files"]["eod"]),
                reset_position_ids=False,
                reset_attention_mask=False,
                eod_mask_loss=cfg.get("eod_mask_loss", False),
                create_attention_mask=False,
                drop_last_partial_validation_sequence=cfg.get("drop_last_partial_validation_sequence", True),
                add_extra_token_to_sequence=cfg.get("add_extra_token_to_sequence", True),
                path_to_cache=None,
            )
            if "blend" in cfg:
                kwargs["blend"] = (path(cfg["blend"][0]), cfg["blend"][1])
                kwargs["split"] = cfg["split"]
            else:
                kwargs["blend_per_split"] = [None if b is None else (path(b[0]), b[1]) for b in cfg["blend_per_split"]]
            config = GPTDatasetConfig(**kwargs)
            datasets = BlendedMegatronDatasetBuilder(GPTDataset, cfg["sizes"], lambda: True, config).build()
            for ds in datasets:
                if ds is None:
                    rec["splits"].append(None)
                    continue
                split = {"type": type(ds).__name__, "len": len(ds)}
                if isinstance(ds, BlendedDataset):
                    split["weights"] = [float(w).hex() for w in ds.weights]
                    split["size"] = ds.size
                    split["dataset_index"] = [int(x) for x in ds.dataset_index]
                    split["dataset_sample_index"] = [int(x) for x in ds.dataset_sample_index]
                    split["members"] = [gpt_record(m) for m in ds.datasets]
                else:
                    split["gpt"] = gpt_record(ds)
                picks = sorted(set(list(range(min(6, len(ds)))) + list(range(max(0, len(ds) - 2), len(ds)))))
                split["samples"] = []
                for i in picks:
                    item = ds[i]
                    split["samples"].append({
                        "idx": i,
                        "tokens": [int(x) for x in item["tokens"]],
                        "labels": [int(x) for x in item["labels"]],
                        "loss_mask": [float(x) for x in item["loss_mask"]],
                    })
                rec["splits"].append(split)
        except Exception:
            rec["error"] = traceback.format_exc()
            log("gpt config %s failed:\n%s" % (cfg["name"], rec["error"]))
        finally:
            signal.alarm(0)
        results.append(rec)
        log("gpt config %s: %s" % (cfg["name"], [None if s is None else (s["type"], s["len"]) for s in rec["splits"]]))
    with open(os.path.join(out, "gpt_vectors.json"), "w") as f:
        json.dump({"gpt_files": spec["gpt_files"], "configs": results}, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--megatron", required=True, help="folder holding the megatron/ package copy and shims")
    ap.add_argument("--fixtures", required=True, help="tests/fixtures/megatron (spec.json, ours_*.bin/.idx)")
    ap.add_argument("--out", required=True, help="output folder")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    sys.path.insert(0, os.path.abspath(args.megatron))
    with open(os.path.join(args.fixtures, "spec.json")) as f:
        spec = json.load(f)

    def log(msg):
        print(msg, flush=True)

    verdict = {"index_files": {}, "errors": {}}
    tmp = tempfile.mkdtemp(prefix="megatron_fixture_")
    steps = [
        ("helpers", lambda: verdict.__setitem__("helpers_compiler", build_helpers(args.megatron, log))),
    ]
    for name, fn in steps:
        try:
            fn()
        except Exception:
            verdict["errors"][name] = traceback.format_exc()
            log(verdict["errors"][name])
    try:
        import numpy
        import torch

        verdict["versions"] = {"python": sys.version.split()[0], "numpy": numpy.__version__, "torch": torch.__version__}
        from megatron.core.datasets import indexed_dataset as idx_mod
    except Exception:
        verdict["errors"]["import"] = traceback.format_exc()
        log(verdict["errors"]["import"])
        idx_mod = None
    if idx_mod is not None:
        for name, fn in [
            ("index_files", lambda: index_files(idx_mod, spec, args.fixtures, args.out, tmp, verdict, log)),
            ("numpy_vectors", lambda: numpy_vectors(args.megatron, args.out, log)),
            ("gpt_vectors", lambda: gpt_vectors(idx_mod, spec, args.out, tmp, log)),
        ]:
            try:
                fn()
            except Exception:
                verdict["errors"][name] = traceback.format_exc()
                log(verdict["errors"][name])
    ok = not verdict["errors"] and all(
        not e.get("megatron_reads_ours_problems") and not e.get("megatron_reads_megatron")
        and e.get("megatron_add_index_equals_direct") and e.get("ours_bytes_equal_megatron")
        for e in verdict["index_files"].values()
    ) and len(verdict["index_files"]) == 2
    verdict["ok"] = ok
    with open(os.path.join(args.out, "verdict.json"), "w") as f:
        json.dump(verdict, f, indent=1)
    log("verdict ok = %s" % ok)
    shutil.rmtree(tmp, ignore_errors=True)
    for leftover in glob.glob(os.path.join(args.out, "*")):
        log("out: %s (%d bytes)" % (leftover, os.path.getsize(leftover)))
    return 0 if ok else 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # Leave at once: a dataset-builder thread stuck in Megatron must not hold the exit.
    os._exit(code)
