"""`draftlight serve` against rude clients, as a real child process on a tiny model: a refused
body that never ends, silent and slow sockets, a body that trickles, a client that leaves the
queue or hangs up mid-body. Each exchange is bounded by a cap on what is sent and a socket
timeout on what is read (tests/fuzz/peers.py)."""

from __future__ import annotations

import json
import threading
import time

import pytest

from tests.fuzz.peers import TOKEN, ServeChild, closed_within, connect, head, read_answer, send_until_cut
from tests.fuzz.serve_child import long_llama

CHUNK = b"10000\r\n" + b"x" * 0x10000 + b"\r\n"  # one 64 KiB chunk of a chunked body
CAP = 256 << 20  # what a test sends at most into a body that the server should have stopped reading


@pytest.fixture(scope="module")
def child(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serve-hostile")
    server = ServeChild(long_llama(folder / "long.gguf"), folder / "stderr.txt", queue=1)
    yield server
    server.stop()


def chat(max_tokens: int = 4, **extra) -> dict:
    return {"messages": [{"role": "user", "content": "hi"}], "max_tokens": max_tokens, **extra}


@pytest.mark.parametrize(("token", "status"), [(False, 401), (True, 413)])
def test_a_refused_body_that_never_ends_closes_its_connection(child, token, status):
    sock = connect(child.port)
    headers = {"Transfer-Encoding": "chunked", "Content-Type": "application/json", **child.headers(token)}
    sock.sendall(head("POST", "/v1/chat/completions", headers))
    sent = send_until_cut(sock, CHUNK, CAP)
    sock.close()
    assert sent < CAP, f"the server read {sent >> 20} MiB of a body it had refused ({status})"
    assert child.get("/health")[0] == 200


def test_a_refusal_still_reaches_a_client_that_sends_a_large_body_whole(child):
    status, body = child.post("/v1/chat/completions", json.dumps(chat(content="x" * 200_000)).encode())
    assert status == 413 and "this server takes up to 8,192" in body["error"]["message"]


def test_a_silent_socket_is_closed(child):
    silent = connect(child.port)
    closed = closed_within(silent)
    silent.close()
    assert closed, "a socket that said nothing was left open"


def test_a_head_sent_byte_by_byte_is_cut_off(child):
    slow = connect(child.port)
    line = head("GET", "/draftlight/v1/status", child.headers())
    cut = False
    for byte in line[:150]:  # a byte every 0.1 s: 15 s if the server never cuts it
        try:
            slow.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            cut = True
            break
        time.sleep(0.1)
    cut = cut or closed_within(slow)
    slow.close()
    assert cut, "a request head sent a byte at a time was never cut off"


def test_a_body_that_trickles_is_refused_in_a_sentence_and_closed(child):
    sock = connect(child.port)
    headers = {"Content-Length": "1000", "Content-Type": "application/json", **child.headers()}
    sock.sendall(head("POST", "/v1/chat/completions", headers))
    for _ in range(100):  # 10 bytes every 0.1 s: the body would take 10 s
        try:
            sock.sendall(b" " * 10)
        except (BrokenPipeError, ConnectionResetError):
            break
        time.sleep(0.1)
        sock.setblocking(False)
        try:
            if sock.recv(1, 2):  # MSG_PEEK: has the server answered?
                break
        except BlockingIOError:
            pass
        finally:
            sock.setblocking(True)
            sock.settimeout(20)
    answer = read_answer(sock)
    closed = answer.closed or closed_within(sock)
    sock.close()
    assert answer.status == 408, answer.raw[:200]
    assert b"did not arrive within 2 s" in answer.raw and closed


def queued(child: ServeChild, waiting: int) -> bool:
    """Whether the queue reaches `waiting` within 10 s (polled)."""
    for _ in range(100):
        if child.status()["waiting"] == waiting:
            return True
        time.sleep(0.1)
    return False


def test_a_client_that_leaves_the_queue_gives_up_its_place(child):
    holder = connect(child.port)
    body = json.dumps(chat(16000, stream=True, ignore_eos=True)).encode()
    headers = {"Content-Type": "application/json", "Content-Length": str(len(body)), **child.headers()}
    holder.sendall(head("POST", "/draftlight/v1/stream", headers) + body)
    first = b""
    while b"\n\n" not in first.partition(b"data: ")[2]:  # the box line, which names the reply
        part = holder.recv(65536)
        assert part, first
        first += part
    reply_id = json.loads(first.partition(b"data: ")[2].split(b"\n", 1)[0])["reply"]
    small = json.dumps(chat(4)).encode()
    leaver = connect(child.port)
    leaver.sendall(head("POST", "/v1/chat/completions", {**headers, "Content-Length": str(len(small))}) + small)
    assert queued(child, 1)
    leaver.close()
    left = queued(child, 0)
    assert child.status()["busy"], "the reply holding the seat ended too soon for this test to mean anything"
    answers: list[int] = []
    later = threading.Thread(target=lambda: answers.append(child.post("/v1/chat/completions", chat(4))[0]))
    later.start()
    assert queued(child, 1)
    assert child.post("/draftlight/v1/cancel", {"reply": reply_id})[0] == 200
    later.join(timeout=60)
    holder.close()
    assert left, "a client that left the queue still held its place"
    assert answers == [200]


def test_a_client_that_hangs_up_mid_body_leaves_no_traceback(child):
    sock = connect(child.port)
    headers = {"Content-Length": "1000", "Content-Type": "application/json", **child.headers()}
    sock.sendall(head("POST", "/v1/chat/completions", headers) + b'{"messages": ')
    time.sleep(0.3)
    sock.close()
    time.sleep(0.3)
    assert child.get("/health")[0] == 200
    assert "Traceback" not in child.stderr(), child.stderr()[-2000:]


def test_the_token_is_still_asked_for(child):
    assert child.post("/v1/chat/completions", chat(), token=False)[0] == 401
    assert TOKEN in child.headers()["Authorization"]
