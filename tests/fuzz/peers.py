"""Hostile peers for the fuzz suite: a real `draftlight serve` child to be rude to, and raw
sockets to be rude with. Every exchange is bounded: a socket timeout on each read and a cap
on what is sent, so a server that misbehaves fails a test instead of hanging it."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.fuzz.bounded import ROOT
from tests.served import free_port, healthy

TOKEN = "hostile-suite-token"
READ_S = 20.0  # no answer this suite waits for comes later than this


class ServeChild:
    """`python -m tests.fuzz.serve_child`: engine.serve.server.serve on a tiny model, with deadlines."""

    def __init__(self, model: Path, log: Path, *, queue: int = 1, head_s: float = 1.0, body_s: float = 2.0,
                 stalled_s: float = 2.0, token: str | None = TOKEN) -> None:  # fmt: skip
        self.port = free_port()
        self.token = token
        self.log = log
        args = [str(model), str(self.port), str(queue), str(head_s), str(body_s), str(stalled_s)]
        command = [sys.executable, "-m", "tests.fuzz.serve_child", *args, *([token] if token else [])]
        self._err = log.open("w")
        self.proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=self._err)
        deadline = time.monotonic() + 120
        while not healthy(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the serve child did not start: {log.read_text()}")
            time.sleep(0.2)

    def headers(self, token: bool = True) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if token and self.token else {}

    def stderr(self) -> str:
        self._err.flush()
        return self.log.read_text(errors="replace")

    def status(self) -> dict:
        return self.get("/draftlight/v1/status")[1]

    def get(self, path: str) -> tuple[int, dict]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=READ_S)
        try:
            conn.request("GET", path, headers=self.headers())
            r = conn.getresponse()
            return r.status, json.loads(r.read() or b"{}")
        finally:
            conn.close()

    def post(self, path: str, body: bytes | dict, token: bool = True) -> tuple[int, dict]:
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=READ_S)
        try:
            conn.request("POST", path, body=data, headers={"Content-Type": "application/json", **self.headers(token)})
            r = conn.getresponse()
            raw = r.read()
            try:
                return r.status, json.loads(raw or b"{}")
            except ValueError:
                return r.status, {"raw": raw[:200].decode(errors="replace")}
        finally:
            conn.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self._err.close()


@dataclass
class Answer:
    """What a raw exchange got back: the status (0: none), the bytes, and whether the server closed."""

    status: int
    raw: bytes
    closed: bool


def connect(port: int, timeout: float = READ_S) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_answer(sock: socket.socket, limit: int = 1 << 20) -> Answer:
    """Read until the server closes, a whole answer has come (by its Content-Length), or READ_S passes."""
    raw = b""
    closed = False
    try:
        while len(raw) < limit:
            part = sock.recv(65536)
            if not part:
                closed = True
                break
            raw += part
            head, sep, body = raw.partition(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), None)  # fmt: skip
            if sep and length is not None and len(body) >= length:
                break
    except ConnectionResetError:
        closed = True
    except TimeoutError:
        pass
    status = 0
    if raw.startswith(b"HTTP/1.1 "):
        with contextlib.suppress(ValueError):
            status = int(raw[9:12])
    return Answer(status, raw, closed)


def closed_within(sock: socket.socket, limit: int = 1 << 16) -> bool:
    """Whether the server closes the socket before READ_S passes (reading and dropping what it sends)."""
    try:
        seen = 0
        while seen < limit:
            part = sock.recv(65536)
            if not part:
                return True
            seen += len(part)
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return False


def send_until_cut(sock: socket.socket, chunk: bytes, cap: int) -> int:
    """Send chunk after chunk until the server cuts the connection or `cap` bytes went: the bytes sent."""
    sent = 0
    try:
        while sent < cap:
            sock.sendall(chunk)
            sent += len(chunk)
    except (BrokenPipeError, ConnectionResetError, TimeoutError):
        return sent
    return sent


def head(method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()
