"""The client side of tests/cli/serve_expert_parallel_test.sh: what it asks a server, printed so
that one server's answers can be compared with another's line for line.
  queries URL: a completion, a chat, an echo with log-probs, a seeded n = 2 with log-probs (its
    choices on one data rank) and a stream, one after the other, then a pair: a long stream and,
    once it has sent a token, a completion with log-probs beside it (so an idle expert-parallel
    server runs the second on data rank 1).
  burst URL: 7 requests at once (completions, a chat, log-probs, a seeded n = 2, streams), each
    answer printed under its name once all are in (text, finish reason, tokens' log-probs to 4
    places), in a fixed order.
  leave URL: two streams of 480 tokens, the second started once the first has sent a token (so an
    idle expert-parallel server hands them to data ranks 0 and 1); the first client leaves after
    3 chunks, the second 20 chunks later; prints each one's text so far.
  full URL: the same two streams to their end, their texts (what `leave`'s must be prefixes of).
Usage: serve_ep_client.py queries|burst|leave|full URL"""
import http.client
import json
import sys
import threading
import time
import urllib.parse

MODE, URL = sys.argv[1], urllib.parse.urlparse(sys.argv[2])


def connect():
    return http.client.HTTPConnection(URL.hostname, URL.port, timeout=120)


def post(route, body):
    c = connect()
    c.request("POST", "/v1/" + route, json.dumps(body), {"Content-Type": "application/json"})
    return c, c.getresponse()


def lines_of(r):
    """The `data: ` payloads of an SSE response, as they arrive."""
    for raw in r:
        line = raw.decode().strip()
        if line.startswith("data: {"):
            yield json.loads(line[6:])


def describe(answer):
    out = []
    for c in answer["choices"]:
        text = c.get("text", c.get("message", {}).get("content"))
        out.append(f"{c['index']} {text!r} {c['finish_reason']}")
        lp = c.get("logprobs") or {}
        for t, p in zip(lp.get("tokens", []), lp.get("token_logprobs", [])):
            out.append(f"  {t!r} {'none' if p is None else f'{p:.4f}'}")
    return out


def complete(route, body):
    c, r = post(route, body)
    assert r.status == 200, (r.status, r.read())
    answer = json.loads(r.read())
    c.close()
    return describe(answer)


def stream_text(body):
    """A streamed completion's whole text and its finish reason."""
    c, r = post("completions", dict(body, stream=True))
    assert r.status == 200, r.status
    text, finish = "", None
    for chunk in lines_of(r):
        choice = chunk["choices"][0]
        text += choice["text"]
        finish = choice.get("finish_reason") or finish
    c.close()
    return text, finish


def stream(body):
    text, finish = stream_text(body)
    return [f"0 {text!r} {finish}"]


BURST = {
    "complete": ("completions", {"prompt": "Once upon a time", "max_tokens": 12}),
    "logprobs": ("completions", {"prompt": "The answer is", "max_tokens": 20, "logprobs": 2}),
    "chat": ("chat/completions", {"messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 10}),
    "seeded": ("completions", {"prompt": "In the beginning", "max_tokens": 8, "temperature": 0.8, "seed": 3, "n": 2}),
    "stream-a": (None, {"prompt": "Hello", "max_tokens": 16}),
    "stream-b": (None, {"prompt": "1+1=", "max_tokens": 24}),
    "long": ("completions", {"prompt": "Long ago", "max_tokens": 40}),
}


QUERIES = {
    "complete": ("completions", {"prompt": "Once upon a time", "max_tokens": 10}),
    "chat": ("chat/completions", {"messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 8}),
    "echo": ("completions", {"prompt": "The answer is", "max_tokens": 4, "echo": True, "logprobs": 2}),
    "seeded": ("completions", {"prompt": "1+1=", "max_tokens": 8, "temperature": 0.8, "seed": 5, "n": 2, "logprobs": 1}),
    "stream": (None, {"prompt": "Hello", "max_tokens": 8}),
}


PAIR_STREAM = {"prompt": "Stream", "max_tokens": 480}  # still generating when the second arrives
PAIR_BESIDE = {"prompt": "The answer is", "max_tokens": 12, "logprobs": 2}


def pair():
    c, r = post("completions", {"model": "m", "temperature": 0, "stream": True, **PAIR_STREAM})
    assert r.status == 200, r.status
    lines = lines_of(r)
    text = next(lines)["choices"][0]["text"]  # admitted and running: the next goes elsewhere
    beside = complete("completions", {"model": "m", "temperature": 0, **PAIR_BESIDE})
    finish = None
    for chunk in lines:
        choice = chunk["choices"][0]
        text += choice["text"]
        finish = choice.get("finish_reason") or finish
    c.close()
    return [f"0 {text!r} {finish}", "beside"] + beside


def queries():
    for name, (route, body) in QUERIES.items():
        body = dict({"model": "m", "temperature": 0}, **body)
        print(name)
        for line in stream(body) if route is None else complete(route, body):
            print(" ", line)
    print("pair")
    for line in pair():
        print(" ", line)


def burst():
    answers, errors = {}, []

    def ask(name, route, body):
        body = dict({"model": "m", "temperature": 0}, **body)
        try:
            answers[name] = stream(body) if route is None else complete(route, body)
        except Exception as e:  # noqa: BLE001 - reported below, the other threads go on
            errors.append(f"{name}: {e!r}")

    threads = [threading.Thread(target=ask, args=(n, r, b)) for n, (r, b) in BURST.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for name in BURST:
        print(name)
        for line in answers[name]:
            print(" ", line)


LEAVE = ["Stream", "Tale"]  # 480 tokens each (time to see the client leave) at temperature 0


def leave():
    def start(prompt):
        c, r = post("completions", {"model": "m", "prompt": prompt, "max_tokens": 480, "temperature": 0, "stream": True})
        assert r.status == 200, r.status
        return c, lines_of(r)

    def more(lines, n):
        return [chunk["choices"][0]["text"] for _, chunk in zip(range(n), lines)]  # range first: no chunk lost

    first, first_lines = start(LEAVE[0])
    text = more(first_lines, 1)  # admitted: the second goes to the other data rank
    second, second_lines = start(LEAVE[1])
    text2 = more(second_lines, 1)
    text += more(first_lines, 2)
    first.sock.close()  # the client leaves: its data rank ends it while the other generates on
    text2 += more(second_lines, 20)
    second.sock.close()
    print(repr("".join(text)))
    print(repr("".join(text2)))


def full():
    for prompt in LEAVE:
        print(repr(stream_text({"model": "m", "prompt": prompt, "max_tokens": 480, "temperature": 0})[0]))


{"queries": queries, "burst": burst, "leave": leave, "full": full}[MODE]()
