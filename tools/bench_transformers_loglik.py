#!/usr/bin/env python3
"""The Python reference for bench/cuda_eval_loglik: the same multiple-choice items (its
--items-out, token ids) scored the way lm-evaluation-harness's HFLM scores loglikelihood requests,
with transformers' NemotronHForCausalLM (random weights, bf16, SDPA attention) on the same GPU for
the same config.json (--hf-config-out): one request (context + choice) per row, requests sorted
longest first, --batch of them right-padded into one forward (right padding leaves a causal
model's real positions unchanged, so no mask is needed; lm-eval passes none either), log_softmax
over the logits, the continuation's log-probs gathered and summed. For each batch size of --batch
(halved when it does not fit) prints items/s and tokens/s; one JSON line
{"transformers_loglik": version, ...} last.

The Mamba-2 mixer uses mamba_ssm/causal_conv1d kernels when they are installed, else
transformers' own torch implementation (reported as "path").
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F
import transformers
from hf_bench_model import load_bench_model


def score(model, reqs, batch):
    """reqs: (tokens, prompt_len) -> the summed continuation log-probs, in the order given."""
    order = sorted(range(len(reqs)), key=lambda i: -len(reqs[i][0]))
    out = [0.0] * len(reqs)
    fed = 0
    for b0 in range(0, len(order), batch):
        idx = order[b0:b0 + batch]
        T = max(len(reqs[i][0]) - 1 for i in idx)
        ids = torch.zeros((len(idx), T), dtype=torch.long)
        for r, i in enumerate(idx):
            toks = reqs[i][0][:-1]
            ids[r, :len(toks)] = torch.tensor(toks)
            fed += len(toks)
        with torch.inference_mode():
            logp = F.log_softmax(model(input_ids=ids.cuda(non_blocking=True), use_cache=False).logits.float(), dim=-1)
            sums = []
            for r, i in enumerate(idx):
                toks, p = reqs[i]
                tgt = torch.tensor(toks[p:], device="cuda")
                sums.append(logp[r, p - 1:len(toks) - 1].gather(-1, tgt[:, None]).sum())
            vals = torch.stack(sums).tolist()  # one copy (and sync) per forward
        for i, v in zip(idx, vals):
            out[i] = v
    return out, fed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True, help="config.json (cuda_eval_loglik --hf-config-out)")
    ap.add_argument("--items", required=True, help="items JSONL (cuda_eval_loglik --items-out)")
    ap.add_argument("--batch", default="16,64", help="requests per forward to measure, comma-separated")
    ap.add_argument("--reps", type=int, default=2, help="timed passes per batch size (the best is reported)")
    a = ap.parse_args()

    model, path = load_bench_model(a.config, train=False)
    items = [json.loads(line) for line in open(a.items)]
    reqs, first = [], []
    for it in items:
        first.append(len(reqs))
        for c in it["choices"]:
            reqs.append((it["context"] + c, len(it["context"])))
    points = []
    for asked in [int(b) for b in a.batch.split(",") if b]:
        batch = asked
        while True:
            try:
                score(model, reqs[:4 * batch], batch)  # warm-up at this shape
                break
            except torch.OutOfMemoryError:
                if batch == 1:
                    raise
            torch.cuda.empty_cache()
            batch //= 2
        best = float("inf")
        for _ in range(a.reps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            lls, fed = score(model, reqs, batch)
            best = min(best, time.perf_counter() - t0)
        acc = sum(max(range(len(it["choices"])), key=lambda c: lls[first[i] + c]) == it["gold"]
                  for i, it in enumerate(items)) / len(items)
        p = {"batch": batch, "batch_asked": asked, "seconds": best, "items_per_s": len(items) / best,
             "tokens_per_s": fed / best, "acc": acc}
        print(f"transformers batch {batch:4d}: {p['items_per_s']:9.1f} items/s {p['tokens_per_s']:12.0f} tokens/s",
              flush=True)
        points.append(p)
    print(json.dumps({
        "transformers_loglik": transformers.__version__,
        "torch": torch.__version__,
        "path": path,
        "items": len(items),
        "requests": len(reqs),
        "points": points,
        "best_items_per_s": max(p["items_per_s"] for p in points),
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
    }))


if __name__ == "__main__":
    main()
