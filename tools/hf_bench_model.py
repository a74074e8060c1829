"""What the transformers reference benchmarks share (bench_transformers.py, bench_hf_generate.py,
bench_transformers_loglik.py): our benchmark config written as a Hugging Face config.json, built
in bf16 on the GPU with SDPA attention and random weights (seed 0), and the kernel path in words
(every figure names it).

  * Nemotron-H (model_type nemotron_h): NemotronHForCausalLM; its Mamba-2 mixer takes the
    mamba_ssm kernels when installed, else transformers' much slower torch path.
  * DeciLM (model_type nemotron-nas) with uniform blocks: LlamaForCausalLM with the equivalent
    LlamaConfig. transformers has no DeciLM class (the Hub's carries remote code, never run here);
    a DeciLM whose blocks are all GQA with one n_heads_in_group and SwiGLU with one ffn_mult IS a
    Llama (reference/architectures.md B.1; tools/make_decilm_fixtures.py builds the heterogeneous
    case from the same Llama modules): KV heads = heads / n_heads_in_group, intermediate_size =
    the B.2 width, RoPE llama3 from rope_theta + rope_scaling. Heterogeneous DeciLM configs are
    refused with one line (no transformers model to compare with)."""
import json
import math


def decilm_ffn_width(ffn_mult, hidden):
    """B.2: round_up_256(int(2 * ffn_mult * H / 3))."""
    f = int(2 * ffn_mult * hidden / 3)
    return (f + 255) // 256 * 256


def uniform_decilm_block(cfg, path):
    """(n_heads_in_group, ffn_mult) shared by every block, or ValueError naming the first odd one."""
    blocks = cfg["block_configs"]
    first = None
    for i, b in enumerate(blocks):
        a, f = b.get("attention", {}), b.get("ffn", {})
        if a.get("no_op") or a.get("replace_with_linear") or f.get("no_op") or f.get("replace_with_linear"):
            raise ValueError(f"{path}: block_configs[{i}]: no-op or linear sub-block; only a DeciLM with uniform "
                             "GQA + SwiGLU blocks is a Llama (no transformers reference for this config)")
        key = (a.get("n_heads_in_group"), f.get("ffn_mult"))
        if first is None:
            first = key
        elif key != first:
            raise ValueError(f"{path}: block_configs[{i}]: {key} differs from block 0's {first}; only a DeciLM with "
                             "uniform blocks is a Llama (no transformers reference for this config)")
    return first


def llama3_check(cfg, head_dim, theta, scaling):
    """True when LlamaRotaryEmbedding for `cfg` divided the lowest frequency by the llama3 factor
    (an unknown RoPE keyword is silently kept as an attribute, so the spelling must be checked)."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    inv = LlamaRotaryEmbedding(config=cfg).inv_freq.double()
    lowest = theta ** (-(head_dim - 2) / head_dim)
    want = lowest / scaling["factor"] if 2 * math.pi / lowest > scaling["original_max_position_embeddings"] / scaling[
        "low_freq_factor"] else lowest
    return abs(inv[-1].item() - want) <= 1e-6 * want


def llama_config_from_decilm(cfg, path):
    """The LlamaConfig equal to a uniform DeciLM config.json (dict)."""
    from transformers import LlamaConfig

    group, ffn_mult = uniform_decilm_block(cfg, path)
    H, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    kw = dict(vocab_size=cfg["vocab_size"], hidden_size=H, num_hidden_layers=cfg["num_hidden_layers"],
              num_attention_heads=heads, num_key_value_heads=heads // group,
              intermediate_size=decilm_ffn_width(ffn_mult, H), hidden_act="silu",
              rms_norm_eps=cfg.get("rms_norm_eps", 1e-5), max_position_embeddings=cfg["max_position_embeddings"],
              attention_bias=False, mlp_bias=False, attention_dropout=0.0,
              tie_word_embeddings=cfg.get("tie_word_embeddings", False))
    theta, scaling = cfg["rope_theta"], cfg.get("rope_scaling")
    if not scaling:
        spellings = [dict(rope_parameters={"rope_type": "default", "rope_theta": theta}), dict(rope_theta=theta)]
    else:
        spellings = [dict(rope_parameters=dict(scaling, rope_theta=theta)),  # transformers 5.x
                     dict(rope_theta=theta, rope_scaling=dict(scaling))]     # 4.x
    tried = []
    for rope in spellings:
        try:
            lc = LlamaConfig(**kw, **rope)
            if not scaling or llama3_check(lc, H // heads, theta, scaling):
                return lc
            tried.append(f"{list(rope)}: llama3 scaling not applied")
        except Exception as e:  # noqa: BLE001
            tried.append(f"{list(rope)}: {type(e).__name__}: {e}")
    raise RuntimeError(f"{path}: no LlamaConfig spelling gives this RoPE: {tried}")


def load_bench_model(config_path, train=False):
    """Returns (model, path): the model in train() or eval() mode, and the kernel path in words."""
    import torch

    with open(config_path) as f:
        raw = json.load(f)
    torch.manual_seed(0)
    if raw.get("model_type") == "nemotron-nas":
        from transformers import LlamaForCausalLM

        cfg = llama_config_from_decilm(raw, config_path)
        cfg._attn_implementation = "sdpa"
        model = LlamaForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16)
        model.train(train)
        return model, "sdpa (LlamaForCausalLM, the uniform DeciLM's equivalent)"
    from transformers import NemotronHConfig, NemotronHForCausalLM

    cfg = NemotronHConfig(**raw)
    cfg._attn_implementation = "sdpa"
    model = NemotronHForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16)
    model.train(train)
    try:
        import mamba_ssm  # noqa: F401
        path = "sdpa + mamba_ssm kernels"
    except ImportError:
        path = "sdpa + torch Mamba path (no mamba_ssm)"
    return model, path
