#!/usr/bin/env python3
"""The Python reference for bench/cuda_train_step: one train step (forward + backward of each of
--grad-accum micro-batches, then grad-norm clip + fused AdamW) of transformers'
NemotronHForCausalLM in bf16 on the GPU, with the same config.json, micro-batch, sequence length
and accumulation (when the micro-batch does not fit the GPU, it is halved and the accumulation
doubled: the same tokens per step). Prints one JSON line {"transformers": version, ...}.

Its fastest path here: bf16 weights, SDPA attention; the Mamba-2 mixer uses mamba_ssm/causal_conv1d
kernels when they are installed, else transformers' own torch implementation (reported as "path").
"""
import argparse
import json


import torch
import transformers
from hf_bench_model import load_bench_model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--grad-accum", type=int, default=1, help="micro-batches per optimizer step")
    a = ap.parse_args()

    model, path = load_bench_model(a.config, train=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    batch, accum = a.batch, a.grad_accum

    def step():
        ids = torch.randint(0, model.config.vocab_size, (batch, a.seq_len), device="cuda", generator=gen)
        for _ in range(accum):
            out = model(input_ids=ids, labels=ids)
            (out.loss / accum).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return out.loss

    # Out of memory (the torch Mamba path materialises [B, chunks, Q, Q, heads] tensors): halve the
    # micro-batch and double the accumulation, so a step still covers the same tokens.
    gen = torch.Generator(device="cuda").manual_seed(0)
    while True:
        try:
            step()
            break
        except torch.OutOfMemoryError:
            if batch == 1:
                raise
        # Outside the handler: the failed step's tensors are released with its traceback.
        opt.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
        batch, accum = batch // 2, accum * 2
    torch.cuda.synchronize()
    times = []
    for _ in range(a.steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        loss = step()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    ms = times[len(times) // 2]
    print(json.dumps({
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "path": path,
        "step_ms": ms,
        "batch": batch,
        "grad_accum": accum,
        "tokens_per_s": accum * batch * a.seq_len / (ms * 1e-3),
        "loss": float(loss),
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
    }))


if __name__ == "__main__":
    main()
