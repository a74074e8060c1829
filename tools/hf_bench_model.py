"""What the transformers reference benchmarks share (bench_transformers.py, bench_hf_generate.py,
bench_transformers_loglik.py): our benchmark config written as a Hugging Face config.json, built
as NemotronHForCausalLM in bf16 on the GPU with SDPA attention and random weights (seed 0), and
which Mamba path transformers will take (its torch fallback without mamba_ssm is much slower, so
every figure names it)."""
import json

import torch
from transformers import NemotronHConfig, NemotronHForCausalLM


def load_bench_model(config_path, train=False):
    """Returns (model, path): the model in train() or eval() mode, and the kernel path in words."""
    with open(config_path) as f:
        cfg = NemotronHConfig(**json.load(f))
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = NemotronHForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16)
    model.train(train)
    try:
        import mamba_ssm  # noqa: F401
        path = "sdpa + mamba_ssm kernels"
    except ImportError:
        path = "sdpa + torch Mamba path (no mamba_ssm)"
    return model, path
