"""A plain PyTorch chunked SSD scan (the reference point for bench/cuda_ssd_scan.cpp).

Same algorithm and shapes as our CUDA scan, written in torch ops (einsum + a Python loop over
chunks for the state pass), bf16 matmul operands, float32 decays; autograd for the backward.
usage: python3 bench/torch_ssd_scan.py [B T nH P G N Q]
"""
import sys

import torch


def ssd(x, dt, A, Bm, Cm, D, Q):
    B, T, H, P = x.shape
    G, N = Bm.shape[2:]
    c, rep, bf = T // Q, H // G, x.dtype
    lam = (dt * A).view(B, c, Q, H).permute(0, 3, 1, 2).cumsum(-1)  # B H c Q, float32
    xb = (x.float() * dt[..., None]).to(bf).view(B, c, Q, H, P)
    Bc, Cc = Bm.view(B, c, Q, G, N), Cm.view(B, c, Q, G, N)
    CB = torch.einsum("bclgn,bcsgn->bgcls", Cc, Bc).repeat_interleave(rep, dim=1)  # B H c Q Q
    seg = lam[..., :, None] - lam[..., None, :]
    mask = torch.ones(Q, Q, dtype=torch.bool, device=x.device).tril()
    decay = torch.exp(seg.masked_fill(~mask, float("-inf")))
    y_diag = torch.einsum("bhcls,bcshp->bclhp", (CB.float() * decay).to(bf), xb)
    w = torch.exp(lam[..., -1:] - lam)  # B H c Q
    Bh = Bc.repeat_interleave(rep, dim=3)
    states = torch.einsum("bclhn,bclhp->bchpn", (Bh.float() * w.permute(0, 2, 3, 1)[..., None]).to(bf), xb).float()
    chunk_decay = torch.exp(lam[..., -1])  # B H c
    S = torch.zeros_like(states[:, 0])
    s_in = []
    for ci in range(c):
        s_in.append(S)
        S = chunk_decay[:, :, ci, None, None] * S + states[:, ci]
    s_in = torch.stack(s_in, 1).to(bf)  # B c H P N
    Ch = (Cc.repeat_interleave(rep, dim=3).float() * torch.exp(lam).permute(0, 2, 3, 1)[..., None]).to(bf)
    y_off = torch.einsum("bclhn,bchpn->bclhp", Ch, s_in)
    return (y_diag + y_off).reshape(B, T, H, P) + D[:, None] * x


def bench(B, T, H, P, G, N, Q):
    dev, bf = "cuda", torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(0)
    r = lambda *s, lo=-1.0, hi=1.0, dt=bf: (lo + (hi - lo) * torch.rand(*s, device=dev, generator=g)).to(dt)
    x, Bm, Cm = r(B, T, H, P), r(B, T, G, N), r(B, T, G, N)
    dt, A, D = r(B, T, H, lo=0.001, hi=0.1, dt=torch.float32), r(H, lo=-8, hi=-1, dt=torch.float32), r(H, lo=0.5, hi=1.5)
    for t in (x, Bm, Cm, dt):
        t.requires_grad_(True)
    dy = r(B, T, H, P)

    def timed(f, reps=10):
        for _ in range(3):
            f()
        ts = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            f()
            b.record()
            torch.cuda.synchronize()
            ts.append(a.elapsed_time(b))
        return sorted(ts)[len(ts) // 2]

    with torch.no_grad():
        fwd = timed(lambda: ssd(x, dt, A, Bm, Cm, D, Q))
    fwdbwd = timed(lambda: torch.autograd.backward(ssd(x, dt, A, Bm, Cm, D, Q), dy))
    flops = B * (T // Q) * (G * 2 * Q * Q * N + H * (2 * Q * Q * P + 4 * Q * P * N))
    print(f"torch B={B} T={T} nH={H} P={P} G={G} N={N} Q={Q} bf16: forward {fwd:.3f} ms "
          f"({flops / fwd * 1e-9:.1f} TFLOP/s), backward (fwd+bwd - fwd) {fwdbwd - fwd:.3f} ms "
          f"({2 * flops / (fwdbwd - fwd) * 1e-9:.1f} TFLOP/s), peak mem {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")


if __name__ == "__main__":
    if len(sys.argv) == 8:
        bench(*map(int, sys.argv[1:]))
    else:
        bench(2, 4096, 64, 64, 8, 128, 128)
        bench(2, 4096, 128, 64, 8, 128, 128)
