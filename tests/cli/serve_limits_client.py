"""A plain-socket HTTP/1.1 client for tests/cli/serve_limits_test.sh: what a client library would
hide (one connection reused, the time of each response, a body that is never finished, a client
that trickles bytes) done by hand. Each check prints `ok: ...` or raises with what it saw.
Usage: serve_limits_client.py PORT CHECK [ARGS...]"""
import json
import socket
import sys
import threading
import time

HOST = "127.0.0.1"
PORT = int(sys.argv[1])


def connect(timeout=10.0):
    s = socket.create_connection((HOST, PORT), timeout=timeout)
    return s


def request_bytes(method, path, body=b"", headers=None):
    h = {"Host": f"{HOST}:{PORT}"}
    if body or method == "POST":
        h["Content-Type"] = "application/json"
        h["Content-Length"] = str(len(body))
    h.update(headers or {})
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
    return head.encode() + body


class Reader:
    """Reads responses off one socket, keeping bytes past a response for the next."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def _more(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buf += chunk

    def response(self):
        while b"\r\n\r\n" not in self.buf:
            self._more()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length", "0"))
        while len(self.buf) < n:
            self._more()
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, headers, body


def one(method, path, body=b"", headers=None):
    """One request on a fresh connection: (status, headers, body as JSON or bytes)."""
    with connect() as s:
        s.sendall(request_bytes(method, path, body, headers))
        status, h, b = Reader(s).response()
    try:
        return status, h, json.loads(b) if b else None
    except ValueError:
        return status, h, b


def expect_error(name, got, status, code):
    st, _, b = got
    assert st == status, f"{name}: HTTP {st}, expected {status}: {b}"
    e = b["error"]
    assert set(e) == {"message", "type", "param", "code"} and e["code"] == code, f"{name}: {e}"
    print(f"ok: {name}: {status} {code}: {e['message']}")


def keepalive(auth=None):
    """20 sequential requests on one connection, each sent in one write: every response within
    5 ms (Nagle and delayed ACK made each one after the first wait ~40 ms); then 200 more on the
    same connection (httplib's default closed it after 5)."""
    headers = {"Authorization": f"Bearer {auth}"} if auth else None
    best = None
    for attempt in range(3):  # a busy test machine may stall one request; Nagle stalls all 20
        with connect() as s:
            r = Reader(s)
            s.sendall(request_bytes("GET", "/v1/models", headers=headers))  # warm: the first may be slower
            assert r.response()[0] == 200
            times = []
            for _ in range(20):
                t0 = time.perf_counter()
                s.sendall(request_bytes("GET", "/v1/models", headers=headers))
                status, h, body = r.response()
                times.append((time.perf_counter() - t0) * 1000)
                assert status == 200 and json.loads(body)["object"] == "list", (status, body)
                assert h.get("connection", "").lower() != "close", h
            if best is None or max(times) < max(best):
                best = times
            if max(times) < 5:
                break
    assert max(best) < 5, f"keep-alive: slowest of 20 requests {max(best):.1f} ms (all: {[round(t, 1) for t in best]})"
    print(f"ok: 20 requests on one kept-alive connection: slowest {max(best):.2f} ms, median "
          f"{sorted(best)[10]:.2f} ms (limit 5 ms)")
    with connect() as s:
        r = Reader(s)
        for i in range(200):
            s.sendall(request_bytes("GET", "/health"))
            status, h, body = r.response()
            assert status == 200, (i, status, body)
    print("ok: 200 requests on one connection")


def no_cors():
    st, h, _ = one("GET", "/v1/models", headers={"Origin": "https://ok.example"})
    assert st == 200 and "access-control-allow-origin" not in h, h
    print("ok: no CORS headers without --allowed-origins")


def auth(key):
    expect_error("no API key: 401", one("GET", "/v1/models"), 401, "invalid_api_key")
    expect_error("a wrong API key: 401", one("GET", "/v1/models", headers={"Authorization": "Bearer nope"}), 401,
                 "invalid_api_key")
    body = json.dumps({"prompt": "Hi", "max_tokens": 1}).encode()
    expect_error("a POST without the key: 401", one("POST", "/v1/completions", body), 401, "invalid_api_key")
    st, _, b = one("GET", "/v1/models", headers={"Authorization": f"Bearer {key}"})
    assert st == 200 and b["object"] == "list", (st, b)
    print("ok: the right API key: 200")
    st, _, b = one("GET", "/health")
    assert st == 200 and b == {"status": "ok"}, (st, b)
    print("ok: /health needs no key")


def limits(key):
    h = {"Authorization": f"Bearer {key}"}
    big = json.dumps({"prompt": "x" * 2_000_000, "max_tokens": 1}).encode()
    t0 = time.perf_counter()
    expect_error("a 2 MB body over --max-request-bytes 1000000: 413", one("POST", "/v1/completions", big, h), 413,
                 "request_too_large")
    print(f"ok: refused in {time.perf_counter() - t0:.2f} s")
    # Chunked (no Content-Length): 1.5 MB is refused once read, 4 MB while reading.
    for chunks in (3, 8):
        with connect() as s:
            head = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
                    "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
            chunk = b"x" * 500_000
            try:
                s.sendall(head)
                for _ in range(chunks):
                    s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                s.sendall(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
            st, _, body = Reader(s).response()
            assert st == 413 and json.loads(body)["error"]["code"] == "request_too_large", (st, body)
        print(f"ok: a chunked body of {chunks * 0.5} MB past the limit: 413")
    # Under the body limit but far past what the context can hold: refused before tokenizing.
    prompt = json.dumps({"prompt": "word " * 180_000, "max_tokens": 1}).encode()
    t0 = time.perf_counter()
    st, _, b = one("POST", "/v1/completions", prompt, h)
    dt = time.perf_counter() - t0
    assert st == 400 and b["error"]["code"] == "context_length_exceeded", (st, b)
    assert "bytes, more than 256 tokens can hold" in b["error"]["message"], b
    print(f"ok: a 900 KB prompt refused before tokenizing in {dt:.3f} s: {b['error']['message']}")
    msgs = json.dumps({"messages": [{"role": "user", "content": "word " * 180_000}]}).encode()
    st, _, b = one("POST", "/v1/chat/completions", msgs, h)
    assert st == 400 and "bytes, more than 256 tokens can hold" in b["error"]["message"], (st, b)
    assert b["error"]["param"] == "messages", b
    print("ok: 900 KB of messages refused before tokenizing")


def cors(key):
    st, h, _ = one("OPTIONS", "/v1/chat/completions", headers={
        "Origin": "https://ok.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})
    assert st == 204 and h.get("access-control-allow-origin") == "https://ok.example", (st, h)
    assert "POST" in h.get("access-control-allow-methods", "") and "authorization" in h.get(
        "access-control-allow-headers", ""), h
    print("ok: CORS preflight from an allowed origin: 204 with Access-Control-Allow-*")
    st, h, _ = one("GET", "/v1/models", headers={"Origin": "https://ok.example", "Authorization": f"Bearer {key}"})
    assert st == 200 and h.get("access-control-allow-origin") == "https://ok.example", (st, h)
    st, h, _ = one("GET", "/v1/models", headers={"Origin": "https://evil.example", "Authorization": f"Bearer {key}"})
    assert "access-control-allow-origin" not in h, h
    print("ok: CORS headers for the allowed origin only")


def slow_clients(n, cap, read_timeout):
    """n clients trickle a request one byte every 0.5 s: /health still answers at once; the
    connection cap answers 503 past it; the read deadline cuts the tricklers off."""
    stop = threading.Event()
    t0 = time.perf_counter()
    socks = [connect() for _ in range(n)]
    dt = time.perf_counter() - t0
    # httplib listened with a queue of 5: each 6th connection of a burst waited for a SYN retry (1 s)
    assert dt < 1.0, f"{n} connections took {dt:.1f} s to open (the listen queue overflowed)"
    print(f"ok: {n} connections opened at once in {dt * 1000:.0f} ms")
    req = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + b"{" * 100000

    def trickle(s):
        for b in req:
            if stop.is_set():
                return
            try:
                s.sendall(bytes([b]))
            except OSError:
                return
            time.sleep(0.5)

    threads = [threading.Thread(target=trickle, args=(s,), daemon=True) for s in socks]
    for t in threads:
        t.start()
    time.sleep(1.0)
    for _ in range(3):
        t0 = time.perf_counter()
        st, _, b = one("GET", "/health")
        dt = time.perf_counter() - t0
        assert st == 200 and dt < 1.0, (st, b, dt)
    print(f"ok: /health answers in {dt * 1000:.1f} ms with {n} clients trickling a byte every 0.5 s")
    # Past the cap: idle connections fill it, then the next is refused at once.
    extra = [connect() for _ in range(cap - n)]  # with the tricklers, the cap
    time.sleep(0.3)
    expect_error("a connection past --max-connections: 503", one("GET", "/health"), 503, "too_many_connections")
    for s in extra:
        s.close()
    time.sleep(0.3)
    # The read deadline: every trickler is cut off within read_timeout (+ slack) of its start.
    deadline = time.time() + read_timeout + 3
    cut = 0
    for s in socks:
        s.settimeout(max(0.1, deadline - time.time()))
        try:
            s.recv(65536)  # EOF, or the server's 400 for the request it gave up on
            cut += 1
        except (ConnectionResetError, BrokenPipeError):
            cut += 1
        except socket.timeout:
            pass
    stop.set()
    assert cut == n, f"only {cut} of {n} trickling clients were cut off by the {read_timeout} s read deadline"
    print(f"ok: all {n} trickling clients cut off by the {read_timeout} s read deadline")
    st, _, _ = one("GET", "/health")
    assert st == 200
    print("ok: /health afterwards")


if __name__ == "__main__":
    check = sys.argv[2]
    args = sys.argv[3:]
    if check == "keepalive":
        keepalive(*args)
    elif check == "no_cors":
        no_cors()
    elif check == "auth":
        auth(*args)
    elif check == "limits":
        limits(*args)
    elif check == "cors":
        cors(*args)
    elif check == "slow":
        slow_clients(int(args[0]), int(args[1]), float(args[2]))
    else:
        raise SystemExit(f"unknown check {check}")
