// The official `openai` npm package (v4), which no one here wrote, against `nemotron serve`:
// completions with logprobs and echo, chat completions, streaming chat, models.list, tool calls
// (plain and streamed, and sent back as the client got them), and errors surfacing as the
// client's APIError with status 400 and 404. Usage: node client_test.mjs BASE_URL
// (with NODE_PATH or a node_modules holding openai). Prints "ok: ..." per check; exits 1 on a failure.
import assert from "node:assert/strict";
import OpenAI from "openai";

const client = new OpenAI({ baseURL: process.argv[2], apiKey: "unused", maxRetries: 0, timeout: 60000 });
let failures = 0;
async function check(name, fn) {
  try {
    await fn();
    console.log(`ok: ${name}`);
  } catch (e) {
    failures++;
    console.log(`FAIL: ${name}: ${e.stack || e}`);
  }
}

await check("models.list", async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids, ["tiny"]);
});

await check("completions with logprobs", async () => {
  const r = await client.completions.create({ model: "tiny", prompt: "The answer is", max_tokens: 5, logprobs: 2, temperature: 0 });
  assert.equal(r.object, "text_completion");
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, r.usage.completion_tokens);
  assert.ok(lp.token_logprobs.every((x) => x <= 0));
  assert.ok(lp.top_logprobs.every((t) => Object.keys(t).length >= 1 && Object.keys(t).length <= 2));
});

await check("completions echo + max_tokens 0 (log-likelihood)", async () => {
  const r = await client.completions.create({ model: "tiny", prompt: "2+2=4", max_tokens: 0, echo: true, logprobs: 1 });
  const c = r.choices[0];
  assert.equal(c.text, "2+2=4");
  assert.equal(c.logprobs.token_logprobs[0], null);
  assert.ok(c.logprobs.token_logprobs.slice(1).every((x) => x < 0));
  assert.equal(r.usage.completion_tokens, 0);
});

await check("chat completions", async () => {
  const r = await client.chat.completions.create({
    model: "tiny",
    messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "What is 2+2?" }],
    max_tokens: 6,
    chat_template_kwargs: { enable_thinking: false },
  });
  assert.equal(r.object, "chat.completion");
  assert.equal(r.choices[0].message.role, "assistant");
  assert.equal(typeof r.choices[0].message.content, "string");
  assert.ok(r.usage.prompt_tokens > 0 && r.usage.completion_tokens >= 1);
});

await check("streaming chat", async () => {
  const stream = await client.chat.completions.create({
    model: "tiny",
    messages: [{ role: "user", content: "Count to five." }],
    max_tokens: 8,
    stream: true,
    stream_options: { include_usage: true },
    ignore_eos: true,
  });
  let text = "", chunks = 0, finish = null, usage = null;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta.content ?? "";
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(chunks >= 3, `${chunks} chunks`);
  assert.equal(finish, "length");
  assert.equal(usage.completion_tokens, 8);
  assert.equal(typeof text, "string");
});

// Tool calls. The tiny random model would never write a call by itself: tool_choice naming a
// function (or "required" with one tool) makes the server open the call in the prompt, so the
// reply is a call whatever the weights; its arguments are what the model wrote inside it.
const tools = [{
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
}];
const question = { role: "user", content: "What is the weather in Paris?" };
function checkCall(call) {
  assert.equal(call.type, "function");
  assert.match(call.id, /^call_/);
  assert.equal(call.function.name, "get_weather");
  const args = JSON.parse(call.function.arguments);
  assert.equal(typeof args, "object");
  assert.ok(!Array.isArray(args) && args !== null);
}

await check("tool call (named tool_choice) and its round trip", async () => {
  const r = await client.chat.completions.create({
    model: "tiny",
    messages: [question],
    tools,
    tool_choice: { type: "function", function: { name: "get_weather" } },
    max_tokens: 12,
  });
  const m = r.choices[0].message;
  assert.equal(m.content, null);
  assert.equal(m.tool_calls.length, 1);
  checkCall(m.tool_calls[0]);
  assert.ok(["stop", "length"].includes(r.choices[0].finish_reason), r.choices[0].finish_reason);  // named: as OpenAI
  // The assistant message as the client got it (arguments a JSON string), then the tool's answer.
  const next = await client.chat.completions.create({
    model: "tiny",
    messages: [question, m, { role: "tool", tool_call_id: m.tool_calls[0].id, content: "sunny, 21 C" }],
    tools,
    max_tokens: 6,
    chat_template_kwargs: { enable_thinking: false },
  });
  assert.equal(next.choices[0].message.role, "assistant");
  assert.ok(["stop", "length", "tool_calls"].includes(next.choices[0].finish_reason));
});

await check("tool call streamed as deltas (the client's own accumulator)", async () => {
  const runner = client.beta.chat.completions.stream({
    model: "tiny",
    messages: [question],
    tools,
    tool_choice: "required",  // one tool: that one
    max_tokens: 12,
  });
  let toolDeltas = 0;
  runner.on("chunk", (chunk) => {
    for (const c of chunk.choices) toolDeltas += (c.delta.tool_calls ?? []).length;
  });
  const done = await runner.finalChatCompletion();
  const m = done.choices[0].message;
  assert.equal(m.tool_calls.length, 1);
  assert.equal(toolDeltas, 1);
  checkCall(m.tool_calls[0]);
  assert.ok(["tool_calls", "length"].includes(done.choices[0].finish_reason), done.choices[0].finish_reason);
});

await check("tool_choice required with two tools calls one of them, the same one streamed", async () => {
  const two = [...tools, { type: "function", function: { name: "get_time", parameters: { type: "object", properties: {} } } }];
  const body = { model: "tiny", messages: [question], tools: two, tool_choice: "required", max_tokens: 6, temperature: 0 };
  const r = await client.chat.completions.create(body);
  const name = r.choices[0].message.tool_calls[0].function.name;
  assert.ok(["get_weather", "get_time"].includes(name), name);
  const streamed = await client.beta.chat.completions.stream(body).finalChatCompletion();
  assert.equal(streamed.choices[0].message.tool_calls[0].function.name, name);
});

await check("an assistant message with arguments that are not JSON is a 400 naming messages", async () => {
  const bad = { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: "{city" } }] };
  await assert.rejects(client.chat.completions.create({ model: "tiny", messages: [question, bad], tools }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.error.param, "messages");
    return true;
  });
});

await check("a bad request is an APIError with status 400", async () => {
  await assert.rejects(client.completions.create({ model: "tiny", prompt: "x", temperature: 7 }), (e) => {
    assert.ok(e instanceof OpenAI.APIError, `${e}`);
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.status, 400);
    assert.equal(e.error.param, "temperature");
    assert.match(e.message, /temperature/);
    return true;
  });
});

await check("an unknown model is an APIError with status 404", async () => {
  await assert.rejects(client.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "hi" }] }), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError, `${e}`);
    assert.equal(e.status, 404);
    assert.equal(e.code, "model_not_found");
    return true;
  });
});

if (failures) {
  console.log(`${failures} failure(s)`);
  process.exit(1);
}
console.log("all openai client checks passed");
