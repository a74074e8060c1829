#!/usr/bin/env python3
"""Tiny Hugging Face `nemotron_h` checkpoints with transformers' own outputs, for the parity and
round-trip tests (tests/parity/, tests/fixtures/hf/).

Run where PyTorch and transformers (>= 5, with NemotronHConfig / NemotronHForCausalLM) are
installed; no network is needed:

    python3 tools/make_hf_fixtures.py --out /tmp/hf_fixtures
    cp -r /tmp/hf_fixtures/* tests/fixtures/hf/

For each fixture it builds a random-weight NemotronHForCausalLM, randomizes EVERY parameter and
buffer (norm weights, D, dt_bias, A_log, conv, router weight and e_score_correction_bias too), rounds
the weights to float32, and runs the model in float64 on the CPU, which is transformers' pure-PyTorch
path (use_mamba_kernels is off and the tensors are not on CUDA, so the Mamba mixer calls its
reference `mamba2_chunk_scan` and `causal_conv1d_fn`):
  - logits = lm_head(model.model(input_ids)) in float64 (NemotronHForCausalLM.forward casts logits
    to float32; the float64 head output is taken directly instead, and the float32 path is checked
    to agree),
  - loss = mean next-token cross-entropy (labels = input_ids shifted by one, what
    `model(input_ids, labels=input_ids).loss` computes, which is also recorded),
  - every parameter's gradient of that loss.
transformers 5.17 is not float64 throughout even for a float64 model: mamba2_chunk_scan casts x, B,
C and dt to float32, and the MoE router computes its logits, scores and combine weights in float32.
The references therefore carry float32 rounding (about 1e-7 relative), far inside the tolerances.
It saves each model twice, in both weight layouts an importer must read: the Hub layout
(`backbone.*`, per-expert `experts.{e}.{up,down}_proj.weight`), which is what save_pretrained
writes, and transformers' in-memory fused layout (`model.*`, 3-D `experts.up_proj [E, F, d]` /
`experts.down_proj [E, d, F]`), written from the state dict. Both are reloaded with
from_pretrained and must reproduce the reference logits, which proves both layouts mean the model.
transformers does not tie nemotron_h's head (NemotronHForCausalLM._tied_weights_keys is {}): the
`tied` fixture is tied by hand for the reference and saved without lm_head.weight, which
from_pretrained cannot load faithfully (its head starts random; recorded in the manifest).

The time_step_min clamp (reference/architectures.md A.3.2 step 4): transformers 5.17's mixer sets
time_step_limit = (time_step_min, inf) whatever config.json says and clamps
dt = softplus(dt_raw + dt_bias) to it, while the kernels elsewhere (and our model) apply only
config.time_step_limit, (0, inf) by default. The fixtures keep the default time_step_min = 0.001
and choose dt_bias and the input scale so that every dt lies far above it (checked per Mamba layer
with a forward hook: at least 5x time_step_min; the smallest dt, about 0.02, is recorded in the
manifest), so the clamp is inactive and both definitions agree exactly.

MoE routing is discontinuous: the script also checks that no token is within 1e-3 of a routing tie
(group choice or top-k), so float32 vs float64 router arithmetic cannot pick different experts.

Outputs under --out: one directory per fixture and layout (config.json, *.safetensors,
tokenizer files for `dense`), `<name>.reference.safetensors` (input_ids int64 [B, T], logits
float64 [B, T, V], loss float64 [], loss_transformers, grad.<Hub name> float64), a bfloat16 sharded
copy of the MoE model for the round-trip test, and manifest.json describing all of it.
"""
import argparse
import copy
import glob
import inspect
import json
import math
import os
import re
import shutil
import sys
import traceback

import torch
import torch.nn.functional as F


def log(*args):
    print(*args, flush=True)


# name, pattern, model sizes, batch B, tokens T. n_groups > 1 everywhere; `ragged` and `tied`
# have T not a multiple of chunk_size; `moe` has group-limited routing and a latent projection.
FIXTURES = [
    dict(name="dense", pattern="M-*M-", vocab=288, hidden=32, heads=4, kv_heads=2, head_dim=8,
         intermediate=48, mamba_heads=4, mamba_head_dim=8, n_groups=2, state=8, chunk=8,
         batch=2, seq=16, tokenizer=True),
    dict(name="moe", pattern="ME*E", vocab=96, hidden=32, heads=4, kv_heads=2, head_dim=8,
         mamba_heads=4, mamba_head_dim=8, n_groups=2, state=8, chunk=8,
         experts=8, top_k=3, moe_intermediate=24, shared_intermediate=40, latent=16,
         n_group=4, topk_group=2, routed_scaling=2.5, norm_topk=True, batch=2, seq=12),
    dict(name="moe_flat", pattern="EM*E", vocab=96, hidden=24, heads=2, kv_heads=1, head_dim=12,
         mamba_heads=4, mamba_head_dim=6, n_groups=2, state=4, chunk=4,
         experts=6, top_k=2, moe_intermediate=16, shared_intermediate=20, latent=None,
         n_group=2, topk_group=1, routed_scaling=1.0, norm_topk=False, batch=2, seq=9),
    dict(name="tied", pattern="M-*", vocab=96, hidden=32, heads=4, kv_heads=4, head_dim=8,
         intermediate=40, mamba_heads=4, mamba_head_dim=8, n_groups=2, state=4, chunk=4,
         batch=2, seq=10, tied=True),
    dict(name="ragged", pattern="MM*-M", vocab=96, hidden=32, heads=4, kv_heads=2, head_dim=8,
         intermediate=48, mamba_heads=8, mamba_head_dim=4, n_groups=4, state=8, chunk=8,
         batch=3, seq=21),
]

MIN_DT_FACTOR = 5.0  # every dt must exceed MIN_DT_FACTOR * time_step_min
MIN_ROUTING_MARGIN = 1e-3


def make_config(fx):
    from transformers import NemotronHConfig

    kw = dict(
        vocab_size=fx["vocab"], hidden_size=fx["hidden"], tie_word_embeddings=fx.get("tied", False),
        num_attention_heads=fx["heads"], num_key_value_heads=fx["kv_heads"], head_dim=fx["head_dim"],
        max_position_embeddings=64, intermediate_size=fx.get("intermediate", 32), mlp_hidden_act="relu2",
        mamba_num_heads=fx["mamba_heads"], mamba_head_dim=fx["mamba_head_dim"], n_groups=fx["n_groups"],
        ssm_state_size=fx["state"], conv_kernel=4, chunk_size=fx["chunk"], use_mamba_kernels=False,
        layer_norm_epsilon=1e-5, pad_token_id=0, bos_token_id=1, eos_token_id=2,
    )
    if "E" in fx["pattern"]:
        kw.update(n_routed_experts=fx["experts"], num_experts_per_tok=fx["top_k"],
                  moe_intermediate_size=fx["moe_intermediate"],
                  moe_shared_expert_intermediate_size=fx["shared_intermediate"], n_shared_experts=1,
                  moe_latent_size=fx["latent"], n_group=fx["n_group"], topk_group=fx["topk_group"],
                  routed_scaling_factor=float(fx["routed_scaling"]), norm_topk_prob=fx["norm_topk"])
    try:
        cfg = NemotronHConfig(hybrid_override_pattern=fx["pattern"], **kw)
    except Exception as e:  # a transformers without the legacy pattern argument
        log(f"  NemotronHConfig(hybrid_override_pattern=...) failed ({e}); using layers_block_type")
        names = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
        cfg = NemotronHConfig(layers_block_type=[names[c] for c in fx["pattern"]], **kw)
    got = getattr(cfg, "hybrid_override_pattern", None)
    if got is not None and got != fx["pattern"]:
        raise RuntimeError(f"config pattern {got!r} != {fx['pattern']!r}")
    return cfg


def force_eager(model):
    """Eager attention and the eager experts loop (the grouped_mm path is not float64-safe)."""
    configs = {id(m.config): m.config for m in model.modules() if hasattr(m, "config")}
    for c in configs.values():
        for attr in ("_attn_implementation", "_experts_implementation"):
            try:
                setattr(c, attr, "eager")
            except Exception as e:  # noqa: BLE001
                log(f"  note: cannot set {attr}: {e}")


def uniform(gen, shape, lo, hi):
    return torch.rand(shape, generator=gen, dtype=torch.float64) * (hi - lo) + lo


def normal(gen, shape, std):
    return torch.randn(shape, generator=gen, dtype=torch.float64) * std


def randomize(model, gen):
    """Every parameter and buffer, at scales that keep activations O(1); values float32-exact."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            s = tuple(p.shape)
            if name.endswith("A_log"):
                v = torch.log(uniform(gen, s, 1.0, 4.0))
            elif name.endswith(".D"):
                v = uniform(gen, s, 0.5, 1.5)
            elif name.endswith("dt_bias"):
                v = uniform(gen, s, -1.0, 0.5)
            elif name.endswith("norm.weight") or name.endswith("norm_f.weight"):
                v = uniform(gen, s, 0.6, 1.4)
            elif name.endswith("conv1d.weight"):
                v = uniform(gen, s, -0.5, 0.5)
            elif name.endswith("conv1d.bias"):
                v = uniform(gen, s, -0.2, 0.2)
            elif name.endswith("embeddings.weight") or name.endswith("embedding.weight"):
                v = normal(gen, s, 1.0)
            elif p.dim() == 3:  # fused experts [E, out, in]
                v = normal(gen, s, 1.0 / math.sqrt(s[2]))
            elif p.dim() == 2:  # Linear [out, in]
                v = normal(gen, s, 1.0 / math.sqrt(s[1]))
            elif p.dim() == 1:  # a bias
                v = uniform(gen, s, -0.1, 0.1)
            else:
                raise RuntimeError(f"no rule for parameter {name} {s}")
            p.copy_(v.float().double())
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(uniform(gen, tuple(b.shape), -0.3, 0.3).float().to(b.dtype))


def hub_items(name, tensor):
    """Fused in-memory name -> Hub name(s); experts are split per expert."""
    n = "backbone." + name[len("model."):] if name.startswith("model.") else name
    m = re.match(r"^(backbone\.layers\.\d+\.mixer\.experts)\.(up_proj|down_proj)$", n)
    if m:
        return [(f"{m.group(1)}.{e}.{m.group(2)}.weight", tensor[e]) for e in range(tensor.shape[0])]
    return [(n, tensor)]


def state_tensors(model):
    """(fused name, tensor) for every parameter (deduplicated: a tied head appears once) and
    every persistent buffer."""
    out = dict(model.named_parameters())
    persistent = set(model.state_dict().keys())
    for name, b in model.named_buffers():
        if name in persistent:
            out[name] = b
    return out


class Probes:
    """Forward hooks: the smallest dt of every Mamba layer and the smallest routing margin of
    every MoE layer, recomputed in float64 from each mixer's input."""

    def __init__(self, model, cfg):
        self.min_dt = math.inf
        self.max_dt = 0.0
        self.margin = math.inf
        self.errors = []
        self.handles = []
        self.cfg = cfg
        for _, m in model.named_modules():
            kind = type(m).__name__
            if kind == "NemotronHMamba2Mixer":
                self.handles.append(m.register_forward_pre_hook(self.mamba_hook, with_kwargs=True))
            elif kind == "NemotronHMoE":
                self.handles.append(m.register_forward_pre_hook(self.moe_hook, with_kwargs=True))

    def mamba_hook(self, mixer, args, kwargs=None):
        try:
            self.mamba_probe(mixer, args[0] if args else kwargs["hidden_states"])
        except Exception as e:  # noqa: BLE001
            self.errors.append(f"mamba probe: {type(e).__name__}: {e}")

    def moe_hook(self, moe, args, kwargs=None):
        try:
            self.moe_probe(moe, args[0] if args else kwargs["hidden_states"])
        except Exception as e:  # noqa: BLE001
            self.errors.append(f"moe probe: {type(e).__name__}: {e}")

    def mamba_probe(self, mixer, x):
        with torch.no_grad():
            nh = mixer.dt_bias.shape[0]
            raw = F.linear(x.double(), mixer.in_proj.weight.double())[..., -nh:]
            dt = F.softplus(raw + mixer.dt_bias.double())
            self.min_dt = min(self.min_dt, dt.min().item())
            self.max_dt = max(self.max_dt, dt.max().item())

    def moe_probe(self, moe, x):
        with torch.no_grad():
            c = self.cfg
            E, ng, tg, k = c.n_routed_experts, c.n_group, c.topk_group, c.num_experts_per_tok
            h = x.reshape(-1, x.shape[-1]).double()
            p = torch.sigmoid(h @ moe.gate.weight.double().t())
            q = p + moe.gate.e_score_correction_bias.double()
            gs = q.view(-1, ng, E // ng).topk(2, dim=-1)[0].sum(-1)
            if tg < ng:
                srt = gs.sort(dim=-1, descending=True)[0]
                self.margin = min(self.margin, (srt[:, tg - 1] - srt[:, tg]).min().item())
            keep = torch.zeros_like(gs).scatter_(1, gs.topk(tg, dim=-1)[1], 1.0)
            mask = keep.unsqueeze(-1).expand(-1, ng, E // ng).reshape(-1, E).bool()
            qm = q.masked_fill(~mask, -math.inf).sort(dim=-1, descending=True)[0]
            if k < tg * (E // ng):
                self.margin = min(self.margin, (qm[:, k - 1] - qm[:, k]).min().item())

    def remove(self):
        for h in self.handles:
            h.remove()


def rel_err(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def safetensors_keys(d):
    from safetensors import safe_open

    keys = {}
    for f in sorted(glob.glob(os.path.join(d, "*.safetensors"))):
        with safe_open(f, "pt") as h:
            for k in h.keys():
                keys[k] = (str(h.get_slice(k).get_dtype()), h.get_slice(k).get_shape())
    return keys


def write_layout(d, config_src, tensors):
    from safetensors.torch import save_file

    os.makedirs(d, exist_ok=True)
    shutil.copy(os.path.join(config_src, "config.json"), os.path.join(d, "config.json"))
    save_file({k: v.detach().clone().contiguous() for k, v in tensors.items()}, os.path.join(d, "model.safetensors"),
              metadata={"format": "pt"})


def load_pretrained(d, dtype):
    from transformers import NemotronHForCausalLM

    try:
        m = NemotronHForCausalLM.from_pretrained(d, dtype=dtype, attn_implementation="eager",
                                                 experts_implementation="eager")
    except TypeError:
        m = NemotronHForCausalLM.from_pretrained(d, dtype=dtype, attn_implementation="eager")
    force_eager(m)
    return m.eval()


def reference_logits(model, ids):
    out = model.model(input_ids=ids, use_cache=False)
    return model.lm_head(out.last_hidden_state)


def build(fx, out_dir, manifest, seed0):
    from safetensors.torch import save_file
    from transformers import NemotronHForCausalLM

    name = fx["name"]
    log(f"== {name}: pattern {fx['pattern']}, B={fx['batch']} T={fx['seq']} chunk={fx['chunk']}")
    cfg = make_config(fx)
    for attempt in range(20):
        seed = seed0 + 1000 * attempt
        torch.manual_seed(seed)
        model = NemotronHForCausalLM(cfg)
        force_eager(model)
        tied_by_transformers = model.lm_head.weight is model.model.embeddings.weight
        if fx.get("tied") and not tied_by_transformers:
            log("  transformers did not tie lm_head to the embedding (NemotronHForCausalLM._tied_weights_keys = "
                f"{getattr(type(model), '_tied_weights_keys', None)!r}); tying it by hand for the reference")
            model.lm_head.weight = model.model.embeddings.weight
        model = model.double().eval()
        if fx.get("tied") and model.lm_head.weight is not model.model.embeddings.weight:
            raise RuntimeError("the tied head came apart in .double()")
        gen = torch.Generator().manual_seed(seed)
        randomize(model, gen)
        ids = torch.randint(0, fx["vocab"], (fx["batch"], fx["seq"]), generator=gen)
        probes = Probes(model, cfg)
        model.zero_grad()
        logits = reference_logits(model, ids)
        V = fx["vocab"]
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))
        loss.backward()
        probes.remove()
        if probes.errors:  # recorded; the parity tests still compare everything
            log(f"  probes failed: {probes.errors[:2]}")
        ok_dt = probes.min_dt == math.inf or probes.min_dt > MIN_DT_FACTOR * cfg.time_step_min
        ok_route = probes.margin > MIN_ROUTING_MARGIN
        log(f"  seed {seed}: loss {loss.item():.6f}, dt in [{probes.min_dt:.4g}, {probes.max_dt:.4g}], "
            f"routing margin {probes.margin:.3g}")
        if ok_dt and ok_route:
            break
        log("  rejected (dt near the clamp or a routing near-tie); next seed")
    else:
        raise RuntimeError(f"{name}: no seed gave well-separated dt and routing")

    ref = {"input_ids": ids.to(torch.int64).contiguous(), "logits": logits.detach().contiguous(),
           "loss": loss.detach().reshape(()).clone()}
    e_logits = None
    try:
        with torch.no_grad():
            o = model(input_ids=ids, labels=ids, use_cache=False)
        e_logits = rel_err(o.logits, logits)
        e_loss = abs(o.loss.item() - loss.item()) / abs(loss.item())
        ref["loss_transformers"] = o.loss.detach().double().reshape(()).clone()
        log(f"  transformers' own forward (float32 logits): logits rel err {e_logits:.2e}, "
            f"loss rel err {e_loss:.2e}{'  !! DISAGREES' if e_logits > 1e-5 or e_loss > 1e-5 else ''}")
    except Exception as e:  # noqa: BLE001
        log(f"  model(input_ids, labels=input_ids) failed: {type(e).__name__}: {e}")

    # Reference file: inputs, float64 outputs, gradients by Hub name.
    n_grads = 0
    for fused, p in model.named_parameters():
        if p.grad is None:
            raise RuntimeError(f"{name}: no gradient for {fused}")
        for hub, g in hub_items(fused, p.grad):
            ref["grad." + hub] = g.detach().clone().contiguous()
            n_grads += 1
    ref_path = os.path.join(out_dir, f"{name}.reference.safetensors")
    info = {"seed": seed, "min_dt": probes.min_dt, "routing_margin": probes.margin,
            "transformers_logits_rel_err": e_logits}
    save_file(ref, ref_path, metadata={"format": "pt", "info": json.dumps(info)})
    log(f"  wrote {ref_path} ({n_grads} gradients)")

    # The checkpoint in float32 (the weights are float32-exact), as save_pretrained writes it.
    m32 = copy.deepcopy(model).float()
    first = os.path.join(out_dir, f"{name}.saved")
    saved_ok = True
    try:
        m32.save_pretrained(first)
    except Exception as e:  # noqa: BLE001
        saved_ok = False
        log(f"  save_pretrained failed: {type(e).__name__}: {e}; writing both layouts by hand")
        os.makedirs(first, exist_ok=True)
        m32.config.save_pretrained(first)
    keys = safetensors_keys(first) if saved_ok else {}
    log(f"  save_pretrained wrote {sorted(os.listdir(first))}; {len(keys)} tensors, e.g. {sorted(keys)[:3]}")
    if saved_ok and name == FIXTURES[0]["name"]:
        log("  config.json as save_pretrained wrote it:\n" + open(os.path.join(first, "config.json")).read())
    saved_layout = "fused" if any(k.startswith("model.") for k in keys) else "hub" if keys else None
    hub = {}
    fused = {}
    for k, t in state_tensors(m32).items():
        fused[k] = t
        for h, v in hub_items(k, t):
            hub[h] = v
    if fx.get("tied") and saved_layout is not None:
        # A tied checkpoint holds the embedding only; both layouts are written from the state dict
        # (which holds the shared tensor once), whatever save_pretrained did with the shared head.
        log(f"  tied: save_pretrained wrote lm_head.weight: {'lm_head.weight' in keys}; "
            "writing both layouts from the state dict")
        saved_layout = None
    dirs = {}
    layouts = {"hub": hub, "fused": fused}
    for layout in sorted(layouts, key=lambda x: x == saved_layout):  # the hand-written one first
        d = os.path.join(out_dir, name if layout == "hub" else f"{name}-fused")
        if layout == saved_layout:
            os.rename(first, d)
            log(f"  {layout} layout: save_pretrained's output -> {d}")
        else:
            write_layout(d, first, layouts[layout])
            log(f"  {layout} layout: written from the state dict -> {d}")
        dirs[layout] = os.path.basename(d)
    if os.path.isdir(first):
        shutil.rmtree(first)
    for f in glob.glob(os.path.join(out_dir, dirs["hub"], "generation_config.json")):
        os.remove(f)  # not needed by the tests; keeps both layouts the same files

    if fx.get("tokenizer"):
        try:
            write_tokenizer(os.path.join(out_dir, dirs["hub"]), fx["vocab"])
        except Exception as e:  # noqa: BLE001
            log(f"  tokenizer: failed: {type(e).__name__}: {e}")

    # Both layouts must load into transformers and reproduce the reference.
    reload = {}
    for layout, d in dirs.items():
        try:
            m = load_pretrained(os.path.join(out_dir, d), torch.float64)
            with torch.no_grad():
                reload[layout] = rel_err(reference_logits(m, ids), logits)
            tied = m.lm_head.weight is m.model.embeddings.weight
            log(f"  from_pretrained({d}): logits rel err {reload[layout]:.2e}; head tied: {tied}")
        except Exception as e:  # noqa: BLE001
            reload[layout] = f"{type(e).__name__}: {e}"
            log(f"  from_pretrained({d}) failed: {reload[layout]}")

    manifest["fixtures"].append({
        "name": name, "pattern": fx["pattern"], "batch": fx["batch"], "seq": fx["seq"], "chunk_size": fx["chunk"],
        "dirs": dirs, "reference": os.path.basename(ref_path), "saved_by_save_pretrained": saved_layout,
        "tied_by_transformers": tied_by_transformers, "seed": seed, "min_dt": probes.min_dt,
        "time_step_min": cfg.time_step_min, "routing_margin": None if probes.margin == math.inf else probes.margin,
        "loss": loss.item(), "transformers_logits_rel_err": e_logits, "reload_logits_rel_err": reload,
        "probe_errors": probes.errors[:2],
    })
    return os.path.join(out_dir, dirs["hub"])


def write_tokenizer(d, vocab):
    """A byte-level BPE with exactly `vocab` entries (3 specials + 256 bytes + merges)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<pad>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    text = ["The quick brown fox jumps over the lazy dog.", "Hello, who are you?",
            "Nemotron models mix Mamba and attention layers.", "the the the and and of of to to in in"] * 50
    tok.train_from_iterator(text, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.save_pretrained(d)
    log(f"  tokenizer: {tok.get_vocab_size()} entries -> {sorted(f for f in os.listdir(d) if 'token' in f)}; "
        f"'Hello, who are' -> {tok.encode('Hello, who are').ids}")
    if tok.get_vocab_size() != vocab:
        raise RuntimeError(f"tokenizer has {tok.get_vocab_size()} entries, the model {vocab}")


def write_bf16(src, out_dir, manifest):
    """A bfloat16 copy, sharded small, as from_pretrained(dtype=bfloat16) + save_pretrained make it."""
    m = load_pretrained(src, torch.bfloat16)
    d = os.path.join(out_dir, os.path.basename(src) + "-bf16")
    m.save_pretrained(d, max_shard_size="20KB")
    for f in glob.glob(os.path.join(d, "generation_config.json")):
        os.remove(f)
    keys = safetensors_keys(d)
    dtypes = sorted({v[0] for v in keys.values()})
    bias = {k: v[0] for k, v in keys.items() if "e_score_correction_bias" in k}
    log(f"== bf16: {d}: files {sorted(os.listdir(d))}; dtypes {dtypes}; correction biases {bias}")
    manifest["bf16"] = {"dir": os.path.basename(d), "from": os.path.basename(src), "dtypes": dtypes,
                        "files": sorted(os.listdir(d))}


def describe_environment(manifest, sources_dir):
    """Versions and the facts the fixtures depend on; nothing here may stop the fixtures."""
    import transformers

    manifest["torch"] = torch.__version__
    manifest["transformers"] = transformers.__version__
    log(f"torch {torch.__version__}, transformers {transformers.__version__}")
    try:
        from transformers import NemotronHForCausalLM
        from transformers.models.nemotron_h import modeling_nemotron_h as mod

        manifest["tied_weights_keys"] = repr(getattr(NemotronHForCausalLM, "_tied_weights_keys", None))
        log(f"NemotronHForCausalLM._tied_weights_keys = {manifest['tied_weights_keys']}")
        text = inspect.getsource(mod)
        clamps = [line.strip() for line in text.splitlines() if "clamp" in line or "time_step_min" in line]
        manifest["modeling_clamp_lines"] = clamps
        log(f"modeling_nemotron_h.py lines with clamp/time_step_min: {clamps}")
        mixer = getattr(mod, "NemotronHMamba2Mixer", None)
        if mixer is not None:
            log(f"NemotronHMamba2Mixer methods: {[m for m in vars(mixer) if not m.startswith('__')]}")
        if sources_dir:
            os.makedirs(sources_dir, exist_ok=True)
            shutil.copy(inspect.getsourcefile(mod), os.path.join(sources_dir, "modeling_nemotron_h.py"))
            base = os.path.dirname(transformers.__file__)
            for rel in ("conversion_mapping.py", "integrations/moe.py"):
                if os.path.exists(os.path.join(base, rel)):
                    shutil.copy(os.path.join(base, rel), os.path.join(sources_dir, os.path.basename(rel)))
    except Exception as e:  # noqa: BLE001
        log(f"describe_environment: {type(e).__name__}: {e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=20240607)
    ap.add_argument("--only", nargs="*", help="fixture names to build (default: all)")
    ap.add_argument("--sources", help="copy transformers' nemotron_h sources here (for reading)")
    a = ap.parse_args()
    torch.set_num_threads(4)
    os.makedirs(a.out, exist_ok=True)
    manifest = {"fixtures": [], "tolerances": {"logits_rel": 1e-4, "grad_rel": 1e-3}}
    describe_environment(manifest, a.sources)
    failures = 0
    hub_dirs = {}
    for i, fx in enumerate(FIXTURES):
        if a.only and fx["name"] not in a.only:
            continue
        try:
            hub_dirs[fx["name"]] = build(fx, a.out, manifest, a.seed + i)
        except Exception:  # noqa: BLE001
            failures += 1
            log(f"!! {fx['name']} failed:\n{traceback.format_exc()}")
    if "moe" in hub_dirs:
        try:
            write_bf16(hub_dirs["moe"], a.out, manifest)
        except Exception:  # noqa: BLE001
            failures += 1
            log(f"!! bf16 failed:\n{traceback.format_exc()}")
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(r, x)) for r, _, fs in os.walk(a.out) for x in fs)
    log(f"wrote {a.out}: {total / 1e6:.2f} MB, {failures} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
