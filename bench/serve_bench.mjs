// Load on `nemotron serve`: C concurrent clients (default 32), each sending R requests one after
// another (default 4) to /v1/completions (or /v1/chat/completions with --chat), each asking for
// T tokens with ignore_eos so every request must return exactly T. Reports requests/s, generated
// tokens/s, latency percentiles, and how many requests were lost (an error, a wrong token count,
// or no answer): a healthy server loses none. Node 18+ (its fetch), no packages.
//   node bench/serve_bench.mjs http://127.0.0.1:8000 [--clients 32] [--requests 4] [--tokens 32]
//        [--model NAME] [--chat] [--stream]
// Exit 1 when a request was lost.
const args = process.argv.slice(2);
const base = args[0];
if (!base || base.startsWith("--")) {
  console.error("usage: node bench/serve_bench.mjs URL [--clients N] [--requests N] [--tokens N] [--model NAME] [--chat] [--stream]");
  process.exit(2);
}
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i < 0 ? dflt : args[i + 1];
};
const clients = Number(opt("--clients", 32)), perClient = Number(opt("--requests", 4)), tokens = Number(opt("--tokens", 32));
const chat = args.includes("--chat"), stream = args.includes("--stream");
const model = opt("--model", (await (await fetch(`${base}/v1/models`)).json()).data[0].id);

async function one(client, i) {
  const prompt = `Client ${client} request ${i}: the quick brown fox`;
  const body = chat
    ? { model, messages: [{ role: "user", content: prompt }], max_tokens: tokens, ignore_eos: true, stream }
    : { model, prompt, max_tokens: tokens, ignore_eos: true, stream };
  if (stream) body.stream_options = { include_usage: true };
  const t0 = performance.now();
  const res = await fetch(`${base}/v1/${chat ? "chat/completions" : "completions"}`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  let generated = -1;
  if (res.status === 200 && stream) {
    const text = await res.text();
    const events = text.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6));
    if (events.at(-1) === "[DONE]") generated = JSON.parse(events.at(-2)).usage?.completion_tokens ?? -1;
  } else if (res.status === 200) {
    generated = (await res.json()).usage.completion_tokens;
  } else {
    await res.text();
  }
  return { ok: res.status === 200 && generated === tokens, generated: Math.max(generated, 0), seconds: (performance.now() - t0) / 1000 };
}

const t0 = performance.now();
const results = (
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      const out = [];
      for (let i = 0; i < perClient; ++i) out.push(await one(c, i).catch((e) => ({ ok: false, generated: 0, seconds: 0, error: String(e) })));
      return out;
    })
  )
).flat();
const wall = (performance.now() - t0) / 1000;
const ok = results.filter((r) => r.ok);
const lat = ok.map((r) => r.seconds).sort((a, b) => a - b);
const pct = (p) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor((p / 100) * lat.length))] : NaN);
const generated = results.reduce((s, r) => s + r.generated, 0);
const lost = results.length - ok.length;
console.log(
  `serve_bench: ${clients} clients x ${perClient} requests x ${tokens} tokens (${chat ? "chat" : "completions"}${stream ? ", streamed" : ""}) on ${model}`
);
console.log(
  `  ${results.length} requests in ${wall.toFixed(2)} s: ${(ok.length / wall).toFixed(2)} requests/s, ` +
    `${(generated / wall).toFixed(1)} generated tokens/s; latency p50 ${pct(50).toFixed(2)} s, p90 ${pct(90).toFixed(2)} s, ` +
    `max ${lat.length ? lat.at(-1).toFixed(2) : "nan"} s; lost ${lost}`
);
for (const r of results.filter((r) => !r.ok).slice(0, 3)) console.log(`  lost: ${JSON.stringify(r)}`);
process.exit(lost ? 1 : 0);
