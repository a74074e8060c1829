#!/usr/bin/env python3
"""The Python reference for bench/cuda_rollout: transformers' `generate` with
NemotronHForCausalLM (random weights, bf16, SDPA attention; its hybrid cache of KV and Mamba
conv/SSM states), or for a uniform DeciLM config (bench/configs/llama31_8b.yaml) the equivalent
LlamaForCausalLM (tools/hf_bench_model.py), on the same GPU, for the same config.json (cuda_rollout --hf-config-out), the
same batch of random prompts and new tokens per prompt, EOS ignored (min_new_tokens =
max_new_tokens), sampling at --temperature with top-k and top-p off (greedy at 0). When the batch
does not fit the GPU it is halved until it does (reported as "batch", with "batch_asked").
Prints one JSON line {"transformers_generate": version, ...} last.

The Mamba-2 mixer uses mamba_ssm/causal_conv1d kernels when they are installed, else
transformers' own torch implementation (reported as "path").
"""
import argparse
import json
import time

import torch
import transformers
from hf_bench_model import load_bench_model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True, help="config.json (cuda_rollout --hf-config-out)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=512)
    ap.add_argument("--temperature", type=float, default=1.0)
    a = ap.parse_args()

    model, path = load_bench_model(a.config, train=False)

    sample = a.temperature > 0
    kwargs = dict(do_sample=sample, top_k=0, top_p=1.0, num_beams=1, use_cache=True, pad_token_id=0)
    if sample:
        kwargs["temperature"] = a.temperature

    def run(batch, new_tokens):
        gen = torch.Generator(device="cuda").manual_seed(0)
        ids = torch.randint(0, model.config.vocab_size, (batch, a.prompt_len), device="cuda", generator=gen)
        mask = torch.ones_like(ids)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens,
                                 min_new_tokens=new_tokens, **kwargs)
        torch.cuda.synchronize()
        return time.perf_counter() - t0, (out.shape[1] - a.prompt_len) * batch

    batch = a.batch
    while True:
        try:
            run(batch, 4)  # warm-up (and the memory check of the prefill)
            seconds, generated = run(batch, a.new_tokens)
            break
        except torch.OutOfMemoryError:
            if batch == 1:
                raise
        torch.cuda.empty_cache()
        batch //= 2
    print(json.dumps({
        "transformers_generate": transformers.__version__,
        "torch": torch.__version__,
        "path": path,
        "batch_asked": a.batch,
        "batch": batch,
        "prompt_len": a.prompt_len,
        "new_tokens": a.new_tokens,
        "temperature": a.temperature,
        "seconds": seconds,
        "generated_tokens": generated,
        "generated_tokens_per_s": generated / seconds,
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
    }))


if __name__ == "__main__":
    main()
