#!/usr/bin/env python3
"""Load on `nemotron serve` as vLLM's serving benchmark applies it: C concurrent clients, each sending
streaming /v1/completions requests one after another on its own kept-alive connection for
--duration seconds (a request started before the end runs to its end). Each request's prompt is
--prompt-len random token ids in [0, --vocab) (as bench/cuda_rollout's random prompts) and it asks
for --tokens tokens with ignore_eos, so every request must return exactly that many (else it
counts as lost). Prints one JSON line: requests/s, output tokens/s, time to first token p50/p99,
inter-token latency p50/p99 (the gaps between streamed chunks that carry text; the server sends
one per token while the text grows) and time per output token p50/p99 ((latency - TTFT) / (tokens
- 1) per request), and the lost requests; and, from the server's /metrics before and after, what its
engine did meanwhile (steps, those that prefilled, model and host time per step). Exit 1 when a
request was lost.

Python 3 with the standard library only (asyncio, raw HTTP/1.1): it runs on the GPU machine, whose
image has python3 but no Node.js, and here alike.

  python3 bench/serve_bench.py http://127.0.0.1:8000 [--clients 32] [--duration 60] [--prompt-len 128]
          [--tokens 128] [--vocab 1000] [--model NAME] [--temperature 1] [--seed 0]
"""
import argparse
import asyncio
import json
import math
import multiprocessing
import random
import sys
import time
import urllib.parse
import urllib.request


def percentile(values, p):
    """The p-th percentile by nearest rank (NaN for none)."""
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, max(0, math.ceil(p / 100 * len(v)) - 1))]


class Connection:
    """One kept-alive HTTP/1.1 connection; post() streams a chunked text/event-stream response."""

    def __init__(self, host, port):
        self.host, self.port = host, port
        self.reader = self.writer = None

    async def open(self):
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    def close(self):
        if self.writer:
            self.writer.close()
        self.reader = self.writer = None

    async def post_stream(self, path, body, on_event):
        """Sends the request; calls on_event(data) for each SSE `data:` line as it arrives. Returns
        the HTTP status (a non-200 body is read whole and ignored)."""
        if self.writer is None:
            await self.open()
        payload = json.dumps(body).encode()
        head = (f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\nAccept: text/event-stream\r\n\r\n").encode()
        self.writer.write(head + payload)
        await self.writer.drain()
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("the server closed the connection")
        status = int(status_line.split()[1])
        headers = {}
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            k, _, v = line.decode().partition(":")
            headers[k.strip().lower()] = v.strip()
        pending = b""
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size = int((await self.reader.readline()).split(b";")[0], 16)
                if size == 0:
                    await self.reader.readline()  # the CRLF after the last chunk (no trailers)
                    break
                data = await self.reader.readexactly(size + 2)
                pending += data[:-2]
                while b"\n\n" in pending:
                    event, pending = pending.split(b"\n\n", 1)
                    for line in event.split(b"\n"):
                        if status == 200 and line.startswith(b"data: "):
                            on_event(line[6:].decode())
        else:
            await self.reader.readexactly(int(headers.get("content-length", "0")))
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status


async def client(i, args, url, model, deadline, out):
    conn = Connection(url.hostname, url.port or 80)
    rng = random.Random(args.seed * 1000003 + i)
    while time.monotonic() < deadline:
        prompt = [rng.randrange(args.vocab) for _ in range(args.prompt_len)]
        body = {"model": model, "prompt": prompt, "max_tokens": args.tokens, "ignore_eos": True,
                "temperature": args.temperature, "seed": rng.randrange(1 << 31), "stream": True,
                "stream_options": {"include_usage": True}}
        r = {"chunk_times": [], "tokens": -1, "error": None}

        def on_event(data):
            now = time.monotonic()
            if data == "[DONE]":
                return
            chunk = json.loads(data)
            if "error" in chunk:
                r["error"] = chunk["error"].get("message")
            elif chunk.get("usage"):
                r["tokens"] = chunk["usage"]["completion_tokens"]
            elif chunk.get("choices") and chunk["choices"][0].get("text"):
                r["chunk_times"].append(now)

        t0 = time.monotonic()
        try:
            status = await conn.post_stream(url.path.rstrip("/") + "/v1/completions", body, on_event)
        except Exception as e:  # noqa: BLE001 - a lost request, whatever the cause
            conn.close()
            status, r["error"] = 0, repr(e)
        r["start"], r["end"], r["status"] = t0, time.monotonic(), status
        out.append(r)
    conn.close()


def run_clients(job):
    """One process's share of the clients (a single Python process parsing every streamed chunk
    of 128 clients would itself be the bottleneck). Returns its requests."""
    first, count, args, model, deadline = job
    url = urllib.parse.urlparse(args.url)
    out = []

    async def all_clients():
        await asyncio.gather(*(client(first + i, args, url, model, deadline, out) for i in range(count)))

    asyncio.run(all_clients())
    return out


def summarize(results, args, model, wall):
    good = lambda r: r["status"] == 200 and not r["error"] and r["tokens"] == args.tokens and r["chunk_times"]  # noqa: E731
    ok = [r for r in results if good(r)]
    lost = [r for r in results if not good(r)]
    ttft = [r["chunk_times"][0] - r["start"] for r in ok]
    itl = [b - a for r in ok for a, b in zip(r["chunk_times"], r["chunk_times"][1:])]
    tpot = [(r["end"] - r["chunk_times"][0]) / (r["tokens"] - 1) for r in ok if r["tokens"] > 1]
    chunks = sum(len(r["chunk_times"]) for r in ok)
    tokens = sum(max(r["tokens"], 0) for r in results)
    ms = lambda v: round(1e3 * v, 3)  # noqa: E731
    return {
        "clients": args.clients, "duration_s": args.duration, "wall_s": round(wall, 3), "model": model,
        "prompt_len": args.prompt_len, "max_tokens": args.tokens, "temperature": args.temperature,
        "requests": len(ok), "lost": len(lost), "requests_per_s": round(len(ok) / wall, 3),
        "output_tokens_per_s": round(tokens / wall, 1),
        "ttft_ms_p50": ms(percentile(ttft, 50)), "ttft_ms_p99": ms(percentile(ttft, 99)),
        "itl_ms_p50": ms(percentile(itl, 50)), "itl_ms_p99": ms(percentile(itl, 99)),
        "tpot_ms_p50": ms(percentile(tpot, 50)), "tpot_ms_p99": ms(percentile(tpot, 99)),
        "chunks_per_token": round(chunks / max(1, sum(r["tokens"] for r in ok)), 4),
        "lost_examples": [{k: r[k] for k in ("status", "error", "tokens")} for r in lost[:3]],
    }


def engine_counters(url):
    """The server's nemotron_engine_* counters from GET /metrics ({} from a server without them)."""
    try:
        text = urllib.request.urlopen(f"{url.rstrip('/')}/metrics", timeout=10).read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        if line.startswith("nemotron_engine_"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def engine_summary(before, after):
    """What the engine did in the bench's window, from its counters: steps (those that prefilled a
    prompt are eager; the decode-only ones replay a CUDA graph), the model's time per step of each
    kind, and the host time per step spent in the server's per-token work (streaming, detokenizing,
    admission) and outside the model."""
    d = {k: after[k] - before.get(k, 0.0) for k in after}
    if not d:
        return None
    pre, dec = d['nemotron_engine_steps_total{kind="prefill"}'], d['nemotron_engine_steps_total{kind="decode"}']
    pre_s, dec_s = (d['nemotron_engine_model_seconds_total{kind="prefill"}'],
                    d['nemotron_engine_model_seconds_total{kind="decode"}'])
    steps = max(1.0, pre + dec)
    ms = lambda v: round(1e3 * v, 4)  # noqa: E731
    return {"steps": int(pre + dec), "prefill_steps": int(pre), "prefill_step_fraction": round(pre / steps, 4),
            "decode_step_model_ms": ms(dec_s / max(1.0, dec)), "prefill_step_model_ms": ms(pre_s / max(1.0, pre)),
            "prefill_share_of_busy": round(pre_s / max(1e-9, d["nemotron_engine_busy_seconds_total"]), 4),
            "hook_ms_per_step": ms(d["nemotron_engine_hook_seconds_total"] / steps),
            "busy_ms_per_step": ms(d["nemotron_engine_busy_seconds_total"] / steps),
            "busy_s": round(d["nemotron_engine_busy_seconds_total"], 3)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("url")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--duration", type=float, default=60)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=1000, help="prompt token ids are drawn from [0, VOCAB)")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--processes", type=int, default=0, help="client processes (default: one per 16 clients, at most 8)")
    ap.add_argument("--model")
    args = ap.parse_args()
    if min(args.clients, args.prompt_len, args.tokens, args.vocab) <= 0 or args.duration <= 0:
        ap.error("--clients, --duration, --prompt-len, --tokens and --vocab must be positive")
    model = args.model or json.load(urllib.request.urlopen(f"{args.url.rstrip('/')}/v1/models"))["data"][0]["id"]
    procs = max(1, min(args.clients, args.processes or min(8, (args.clients + 15) // 16)))
    counters = engine_counters(args.url)
    t0 = time.monotonic()
    deadline = t0 + args.duration
    jobs = [(k * args.clients // procs, (k + 1) * args.clients // procs - k * args.clients // procs, args, model, deadline)
            for k in range(procs)]
    with multiprocessing.get_context("fork").Pool(procs) as pool:
        results = [r for part in pool.map(run_clients, jobs) for r in part]
    s = summarize(results, args, model, time.monotonic() - t0)
    s["client_processes"] = procs
    engine = engine_summary(counters, engine_counters(args.url))
    if engine:
        s["engine"] = engine
    print(json.dumps({"serve_bench": s}), flush=True)
    return 1 if s["lost"] else 0


if __name__ == "__main__":
    sys.exit(main())
