#!/usr/bin/env python3
"""Parquet chat rows as Hugging Face datasets ship them, for the nested-column reader
(src/io/parquet_rows.h) through which `data prep sft` and `data prep rl` read .parquet inputs
(tests/io/parquet_rows_test.cpp, tests/cli/sft_data_prep_test.sh): tests/fixtures/parquet/chat_<variant>.parquet plus
chat_rows.jsonl, the rows as pyarrow's to_pylist() returns them (what Nemotron's data prep feeds
its chat template: a struct field a message lacks comes back as None).

Columns: messages list<struct<role, content, reasoning_content, tool_calls list<struct<type,
function struct<name, arguments>>>>>, tools list<struct<type, function struct<name, description,
parameters string>>> (nullable), used_in list<string>. Variants: pyarrow's defaults (snappy,
dictionary, data pages v1), zstd with data pages v2 and no dictionary, and small pages so lists
cross page boundaries.

Needs pyarrow (the GPU machine has it). Run from the repository root:
  python3 tools/make_parquet_chat_fixtures.py
"""
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "parquet"

CALL = pa.struct([("type", pa.string()), ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())]))])
MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string()), ("reasoning_content", pa.string()),
                     ("tool_calls", pa.list_(CALL))])
TOOL = pa.struct([("type", pa.string()),
                  ("function", pa.struct([("name", pa.string()), ("description", pa.string()), ("parameters", pa.string())]))])
SCHEMA = pa.schema([("messages", pa.list_(MESSAGE)), ("tools", pa.list_(TOOL)), ("used_in", pa.list_(pa.string()))])

CALC = {"type": "function", "function": {"name": "calculator", "description": "Evaluate.",
                                         "parameters": json.dumps({"type": "object", "properties": {"expression": {"type": "string"}}})}}


def rows():
    out = [
        {"messages": [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "5"}], "tools": None,
         "used_in": ["nano_v3"]},
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q"},
                      {"role": "assistant", "content": "A", "reasoning_content": "think"}], "tools": [], "used_in": ["nano_v3", "x"]},
        {"messages": [{"role": "user", "content": "6 * 7?"},
                      {"role": "assistant", "content": "", "tool_calls": [
                          {"type": "function", "function": {"name": "calculator", "arguments": "{\"expression\": \"6 * 7\"}"}}]},
                      {"role": "tool", "content": "42"}, {"role": "assistant", "content": "42", "reasoning_content": None}],
         "tools": [CALC], "used_in": None},
        {"messages": [], "tools": None, "used_in": []},
        {"messages": None, "tools": None, "used_in": ["nano_v3"]},
        {"messages": [{"role": "user", "content": None}, {"role": "assistant", "content": "é 🙂 " * 50}], "tools": None,
         "used_in": ["nano_v3"]},
    ]
    # Enough rows that small pages split lists across pages.
    for k in range(200):
        out.append({"messages": [{"role": "user", "content": f"What is {k} + {k}?"},
                                 {"role": "assistant", "content": f"{2 * k}", "reasoning_content": f"{k} + {k} = {2 * k}." if k % 3 else None}],
                    "tools": None, "used_in": ["nano_v3"]})
    return out


def main():
    table = pa.Table.from_pylist(rows(), schema=SCHEMA)
    variants = {
        "default": {},
        "zstd_v2_plain": {"compression": "zstd", "use_dictionary": False, "data_page_version": "2.0"},
        "small_pages": {"compression": "zstd", "data_page_size": 256, "row_group_size": 64},
    }
    for name, kw in variants.items():
        path = OUT / f"chat_{name}.parquet"
        pq.write_table(table, path, **kw)
        assert pq.read_table(path).to_pylist() == table.to_pylist(), name
    with open(OUT / "chat_rows.jsonl", "w", encoding="utf-8") as f:
        for row in table.to_pylist():
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"pyarrow {pa.__version__}: {len(variants)} files of {table.num_rows} rows in {OUT}")


if __name__ == "__main__":
    main()
