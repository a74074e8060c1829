#!/usr/bin/env python3
"""Largest differences between the tensors of two safetensors files of the same names and shapes
(float32/float64/bfloat16), in the standard library only:
    safetensors_diff.py A B ABS_TOL REL_TOL
prints the worst absolute and relative difference and the tensor holding them; exit 1 when any
element differs by more than ABS_TOL + REL_TOL * |b| (numpy's isclose rule), 2 on bad input.
A path DIR/model.safetensors or DIR/optimizer.safetensors of a sharded iteration (train_state.json
lists rank files instead) reads that part's tensors reassembled from the rank files' pieces
(src/io/tensor_pieces.h), by an independent reader of the format."""
import json
import os
import struct
import sys
from array import array


def read_sharded(path):
    """The whole tensors of part "model" or "optimizer" of the sharded iteration holding `path`."""
    d, part = os.path.dirname(path), os.path.basename(path).split(".")[0]
    state = json.load(open(os.path.join(d, "train_state.json")))
    out = {}
    for rank_file in state["sharded"]["rank_files"]:
        p = os.path.join(d, rank_file)
        stored = read(p)
        with open(p, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            pieces = json.loads(json.loads(f.read(n))["__metadata__"]["nemotron.pieces"])
        for e in pieces:
            if e["part"] != part:
                continue
            g, off, box = e["global_shape"] or [1], e["offset"] or [0], e["box"] or [1]
            numel = 1
            for x in g:
                numel *= x
            shape, whole = out.setdefault(e["name"], (e["global_shape"], [None] * numel))
            data = stored[e["key"]][1]
            for i, v in zip(range(e["begin"], e["end"]), data):  # box-flat index -> global-flat index
                rest, idx = i, [0] * len(box)
                for k in reversed(range(len(box))):
                    idx[k], rest = rest % box[k], rest // box[k]
                flat = 0
                for k in range(len(g)):
                    flat = flat * g[k] + off[k] + idx[k]
                if whole[flat] is not None:
                    sys.exit(f"{p}: {e['name']}: element {flat} stored twice")
                whole[flat] = v
    for name, (shape, whole) in out.items():
        if None in whole:
            sys.exit(f"{d}: {name}: {whole.count(None)} elements in no rank file")
        out[name] = (shape, array("f", whole))
    return out


def read(path):
    if not os.path.exists(path) and os.path.exists(os.path.join(os.path.dirname(path), "train_state.json")):
        return read_sharded(path)
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        raw = data[a:b]
        dt = info["dtype"]
        if dt == "F32":
            v = array("f")
            v.frombytes(raw)
        elif dt == "F64":
            v = array("d")
            v.frombytes(raw)
        elif dt == "BF16":
            h = array("H")
            h.frombytes(raw)
            v = array("f")
            v.frombytes(b"".join(struct.pack("<I", x << 16) for x in h))
        else:
            sys.exit(f"{path}: {name}: dtype {dt} not compared")
        out[name] = (info["shape"], v)
    return out


def main():
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    a, b = read(sys.argv[1]), read(sys.argv[2])
    atol, rtol = float(sys.argv[3]), float(sys.argv[4])
    if a.keys() != b.keys():
        print(f"different tensors: {sorted(a.keys() ^ b.keys())}")
        sys.exit(1)
    worst_abs, worst_rel, where, bad, total = 0.0, 0.0, "", 0, 0
    for name in sorted(a):
        (sa, va), (sb, vb) = a[name], b[name]
        if sa != sb:
            print(f"{name}: shape {sa} vs {sb}")
            sys.exit(1)
        for x, y in zip(va, vb):
            total += 1
            d = abs(x - y)
            if d > worst_abs:
                worst_abs, where = d, name
            if y != 0:
                worst_rel = max(worst_rel, d / abs(y))
            if d > atol + rtol * abs(y):
                bad += 1
    print(f"{total} values: max |a-b| {worst_abs:.3e} (in {where}), max relative {worst_rel:.3e}; "
          f"{bad} beyond {atol:g} + {rtol:g} |b|")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
