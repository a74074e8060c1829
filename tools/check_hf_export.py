#!/usr/bin/env python3
"""Checks directories written by `nemotron convert export` with transformers itself.

For each exported directory it loads the model with NemotronHForCausalLM.from_pretrained (float64,
eager attention and experts), requires no missing, unexpected or mismatched tensors, and compares
the logits on the fixture's input_ids with the fixture's reference logits (which transformers
computed from the original checkpoint); a bfloat16 export is compared with the original bfloat16
directory loaded the same way. Where the export carries a tokenizer, AutoTokenizer must load it
and encode a sample text as the original tokenizer does.

    python3 tools/check_hf_export.py --exports DIR --fixtures tests/fixtures/hf

DIR holds one exported directory per fixture, named like the fixture (dense, moe, ...), and
optionally <name>-bf16 for bfloat16 exports. Exit status 0 when every check passed.
"""
import argparse
import json
import os
import sys
import traceback

import torch


def log(*args):
    print(*args, flush=True)


def load(d, dtype):
    from transformers import NemotronHForCausalLM

    kw = dict(dtype=dtype, attn_implementation="eager")
    try:
        m, info = NemotronHForCausalLM.from_pretrained(d, experts_implementation="eager", output_loading_info=True, **kw)
    except TypeError:
        m, info = NemotronHForCausalLM.from_pretrained(d, output_loading_info=True, **kw)
    for c in {id(x.config): x.config for x in m.modules() if hasattr(x, "config")}.values():
        for attr in ("_attn_implementation", "_experts_implementation"):
            try:
                setattr(c, attr, "eager")
            except Exception:  # noqa: BLE001
                pass
    return m.eval(), info


def logits(m, ids):
    with torch.no_grad():
        return m.lm_head(m.model(input_ids=ids, use_cache=False).last_hidden_state).double()


def rel(a, b):
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def problems_of(info):
    out = []
    for key in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        v = info.get(key) if isinstance(info, dict) else getattr(info, key, None)
        if v:
            out.append(f"{key}: {sorted(v)[:4] if not isinstance(v, str) else v}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exports", required=True)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--tol", type=float, default=1e-12)
    a = ap.parse_args()
    from safetensors.torch import load_file

    import transformers

    log(f"torch {torch.__version__}, transformers {transformers.__version__}")
    failures = 0
    for name in sorted(os.listdir(a.exports)):
        d = os.path.join(a.exports, name)
        if not os.path.isdir(d):
            continue
        try:
            files = sorted(os.listdir(d))
            log(f"== {name}: {files}")
            cfg = json.load(open(os.path.join(d, "config.json")))
            from transformers import AutoConfig

            auto = AutoConfig.from_pretrained(d)
            log(f"  AutoConfig: {type(auto).__name__}, layers_block_type {getattr(auto, 'layers_block_type', '?')}, "
                f"time_step_limit {getattr(auto, 'time_step_limit', '?')}")
            m, info = load(d, torch.float64)
            probs = problems_of(info)
            tied = m.lm_head.weight is m.model.embeddings.weight
            log(f"  loaded: {sum(p.numel() for p in m.parameters())} parameters; pattern "
                f"{getattr(m.config, 'hybrid_override_pattern', '?')}; tie_word_embeddings {cfg.get('tie_word_embeddings')}, "
                f"head tied in memory: {tied}; loading problems: {probs or 'none'}")
            base = name[:-5] if name.endswith("-bf16") else name
            ref = load_file(os.path.join(a.fixtures, f"{base}.reference.safetensors"))
            ids = ref["input_ids"]
            got = logits(m, ids)
            if name.endswith("-bf16"):
                orig, _ = load(os.path.join(a.fixtures, f"{base}-bf16"), torch.float64)
                want, what = logits(orig, ids), f"the original {base}-bf16 loaded the same way"
            else:
                want, what = ref["logits"].double(), "the fixture's reference logits"
            err = rel(got, want)
            ok = err <= a.tol and not probs
            log(f"  logits vs {what}: relative error {err:.3e} -> {'ok' if ok else 'FAIL'}")
            failures += not ok
            if os.path.exists(os.path.join(d, "tokenizer.json")):
                from transformers import AutoTokenizer

                text = "Hello, who are you? The quick brown fox."
                t_new = AutoTokenizer.from_pretrained(d)(text)["input_ids"]
                t_old = AutoTokenizer.from_pretrained(os.path.join(a.fixtures, base))(text)["input_ids"]
                tok_ok = t_new == t_old
                log(f"  tokenizer: {t_new[:12]}... {'same as the original' if tok_ok else 'DIFFERS: ' + str(t_old[:12])}")
                failures += not tok_ok
        except Exception:  # noqa: BLE001
            failures += 1
            log(f"  FAIL:\n{traceback.format_exc()}")
    log(f"{failures} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
