"""Fuzz: a real `draftlight serve` (tests/fuzz/serve_child.py, a tiny model) against hostile
clients: every field's wrong types, malformed heads, bodies that never end, silent sockets,
queue churn. The contract: every answer is a status with a sentence (never a 500), every
refused or stalled connection is closed, the server stays up and logs no traceback."""

from __future__ import annotations

import contextlib
import json
import random
import socket
import time

import pytest

from tests.fuzz.bounded import case_count
from tests.fuzz.peers import ServeChild, closed_within, connect, head, read_answer, send_until_cut
from tests.fuzz.serve_child import long_llama

FIELDS = ("max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "seed", "stop", "stream",
          "ignore_eos", "messages", "draftlight", "draftlight.depth", "draftlight.drafter", "draftlight.thinking",
          "draftlight.p_min")  # fmt: skip
VALUES = (None, True, False, 0, -1, 1, 7, 2**64, -(2**64), 0.5, -0.5, 1e308, "NaN", "Infinity", "", "x", "false",
          "auto", [], [1], ["a"] * 20, {}, {"a": 1}, "../../etc/passwd", "\udcff", "x" * 5000)  # fmt: skip
ROUTES = ("/v1/chat/completions", "/draftlight/v1/stream", "/draftlight/v1/cancel", "/v1/models", "/nowhere", "/health")
CHUNK = b"10000\r\n" + b"x" * 0x10000 + b"\r\n"
CAP = 64 << 20


@pytest.fixture(scope="module")
def child(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz-serve")
    server = ServeChild(long_llama(folder / "long.gguf"), folder / "stderr.txt", queue=2)
    yield server
    assert "Traceback" not in server.stderr(), server.stderr()[-3000:]
    server.stop()


def body_with(name: str, value) -> bytes:
    body: dict = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    if name.startswith("draftlight."):
        body["draftlight"] = {name.split(".", 1)[1]: value}
    else:
        body[name] = value
    if name in ("max_tokens", "max_completion_tokens") and isinstance(value, int) and not isinstance(value, bool):
        body[name] = max(min(value, 8), -8)  # replies stay short; the range checks still see 0 and below
    text = json.dumps(body, allow_nan=True)
    for word in ("NaN", "Infinity"):  # JSON's own words for them, which Python's json reads
        text = text.replace(f'"{word}"', word)
    return text.encode(errors="surrogatepass")


@pytest.mark.parametrize("seed", range(case_count(fast=12, full=400)))
def test_every_fields_wrong_types_are_a_sentence(child, seed):
    rng = random.Random(seed)
    name, value = rng.choice(FIELDS), rng.choice(VALUES)
    status, body = child.post(rng.choice(ROUTES[:2]), body_with(name, value))
    assert status in (200, 400), (name, value, status, body)
    if status == 400:
        message = body["error"]["message"]
        assert message.endswith(".") and "engine failed" not in message and "Traceback" not in message, message


def junk_head(rng: random.Random) -> bytes:
    parts = [rng.choice([b"GET", b"POST", b"\x00\xff", b"BREW", b"G" * 5000]), b" ",
             rng.choice([b"/health", b"*", b"http://x/", b"/" + bytes(rng.randrange(256) for _ in range(20))]), b" ",
             rng.choice([b"HTTP/1.1", b"HTTP/9.9", b"", b"HTTP/1.1 extra"]), b"\r\n"]  # fmt: skip
    for _ in range(rng.randrange(4)):
        parts.append(rng.choice([b"Host: x", b"Content-Length: -5", b"Content-Length: 1, 2", b"Transfer-Encoding: gzip",
                                 b"X: " + b"y" * 20000, b"\x01\x02: \x03", b": empty", b"Authorization: Bearer"]))  # fmt: skip
        parts.append(b"\r\n")
    return b"".join(parts) + b"\r\n"


@pytest.mark.parametrize("seed", range(case_count(fast=8, full=200)))
def test_malformed_heads_are_refused_or_closed(child, seed):
    sock = connect(child.port)
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        sock.sendall(junk_head(random.Random(seed)))
    answer = read_answer(sock)
    sock.close()
    assert (answer.status == 0 and answer.closed) or 400 <= answer.status < 500 or answer.status == 200, answer.raw[
        :300
    ]
    assert child.get("/health")[0] == 200


@pytest.mark.parametrize("seed", range(case_count(fast=4, full=60)))
def test_bodies_that_never_end_are_cut(child, seed):
    rng = random.Random(seed)
    route, token = rng.choice(ROUTES), rng.random() < 0.5
    sock = connect(child.port)
    sock.sendall(head("POST", route, {"Transfer-Encoding": "chunked", **child.headers(token)}))
    sent = send_until_cut(sock, CHUNK, CAP)
    closed = sent < CAP or closed_within(sock)
    sock.close()
    assert closed, (route, token, sent)


def test_silent_sockets_are_all_closed(child):
    socks = [connect(child.port) for _ in range(case_count(fast=5, full=20))]
    closed = [closed_within(s) for s in socks]
    for s in socks:
        s.close()
    assert all(closed)
    assert child.get("/health")[0] == 200


@pytest.mark.parametrize("seed", range(case_count(fast=1, full=10)))
def test_queue_churn_leaves_no_place_taken(child, seed):
    rng = random.Random(seed)
    holder = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8000, "ignore_eos": True,
                         "stream": True}).encode()  # fmt: skip
    small = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}).encode()
    socks: list[socket.socket] = []
    for n in range(rng.randrange(3, 7)):
        s = connect(child.port)
        body = holder if n == 0 else small
        headers = {"Content-Type": "application/json", "Content-Length": str(len(body)), **child.headers()}
        s.sendall(head("POST", "/v1/chat/completions", headers) + body)
        socks.append(s)
    for s in socks:  # every one leaves, the running reply's client too
        s.close()
    for _ in range(200):
        status = child.status()
        if status["waiting"] == 0 and not status["busy"]:
            break
        time.sleep(0.1)
    assert child.status()["waiting"] == 0
    assert child.post("/v1/chat/completions", small)[0] == 200
