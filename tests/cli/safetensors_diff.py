#!/usr/bin/env python3
"""Largest differences between the tensors of two safetensors files of the same names and shapes
(float32/float64/bfloat16), in the standard library only:
    safetensors_diff.py A B ABS_TOL REL_TOL
prints the worst absolute and relative difference and the tensor holding them; exit 1 when any
element differs by more than ABS_TOL + REL_TOL * |b| (numpy's isclose rule), 2 on bad input."""
import json
import struct
import sys
from array import array


def read(path):
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


main()
