#!/usr/bin/env python3
"""Expected outputs for the Jinja interpreter (src/data/jinja/) and the SFT chunker
(src/data/sft_conversation.cpp): tests/fixtures/jinja/expected.json.

Renders every committed template (tests/fixtures/jinja/*.jinja) on every committed case
(cases.json) under a few sets of variables, with jinja2 configured as transformers'
`_compile_jinja_template` configures it: ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True), the loopcontrols extension, a `{% generation %}` block that renders its body,
`tojson` = json.dumps(ensure_ascii=False, indent, separators, sort_keys), the `raise_exception`
global; render(messages=..., tools=... or None, documents=None, add_generation_prompt=..., plus the
tokenizer's special tokens and the caller's kwargs). A render that raises is recorded as an error.

With --nemotron PATH (a checkout of NVIDIA-NeMo/Nemotron), also records the training chunks its
data prep cuts (core/chat_template.py: replace_json_args, create_masked_messages,
split_system_user_chunks) from nano3.jinja for every case, run on that code itself.

Needs jinja2 (3.1.x) only. Run from the repository root:
  python3 tools/make_jinja_fixtures.py [--nemotron ../Nemotron]
"""
import argparse
import importlib.util
import json
import sys
from pathlib import Path

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "jinja"
SPECIAL = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}

# Variables per template, on top of messages/tools/add_generation_prompt (both values of the
# latter are rendered for every entry).
VARIANTS = {
    "nano3.jinja": [
        {},
        {"chat_template_kwargs": {"enable_thinking": False}},
        {"chat_template_kwargs": {"truncate_history_thinking": False, "reasoning_budget": 128}},
    ],
    "llama3_3.jinja": [{}, {"tools_in_user_message": False, "date_string": "1 Jan 2025"},
                       {"builtin_tools": ["wolfram_alpha", "code_interpreter"]}],
    "nemotron_nano_v2.jinja": [{}],
    "nemotron_h_8b_reasoning.jinja": [{}],
    "nemotron_h_47b_reasoning.jinja": [{}],
    "megatron_nemotron_h_aligned.jinja": [{}],
    "megatron_nemotron_nano_v2.jinja": [{}],
    "features.jinja": [{}],
}


class GenerationBlock(jinja2.ext.Extension):
    """transformers' AssistantTracker as far as the text goes: the block renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def render(template, messages, tools, add_generation_prompt, extra):
    return template.render(messages=messages, tools=tools, documents=None,
                           add_generation_prompt=add_generation_prompt, **SPECIAL, **extra)


def renders(env, cases):
    out = []
    for name, variants in VARIANTS.items():
        template = env.from_string((FIXTURES / name).read_text(encoding="utf-8"))
        for case in cases:
            for extra in variants:
                for gen in (False, True):
                    entry = {"template": name, "case": case["name"], "add_generation_prompt": gen, "vars": extra}
                    try:
                        entry["output"] = render(template, case["messages"], case.get("tools"), gen, extra)
                    except Exception as e:  # noqa: BLE001 - any failure is what the C++ side must also refuse
                        entry["error"] = f"{type(e).__name__}: {e}"
                    out.append(entry)
    return out


class TemplateTokenizer:
    """What Nemotron's data prep calls: apply_chat_template(tokenize=False, ...) as transformers does."""

    def __init__(self, template):
        self.template = template

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False, tools=None, **kwargs):
        assert not tokenize
        return render(self.template, messages, tools, add_generation_prompt, kwargs)


def chunks(env, cases, nemotron):
    path = Path(nemotron) / "src" / "nemotron" / "data_prep" / "core" / "chat_template.py"
    spec = importlib.util.spec_from_file_location("nemotron_chat_template", path)
    ct = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ct)
    tok = TemplateTokenizer(env.from_string((FIXTURES / "nano3.jinja").read_text(encoding="utf-8")))
    out = []
    for case in cases:
        entry = {"case": case["name"]}
        try:
            messages = ct.replace_json_args(case["messages"])
            seqs = ct.create_masked_messages(messages, tok, case.get("tools"))
            entry["sequences"] = [[[c["role"], c["content"]] for c in ct.split_system_user_chunks(s)] for s, _ in seqs]
        except Exception as e:  # noqa: BLE001 - Nemotron drops the row (num_errors)
            entry["error"] = f"{type(e).__name__}: {e}"
        out.append(entry)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nemotron", help="a checkout of NVIDIA-NeMo/Nemotron (for the chunk fixtures)")
    args = ap.parse_args()
    cases = json.loads((FIXTURES / "cases.json").read_text(encoding="utf-8"))
    env = environment()
    result = {"jinja2": jinja2.__version__, "special_tokens": SPECIAL, "renders": renders(env, cases)}
    if args.nemotron:
        result["chunks"] = chunks(env, cases, args.nemotron)
    else:
        old = FIXTURES / "expected.json"
        if old.exists() and "chunks" in json.loads(old.read_text(encoding="utf-8")):
            sys.exit("expected.json has Nemotron chunks: pass --nemotron to regenerate them too")
    (FIXTURES / "expected.json").write_text(json.dumps(result, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    errors = sum("error" in r for r in result["renders"])
    print(f"{len(result['renders'])} renders ({errors} errors), {len(result.get('chunks', []))} chunk cases")


if __name__ == "__main__":
    main()
