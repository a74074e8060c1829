#!/usr/bin/env python3
"""Tiny DeciLM (`nemotron-nas`, Llama-3.3-Nemotron-Super-49B family) checkpoints with a reference
computed by transformers' Llama building blocks, for tests/parity/decilm_parity_test.cpp
(fixtures in tests/fixtures/hf-decilm/).

transformers has no DeciLM class of its own (the Hub checkpoints carry remote code, which we never
run). The reference is assembled here from transformers' LlamaAttention, LlamaMLP, LlamaRMSNorm
and LlamaRotaryEmbedding, block by block as `block_configs` says (reference/architectures.md B.1):

    x = embed_tokens[ids]
    per block i:  attention: normal -> x += LlamaAttention_i(LlamaRMSNorm(x))   (its own KV heads)
                             linear -> x += linear_attn(LlamaRMSNorm(x))        ([H, H], no bias)
                             no_op  -> nothing (no norm either)
                  ffn:       normal -> x += LlamaMLP_i(LlamaRMSNorm(x))         (SwiGLU, width B.2)
                             linear -> x += linear_mlp(LlamaRMSNorm(x))
                             no_op  -> nothing
    logits = lm_head(LlamaRMSNorm(x))

with the module names of the Hub checkpoints (B.4), so the state dict IS the checkpoint:
model.embed_tokens.weight, model.layers.{i}.input_layernorm.weight, .self_attn.{q,k,v,o}_proj.weight,
.self_attn.linear_attn.weight, .post_attention_layernorm.weight, .mlp.{gate,up,down}_proj.weight,
.mlp.linear_mlp.weight, model.norm.weight, lm_head.weight.

Run where PyTorch and transformers (>= 4.48; tested against 5.x) are installed; no network:

    python3 tools/make_decilm_fixtures.py --out /tmp/decilm_fixtures
    rm -rf tests/fixtures/hf-decilm && cp -r /tmp/decilm_fixtures tests/fixtures/hf-decilm

The model runs in float64 on the CPU with attention through torch's scaled_dot_product_attention
(`sdpa`, causal, float64) and is checked against the eager attention path. Two places of
transformers compute in float32 even for a float64 model, so the reference carries float32
rounding (about 1e-7 relative), far inside the parity tolerances (logits 1e-4, gradients 1e-3):
LlamaRMSNorm upcasts to float32, and LlamaRotaryEmbedding builds inv_freq and cos/sin in float32.
The script checks LlamaRotaryEmbedding's inv_freq against the llama3 rule computed here in float64
(B.3), so a rope_scaling that transformers silently ignored would stop it.

Outputs under --out: per fixture `<name>/` (config.json in the Hub's DeciLM form with
block_configs, model.safetensors in float32: the weights are float32-exact) and
`<name>.reference.safetensors`: input_ids int64 [B, T], logits float64 [B, T, V], loss float64 []
(mean next-token cross-entropy), grad.<Hub name> float64 for every parameter; and manifest.json.
"""
import argparse
import copy
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


def log(*args):
    print(*args, flush=True)


# Every sub-block kind (B.1): GQA (2 KV heads), MQA (1), MHA (4); linear replacements; no-ops,
# including a block with both no-op; two SwiGLU widths (ffn_mult 1.0 -> 256, 18.0 -> 512 at H 32).
# RoPE: theta 10000, llama3 factor 8, L = 64, so the head_dim 8 pairs fall in all three bands
# (wavelengths 6.3 < 16: kept; 62.8 in [16, 64]: interpolated; 628, 6283 > 64: divided by 8).
BLOCKS = [
    ({"n_heads_in_group": 2}, {"ffn_mult": 1.0}),
    ("no_op", {"ffn_mult": 1.0}),
    ("linear", "linear"),
    ({"n_heads_in_group": 4}, "no_op"),
    ({"n_heads_in_group": 1}, {"ffn_mult": 18.0}),
    ("no_op", "no_op"),
]
FIXTURES = [
    dict(name="decilm", vocab=96, hidden=32, heads=4, batch=2, seq=16, tied=False, seed=20251126),
    dict(name="decilm_tied", vocab=80, hidden=32, heads=4, batch=3, seq=11, tied=True, seed=20251127),
]
ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64}
ROPE_THETA = 10000.0


def ffn_width(ffn_mult, hidden):
    """B.2: round_up_256(int(2 * ffn_mult * H / 3))."""
    f = int(2 * ffn_mult * hidden / 3)
    return (f + 255) // 256 * 256


def sub_block(spec, kind):
    """A BLOCKS entry -> the Hub's block_configs sub-mapping."""
    if kind == "attention":
        out = {"no_op": spec == "no_op", "replace_with_linear": spec == "linear", "n_heads_in_group": None,
               "sparsify": None, "window_length": None, "num_sink_tokens": None,
               "use_prefill_window_in_sink_attention": False, "unshifted_sink": False}
        if isinstance(spec, dict):
            out["n_heads_in_group"] = spec["n_heads_in_group"]
    else:
        out = {"no_op": spec == "no_op", "replace_with_linear": spec == "linear", "ffn_mult": None,
               "sparsify": None}
        if isinstance(spec, dict):
            out["ffn_mult"] = spec["ffn_mult"]
    return out


def hub_config(fx):
    """config.json as the Hub's DeciLM checkpoints write it (B.2, B.5)."""
    return {
        "architectures": ["DeciLMForCausalLM"],
        "model_type": "nemotron-nas",
        "vocab_size": fx["vocab"],
        "hidden_size": fx["hidden"],
        "num_hidden_layers": len(BLOCKS),
        "num_attention_heads": fx["heads"],
        "num_key_value_heads": None,
        "intermediate_size": None,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "max_position_embeddings": 256,
        "rope_theta": ROPE_THETA,
        "rope_scaling": dict(ROPE),
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": fx["tied"],
        "initializer_range": 0.02,
        "torch_dtype": "float32",
        "block_configs": [{"attention": sub_block(a, "attention"), "ffn": sub_block(f, "ffn")} for a, f in BLOCKS],
    }


def llama_config(fx, kv_heads=None, intermediate=None):
    """A LlamaConfig for one block's modules (transformers reads the sizes from it)."""
    from transformers import LlamaConfig

    kw = dict(vocab_size=fx["vocab"], hidden_size=fx["hidden"], num_attention_heads=fx["heads"],
              num_key_value_heads=kv_heads or fx["heads"], intermediate_size=intermediate or 256,
              num_hidden_layers=len(BLOCKS), hidden_act="silu", rms_norm_eps=1e-5, max_position_embeddings=256,
              attention_bias=False, mlp_bias=False, attention_dropout=0.0, tie_word_embeddings=fx["tied"])
    cfg = LlamaConfig(**kw, **rope_kwargs())
    cfg._attn_implementation = "sdpa"
    return cfg


_ROPE_KWARGS = None


def rope_kwargs():
    """How this transformers takes llama3 RoPE: 5.x keeps it in rope_parameters (theta inside),
    4.x in rope_theta + rope_scaling; an unknown keyword is silently kept as an attribute by both,
    so the spelling is chosen by what LlamaRotaryEmbedding then computes (checked against B.3)."""
    global _ROPE_KWARGS
    if _ROPE_KWARGS is not None:
        return _ROPE_KWARGS
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    head_dim = 8
    want = llama3_inv_freq(head_dim)
    tried = []
    for kw in (dict(rope_parameters=dict(ROPE, rope_theta=ROPE_THETA)),
               dict(rope_theta=ROPE_THETA, rope_scaling=dict(ROPE))):
        try:
            cfg = LlamaConfig(hidden_size=8 * 4, num_attention_heads=4, **kw)
            got = LlamaRotaryEmbedding(config=cfg).inv_freq.double()
        except Exception as e:  # noqa: BLE001
            tried.append(f"{list(kw)}: {type(e).__name__}: {e}")
            continue
        if got.shape == want.shape and rel_err(got, want) < 1e-6:
            _ROPE_KWARGS = kw
            log(f"  RoPE given to LlamaConfig as {list(kw)}")
            return kw
        tried.append(f"{list(kw)}: inv_freq {got.tolist()}")
    raise RuntimeError(f"no LlamaConfig spelling gives llama3 RoPE {want.tolist()}: {tried}")


class Linear(nn.Module):
    """A replace_with_linear sub-block: one [H, H] weight under the Hub's name."""

    def __init__(self, name, hidden):
        super().__init__()
        setattr(self, name, nn.Linear(hidden, hidden, bias=False))
        self.name = name

    def forward(self, x):
        return getattr(self, self.name)(x)


class Block(nn.Module):
    def __init__(self, fx, i, attn, ffn):
        super().__init__()
        from transformers.models.llama.modeling_llama import LlamaAttention, LlamaMLP, LlamaRMSNorm

        H = fx["hidden"]
        self.attn_kind = "no_op" if attn == "no_op" else "linear" if attn == "linear" else "normal"
        self.ffn_kind = "no_op" if ffn == "no_op" else "linear" if ffn == "linear" else "normal"
        if self.attn_kind != "no_op":
            self.input_layernorm = LlamaRMSNorm(H, eps=1e-5)
        if self.attn_kind == "normal":
            self.self_attn = LlamaAttention(llama_config(fx, kv_heads=fx["heads"] // attn["n_heads_in_group"]), i)
        elif self.attn_kind == "linear":
            self.self_attn = Linear("linear_attn", H)
        if self.ffn_kind != "no_op":
            self.post_attention_layernorm = LlamaRMSNorm(H, eps=1e-5)
        if self.ffn_kind == "normal":
            self.mlp = LlamaMLP(llama_config(fx, intermediate=ffn_width(ffn["ffn_mult"], H)))
        elif self.ffn_kind == "linear":
            self.mlp = Linear("linear_mlp", H)

    def forward(self, x, cos_sin):
        if self.attn_kind == "normal":
            h = self.input_layernorm(x)
            out = self.self_attn(hidden_states=h, position_embeddings=cos_sin, attention_mask=None)
            x = x + (out[0] if isinstance(out, tuple) else out)
        elif self.attn_kind == "linear":
            x = x + self.self_attn(self.input_layernorm(x))
        if self.ffn_kind != "no_op":
            x = x + self.mlp(self.post_attention_layernorm(x))
        return x


class Trunk(nn.Module):
    def __init__(self, fx):
        super().__init__()
        from transformers.models.llama.modeling_llama import LlamaRMSNorm, LlamaRotaryEmbedding

        self.embed_tokens = nn.Embedding(fx["vocab"], fx["hidden"])
        self.layers = nn.ModuleList([Block(fx, i, a, f) for i, (a, f) in enumerate(BLOCKS)])
        self.norm = LlamaRMSNorm(fx["hidden"], eps=1e-5)
        self.rotary_emb = LlamaRotaryEmbedding(config=llama_config(fx))

    def forward(self, ids):
        x = self.embed_tokens(ids)
        pos = torch.arange(ids.shape[1]).unsqueeze(0).expand(ids.shape[0], -1)
        cos_sin = self.rotary_emb(x, pos)
        for block in self.layers:
            x = block(x, cos_sin)
        return self.norm(x)


class DeciLM(nn.Module):
    def __init__(self, fx):
        super().__init__()
        self.model = Trunk(fx)
        self.lm_head = nn.Linear(fx["hidden"], fx["vocab"], bias=False)
        if fx["tied"]:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, ids):
        return self.lm_head(self.model(ids))


def llama3_inv_freq(head_dim):
    """B.3 in float64: the rule LlamaRotaryEmbedding must have applied."""
    L, lo, hi, factor = (ROPE["original_max_position_embeddings"], ROPE["low_freq_factor"],
                         ROPE["high_freq_factor"], ROPE["factor"])
    out = []
    for i in range(head_dim // 2):
        f = ROPE_THETA ** (-2.0 * i / head_dim)
        wavelen = 2 * math.pi / f
        if wavelen < L / hi:
            out.append(f)
        elif wavelen > L / lo:
            out.append(f / factor)
        else:
            s = (L / wavelen - lo) / (hi - lo)
            out.append((1 - s) * f / factor + s * f)
    return torch.tensor(out, dtype=torch.float64)


def randomize(model, gen):
    """Every parameter at scales that keep activations O(1); values float32-exact."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            s = tuple(p.shape)
            if name.endswith("norm.weight") or name.endswith("layernorm.weight"):
                v = torch.rand(s, generator=gen, dtype=torch.float64) * 0.8 + 0.6
            elif name.endswith("embed_tokens.weight"):
                v = torch.randn(s, generator=gen, dtype=torch.float64)
            elif p.dim() == 2:
                v = torch.randn(s, generator=gen, dtype=torch.float64) / math.sqrt(s[1])
            else:
                raise RuntimeError(f"no rule for parameter {name} {s}")
            p.copy_(v.float().double())


def rel_err(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def eager_agrees(model, ids, logits):
    """The same model with eager attention (explicit causal mask, float32 softmax): must agree."""
    m = copy.deepcopy(model)
    T = ids.shape[1]
    mask = torch.full((T, T), torch.finfo(torch.float64).min, dtype=torch.float64).triu(1)[None, None]
    for block in m.model.layers:
        if block.attn_kind == "normal":
            block.self_attn.config._attn_implementation = "eager"
            fwd = block.self_attn.forward
            block.self_attn.forward = (lambda f: lambda **kw: f(**dict(kw, attention_mask=mask)))(fwd)
    with torch.no_grad():
        return rel_err(m(ids), logits)


def build(fx, out_dir, manifest):
    from safetensors.torch import save_file

    name = fx["name"]
    log(f"== {name}: {len(BLOCKS)} blocks, H {fx['hidden']}, heads {fx['heads']}, B={fx['batch']} T={fx['seq']}, "
        f"tied={fx['tied']}")
    torch.manual_seed(fx["seed"])
    model = DeciLM(fx).double().eval()
    if fx["tied"] and model.lm_head.weight is not model.model.embed_tokens.weight:
        raise RuntimeError("the tied head came apart in .double()")
    gen = torch.Generator().manual_seed(fx["seed"])
    randomize(model, gen)

    head_dim = fx["hidden"] // fx["heads"]
    inv = model.model.rotary_emb.inv_freq.double()
    e_inv = rel_err(inv, llama3_inv_freq(head_dim))
    log(f"  LlamaRotaryEmbedding inv_freq vs the llama3 rule in float64: rel err {e_inv:.2e}")
    if e_inv > 1e-6:
        raise RuntimeError(f"transformers' inv_freq {inv.tolist()} is not the llama3 rule "
                           f"{llama3_inv_freq(head_dim).tolist()}: rope_scaling was not applied")
    scaling = getattr(model.model.rotary_emb, "attention_scaling", 1.0)
    if abs(scaling - 1.0) > 0:
        raise RuntimeError(f"llama3 RoPE must have attention_scaling 1, got {scaling}")

    ids = torch.randint(0, fx["vocab"], (fx["batch"], fx["seq"]), generator=gen)
    model.zero_grad()
    logits = model(ids)
    V = fx["vocab"]
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))
    loss.backward()
    log(f"  loss {loss.item():.6f}")
    e_eager = eager_agrees(model, ids, logits.detach())
    log(f"  eager attention (float32 softmax) vs sdpa float64: logits rel err {e_eager:.2e}")
    if e_eager > 1e-5:
        raise RuntimeError("eager and sdpa attention disagree: the causal masking is not what it should be")

    ref = {"input_ids": ids.to(torch.int64).contiguous(), "logits": logits.detach().contiguous(),
           "loss": loss.detach().reshape(()).clone()}
    params = dict(model.named_parameters())  # a tied head appears once, as the embedding
    for pname, p in params.items():
        if p.grad is None:
            raise RuntimeError(f"{name}: no gradient for {pname}")
        ref["grad." + pname] = p.grad.detach().clone().contiguous()
    ref_path = os.path.join(out_dir, f"{name}.reference.safetensors")
    save_file(ref, ref_path, metadata={"format": "pt"})
    log(f"  wrote {ref_path} ({len(params)} gradients)")

    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(hub_config(fx), f, indent=2)
    weights = {k: v.detach().float().contiguous() for k, v in params.items()}
    save_file(weights, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    log(f"  wrote {d}/ ({len(weights)} tensors{', lm_head tied: not stored' if fx['tied'] else ''})")

    manifest["fixtures"].append({
        "name": name, "dir": name, "reference": os.path.basename(ref_path), "batch": fx["batch"],
        "seq": fx["seq"], "seed": fx["seed"], "tied": fx["tied"], "loss": loss.item(),
        "blocks": [[sub_block(a, "attention"), sub_block(f, "ffn")] for a, f in BLOCKS],
        "ffn_widths": [ffn_width(f["ffn_mult"], fx["hidden"]) if isinstance(f, dict) else None for _, f in BLOCKS],
        "inv_freq_rel_err": e_inv, "eager_vs_sdpa_logits_rel_err": e_eager,
    })


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import transformers

    os.makedirs(args.out, exist_ok=True)
    torch.set_grad_enabled(True)
    manifest = {"torch": torch.__version__, "transformers": transformers.__version__,
                "generator": "tools/make_decilm_fixtures.py", "rope_theta": ROPE_THETA, "rope_scaling": ROPE,
                "fixtures": []}
    for fx in FIXTURES:
        build(fx, args.out, manifest)
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
    log(f"wrote {args.out}/manifest.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
