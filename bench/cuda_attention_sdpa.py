# torch SDPA (causal, GQA) on the shapes of bench/cuda_attention.cpp: bf16, CUDA events, median
# of 20 after warm-up. Same FLOP formula as the C++ bench.
import torch
import torch.nn.functional as F


def median_ms(fn, reps=20):
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


def bench(B, T, nq, nkv, hd):
    dev = torch.device("cuda")
    q = torch.empty(B, nq, T, hd, device=dev, dtype=torch.bfloat16).uniform_(-1, 1).requires_grad_()
    k = torch.empty(B, nkv, T, hd, device=dev, dtype=torch.bfloat16).uniform_(-1, 1).requires_grad_()
    v = torch.empty(B, nkv, T, hd, device=dev, dtype=torch.bfloat16).uniform_(-1, 1).requires_grad_()
    dout = torch.empty(B, nq, T, hd, device=dev, dtype=torch.bfloat16).uniform_(-1, 1)
    fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    with torch.no_grad():
        f_ms = median_ms(fwd)
    out = fwd()
    b_ms = median_ms(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))
    flops = 2.0 * B * nq * T * T * hd
    print(f"torch B={B} T={T} nq={nq} nkv={nkv} hd={hd} bf16: forward {f_ms:.3f} ms {flops / f_ms / 1e9:.1f} TFLOP/s, "
          f"backward {b_ms:.3f} ms {2.5 * flops / b_ms / 1e9:.1f} TFLOP/s (torch {torch.__version__})")


for shape in [(1, 4096, 32, 8, 128), (1, 4096, 32, 2, 128), (1, 4096, 32, 8, 64)]:
    bench(*shape)
