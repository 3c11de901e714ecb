"""`draftlight serve` as a real process on localhost with the real default pair, spoken to by
OpenAI's own client and by raw HTTP: the tokens and their provenance are `draftlight chat --json`'s."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from engine.ledger.drift import BASELINE_DRAFTS
from engine.ledger.fingerprint import identity
from engine.ledger.store import Setup, open_ledger

openai = pytest.importorskip("openai")

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "s3cret-token"
PROMPT = "Write a bubble sort in C++."
N = 24


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def earlier_baseline(ledger: Path, target_path: Path, drafter_path: Path) -> None:
    """A baseline of this pair in the server's ledger, measured against another target file: every
    draft kept. The server's own replies then fall from it, and their stats say so."""
    target, drafter = identity(target_path), identity(drafter_path)
    setup = Setup(target.name, drafter.name, "model", "gguf:1:earlier", drafter.fingerprint, "llama-cpp-python",
                  "0.1.0", "greedy", "2")  # fmt: skip
    book = open_ledger(ledger)
    at = time.mktime((2026, 12, 1, 12, 0, 0, 0, 0, -1))
    for i in range(BASELINE_DRAFTS // 100):  # a whole baseline: the drift test starts from it
        book.add(setup, "serve", (50, 50), (50, 50), [("code", 100, 100)], at=at + i)
    book.close()


@pytest.fixture(scope="module")
def server(target_path, drafter_path, tmp_path_factory):
    port = free_port()
    ledger = tmp_path_factory.mktemp("serve-ledger") / "ledger.sqlite3"
    earlier_baseline(ledger, target_path, drafter_path)
    command = [sys.executable, "-m", "engine.cli", "serve", "--target", str(target_path), "--drafter",
               str(drafter_path), "--port", str(port), "--token", TOKEN, "--queue", "1", "--max-tokens", "512",
               "--max-request-bytes", "8192", "--depth", "2"]  # fmt: skip
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "DRAFTLIGHT_LEDGER": str(ledger)})  # fmt: skip
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the server ended: {proc.stderr.read()}")
        try:
            if get(port, "/health")[0] == 200:
                break
        except OSError:
            time.sleep(0.5)
    yield port
    proc.terminate()
    proc.wait(timeout=30)


def get(port: int, path: str, token: str | None = TOKEN) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
    r = conn.getresponse()
    return r.status, json.loads(r.read() or b"{}")


def post(port: int, path: str, body: bytes, token: str | None = TOKEN) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    conn.request("POST", path, body=body, headers=headers)
    r = conn.getresponse()
    return r.status, json.loads(r.read() or b"{}")


def client(port: int, token: str = TOKEN):
    return openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=token, max_retries=0, timeout=300)


def cli_json(target_path, drafter_path) -> tuple[list[dict], dict]:
    out = subprocess.run(
        [sys.executable, "-m", "engine.cli", "chat", PROMPT, "--target", str(target_path), "--drafter",
         str(drafter_path), "--depth", "2", "--max-tokens", str(N), "--json"],
        cwd=ROOT, capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    return [d for d in lines if d["type"] == "token"], lines[-1]


def test_a_streamed_reply_is_the_command_lines_token_for_token(server, target_path, drafter_path):
    stream = client(server).chat.completions.create(
        model="anything", messages=[{"role": "user", "content": PROMPT}], max_tokens=N, stream=True
    )
    chunks = list(stream)
    ours = [c.model_extra["draftlight"] for c in chunks if c.model_extra.get("draftlight", {}).get("type") == "token"]
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    final = chunks[-1].model_extra["draftlight"]
    tokens, stats = cli_json(target_path, drafter_path)
    assert [t["token_id"] for t in ours] == [t["token_id"] for t in tokens]
    assert [(t["kind"], t["round"], t["position"]) for t in ours] == [
        (t["kind"], t["round"], t["position"]) for t in tokens
    ]
    assert {t["kind"] for t in ours} >= {"plain", "accepted"}  # speculation at work
    assert text == final["text"] == stats["text"]
    assert final["type"] == "stats" and final["generated_tokens"] == N == stats["generated_tokens"]
    assert (final["drafted"], final["accepted"]) == (stats["drafted"], stats["accepted"])
    assert chunks[-1].choices[0].finish_reason == "length"
    assert set(final) >= {"rejections", "segments", "by_content"}


def test_a_whole_reply_and_the_models_list(server):
    c = client(server)
    assert [m.id for m in c.models.list().data] == ["qwen2.5-coder-1.5b-instruct-q4_k_m"]
    reply = c.chat.completions.create(
        model="x",
        messages=[{"role": "user", "content": "Say hello."}],
        max_tokens=8,
        extra_body={"draftlight": {"depth": 0}},
    )
    ours = reply.model_extra["draftlight"]
    assert reply.choices[0].message.content == ours["stats"]["text"]
    assert [t["kind"] for t in ours["tokens"]] == ["plain"] * len(ours["tokens"])  # depth 0, as asked
    assert reply.usage.completion_tokens == len(ours["tokens"])


def test_our_own_event_stream_starts_with_the_box(server):
    conn = http.client.HTTPConnection("127.0.0.1", server, timeout=300)
    body = json.dumps({"messages": [{"role": "user", "content": "Count to three."}], "max_tokens": 6})
    conn.request("POST", "/draftlight/v1/stream", body=body, headers={"Authorization": f"Bearer {TOKEN}"})
    lines = [
        json.loads(line[6:]) for line in conn.getresponse().read().decode().splitlines() if line.startswith("data: ")
    ]
    assert lines[0]["type"] == "box" and lines[0]["model"] == "qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert "state" in lines[0]["thermal"]
    assert {d["type"] for d in lines[1:-1]} == {"token", "round"} and lines[-1]["type"] == "stats"


def test_refusals_are_sentences_with_their_status(server):
    status, body = post(server, "/v1/chat/completions", b"{}", token="wrong")
    assert status == 401 and "needs its token" in body["error"]["message"]
    assert get(server, "/v1/models", token=None)[0] == 401
    big = json.dumps({"messages": [{"role": "user", "content": "x" * 9000}]}).encode()
    status, body = post(server, "/v1/chat/completions", big)
    assert status == 413 and body["error"]["message"].startswith("The request is ")
    status, body = post(server, "/v1/chat/completions", json.dumps({"messages": [], "max_tokens": 4}).encode())
    assert status == 400 and "messages must be" in body["error"]["message"]
    too_many = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 100000}).encode()
    status, body = post(server, "/v1/chat/completions", too_many)
    assert (
        status == 400
        and body["error"]["message"] == "max_tokens must be between 1 and 512 on this server; it was 100,000."
    )
    status, body = post(server, "/v1/chat/completions", b"not json")
    assert status == 400 and body["error"]["message"] == "The request body is not JSON."


def test_a_full_queue_is_429_and_a_client_that_leaves_cancels_its_reply(server):
    before = get(server, "/draftlight/v1/status")[1]
    long = json.dumps({"messages": [{"role": "user", "content": PROMPT}], "max_tokens": 400, "stream": True})
    first = socket.create_connection(("127.0.0.1", server))
    first.sendall(
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(long)}\r\n\r\n{long}".encode()
    )
    first.recv(4096)  # the reply has started streaming
    waiting = threading.Thread(target=post, args=(server, "/v1/chat/completions", json.dumps(
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}).encode()))  # fmt: skip
    waiting.start()
    deadline = time.monotonic() + 60
    while get(server, "/draftlight/v1/status")[1]["waiting"] < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    status, body = post(server, "/v1/chat/completions", json.dumps(
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}).encode())  # fmt: skip
    assert status == 429 and "The server is busy" in body["error"]["message"]
    first.close()  # the client leaves mid-reply: its reply stops after the round
    waiting.join(timeout=300)
    after = get(server, "/draftlight/v1/status")[1]
    for _ in range(50):  # the reply's thread frees the seat just after its last event is sent
        if not after["busy"]:
            break
        time.sleep(0.1)
        after = get(server, "/draftlight/v1/status")[1]
    assert after["cancelled"] == before["cancelled"] + 1
    assert after["replies"] == before["replies"] + 2 and not after["busy"]


def test_a_fall_since_the_target_changed_is_said_in_each_replys_stats(server):
    """The ledger's warning reaches a client as `chat --json` says it: in the stats, whole or streamed."""
    said = []
    for _ in range(3):  # the replies since the change: enough to weigh against the baseline
        reply = client(server).chat.completions.create(
            model="x", messages=[{"role": "user", "content": PROMPT}], max_tokens=N
        )
        said.append(reply.model_extra["draftlight"]["stats"]["ledger"])
    stream = client(server).chat.completions.create(
        model="x", messages=[{"role": "user", "content": PROMPT}], max_tokens=N, stream=True
    )
    said.append(list(stream)[-1].model_extra["draftlight"]["ledger"])
    last = said[-1]
    assert last["warnings"] and all(
        w.startswith("Acceptance on ") and f"fell from 100% ({BASELINE_DRAFTS:,} drafts)" in w
        and "since the target's file changed on " in w and w.endswith("measured against the earlier file.")
        for w in last["warnings"]
    )  # fmt: skip
    assert last["status"] == " ".join(last["warnings"])


def test_listening_beyond_this_machine_needs_a_token():
    out = subprocess.run(
        [sys.executable, "-m", "engine.cli", "serve", "--host", "0.0.0.0"], cwd=ROOT, capture_output=True, text=True,
        timeout=60, env={**os.environ, "DRAFTLIGHT_TOKEN": ""},
    )  # fmt: skip
    assert out.returncode == 2
    assert out.stderr.startswith("draftlight: Listening on 0.0.0.0 lets other machines in: give --token")
