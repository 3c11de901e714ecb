"""Hostile servers for the remote client: a real HTTP server on localhost that answers as
ours, llama-server or vLLM does, then misbehaves as told. Each misbehaviour is bounded (a cap
on lines or seconds), so a client that fails to protect itself fails its test, not hangs it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from engine.remote import Endpoint

BOX = {"model": "m", "runtime": "r", "machine": "evil", "platform": "x", "thermal": {"state": "nominal"}}
PROPS = {"default_generation_settings": {}, "build_info": "b1", "model_path": "/m/evil.gguf"}
MODELS = {"object": "list", "data": [{"id": "evil", "object": "model", "owned_by": "vllm"}]}
# A stream's body: the chunks (bytes) the server writes, one by one, flushing each.
Body = Callable[[], Iterator[bytes]]


@dataclass
class Behaviour:
    """What the server says: `kind` (draftlight, llama-server, vllm), the stream's body and
    content type, and how it answers the rest."""

    kind: str = "draftlight"
    stream: Body = lambda: iter(())
    content_type: str = "text/event-stream"
    cancel: Body | None = None  # POST /draftlight/v1/cancel's body; None: answer at once
    box: dict = field(default_factory=lambda: dict(BOX))
    json_body: Body | None = None  # every GET's body, where it should misbehave
    # what the server saw: whether the client hung up on a stream or a cancel before its end
    hung_up: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)


def sse(data: dict | str) -> bytes:
    return f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode()


def box_line(reply: str = "r1") -> bytes:
    return sse({"type": "box", "reply": reply, **BOX})


def trickle(piece: bytes, every_s: float, lines: int) -> Body:
    """`piece` every `every_s` seconds, `lines` times: a slow answer that never says anything."""

    def body() -> Iterator[bytes]:
        for _ in range(lines):
            yield piece
            time.sleep(every_s)

    return body


def handler_for(b: Behaviour) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def chunked(self, status: int, kind: str, body: Iterator[bytes], name: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for piece in body:
                    if piece:
                        self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                        self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                b.hung_up.append(name)
                return
            b.finished.append(name)

        def whole(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if b.json_body is not None:
                self.chunked(200, "application/json", b.json_body(), self.path)
            elif self.path == "/draftlight/v1/box" and b.kind == "draftlight":
                self.whole(200, b.box)
            elif self.path == "/props" and b.kind == "llama-server":
                self.whole(200, PROPS)
            elif self.path == "/v1/models" and b.kind != "draftlight":
                self.whole(200, MODELS if b.kind == "vllm" else {**MODELS, "data": [{"id": "evil"}]})
            elif self.path == "/metrics" and b.kind == "vllm":
                self.whole(200, {})
            else:
                self.whole(404, {"detail": "Not Found"})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path == "/draftlight/v1/cancel" and b.cancel is not None:
                self.chunked(200, "application/json", b.cancel(), "cancel")
            elif self.path == "/draftlight/v1/cancel":
                self.whole(200, {"cancelled": "r1"})
            else:
                self.chunked(200, b.content_type, b.stream(), "stream")

    return Handler


class HostileServer:
    """A ThreadingHTTPServer on a free localhost port, answering as `behaviour` says."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(behaviour))
        self.server.daemon_threads = True
        self.endpoint = Endpoint(f"http://127.0.0.1:{self.server.server_address[1]}")
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def __enter__(self) -> HostileServer:
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
