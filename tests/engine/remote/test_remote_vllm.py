"""vLLM as a remote engine, against vLLM's wire format replayed by a small real HTTP server.

vLLM cannot run on this machine (it wants a GPU and the Hugging Face hub), so a
standard-library HTTP server on localhost speaks its exact format instead, and the
client under test talks to it over real sockets:
  - the chat stream as vllm/entrypoints/openai/chat_completion/serving.py writes it
    (chat_completion_stream_generator: a first chunk with the role and empty content, one
    chunk per delta with `logprobs` null and `finish_reason` null, a last one with
    `finish_reason` and `stop_reason`, the usage chunk with empty `choices` when
    stream_options.include_usage is asked for, then `data: [DONE]`), pydantic's
    model_dump_json(exclude_unset=True) field order;
  - `/metrics` as prometheus_client writes vLLM's counters (see test_prometheus_text.py),
    bumped by each reply as vLLM's scheduler stats would be;
  - `/v1/models` with `owned_by` "vllm", `/version`, and FastAPI's 404 for `/props`.
The same server with vLLM's marks taken off stands for any other OpenAI-compatible server.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engine import GenerationConfig, Message
from engine.depth import AUTO
from engine.events import FinishReason, RunStats, TokenEvent, TokenKind
from engine.measure.thermal import ThermalState
from engine.remote import ConnectionLost, Endpoint, RemoteError, Unreachable
from engine.remote.openai_chat import OpenAIRemote
from engine.remote.openai_servers import attach_openai
from engine.remote.vllm import VllmRemote
from engine.sampling import SamplingConfig

MODEL = "Qwen/Qwen2.5-Coder-1.5B-Instruct"
# A reply of 8 tokens: the first from the prompt's pass, then three rounds at depth 3 that
# kept 3, 1 and 0 drafts (4 + 2 + 1 tokens).
DELTAS = ["Certainly", "!", " Below", " is", " a", " simple", " implementation", " of"]
TOKEN_IDS = [95456, 0, 21193, 374, 264, 4285, 8129, 315]
ROUNDS = [3, 1, 0]  # drafts kept by each round
DEPTH = 3


@dataclass
class Counters:
    """What vLLM's counters hold, as its Prometheus page shows them."""

    drafts: int = 40
    draft_tokens: int = 120
    accepted: int = 70
    per_pos: list[int] = field(default_factory=lambda: [35, 22, 13])
    generated: int = 200
    running: int = 0

    def add_round(self, kept: int) -> None:
        self.drafts += 1
        self.draft_tokens += DEPTH
        self.accepted += kept
        for i in range(kept):
            self.per_pos[i] += 1

    def page(self) -> str:
        labels = f'engine="0",model_name="{MODEL}"'
        out = [
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{labels}}} {float(self.running)}",
            "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{{{labels}}} {float(self.generated)}",
        ]
        for name, doc, value in (
            ("spec_decode_num_drafts", "Number of spec decoding drafts.", self.drafts),
            ("spec_decode_num_draft_tokens", "Number of draft tokens.", self.draft_tokens),
            ("spec_decode_num_accepted_tokens", "Number of accepted tokens.", self.accepted),
        ):
            out += [
                f"# HELP vllm:{name}_total {doc}",
                f"# TYPE vllm:{name}_total counter",
                f"vllm:{name}_total{{{labels}}} {float(value)}",
                f"# HELP vllm:{name}_created {doc}",
                f"# TYPE vllm:{name}_created gauge",
                f"vllm:{name}_created{{{labels}}} 1.7254178e+09",
            ]
        out += [
            "# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.",
            "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter",
        ]
        out += [
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{i}"}} {float(v)}'
            for i, v in enumerate(self.per_pos)
        ]
        return "\n".join(out) + "\n"


@dataclass
class Replay:
    """How the replayed server behaves, and what it was asked."""

    vllm: bool = True
    counters: Counters = field(default_factory=Counters)
    finish_reason: str = "length"
    stop_reason: int | str | None = None
    token_ids: bool = False  # vLLM's return_token_ids
    others: int = 0  # tokens another client's reply adds to the counters meanwhile
    request_metrics: dict | None = None  # newer vLLM's per-request metrics on the usage chunk
    error_after: int | None = None  # send vLLM's error chunk after this many deltas
    drop_after: int | None = None  # close the socket after this many deltas
    delay_s: float = 0.0
    bodies: list[dict] = field(default_factory=list)

    def chunks(self) -> Iterator[dict | str]:
        head = {"id": "chatcmpl-b1e9", "object": "chat.completion.chunk", "created": 1754170000, "model": MODEL}
        yield head | {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}]}  # fmt: skip
        for i, (text, tid) in enumerate(zip(DELTAS, TOKEN_IDS)):
            if i == self.error_after:
                yield {"error": {"message": "The engine died: CUDA error: an illegal memory access was encountered", "type": "InternalServerError", "param": None, "code": 500}}  # fmt: skip
                return
            if i == self.drop_after:
                yield "drop"
                return
            choice = {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None}
            if self.token_ids:
                choice["token_ids"] = [tid]
            yield head | {"choices": [choice]}
            time.sleep(self.delay_s)
        for kept in ROUNDS:
            self.counters.add_round(kept)
        self.counters.generated += len(DELTAS) + self.others
        if self.others:  # the other reply's one round, kept nothing
            self.counters.add_round(0)
        last = {"index": 0, "delta": {"content": ""}, "logprobs": None, "finish_reason": self.finish_reason, "stop_reason": self.stop_reason}  # fmt: skip
        yield head | {"choices": [last]}
        usage = head | {"choices": [], "usage": {"prompt_tokens": 36, "total_tokens": 44, "completion_tokens": 8}}
        if self.request_metrics is not None:
            usage["metrics"] = self.request_metrics
        yield usage
        yield "[DONE]"


def handler_for(replay: Replay) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def send(self, status: int, body: bytes, kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                owner = "vllm" if replay.vllm else "system"
                card = {"id": MODEL, "object": "model", "created": 1754170000, "owned_by": owner, "root": MODEL, "parent": None, "max_model_len": 4096}  # fmt: skip
                self.send(200, json.dumps({"object": "list", "data": [card]}).encode())
            elif self.path == "/version" and replay.vllm:
                self.send(200, b'{"version":"0.10.1.1"}')
            elif self.path == "/metrics" and replay.vllm:
                self.send(200, replay.counters.page().encode(), "text/plain; version=0.0.4; charset=utf-8")
            else:
                self.send(404, b'{"detail":"Not Found"}')

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            replay.bodies.append(body)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for item in replay.chunks():
                if item == "drop":
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                data = item if isinstance(item, str) else json.dumps(item, separators=(",", ":"))
                event = f"data: {data}\n\n".encode()
                try:
                    self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
                    self.wfile.flush()
                except OSError:
                    return  # the client left (a Stop)
            self.wfile.write(b"0\r\n\r\n")

    return Handler


@pytest.fixture
def replay() -> Iterator[tuple[Replay, Endpoint]]:
    state = Replay()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(state))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield state, Endpoint(f"http://127.0.0.1:{server.server_address[1]}")
    server.shutdown()
    server.server_close()


def openai_body(**extra) -> dict:
    """The chat request the client must send: OpenAI's fields for the test prompt, and `extra`."""
    return {
        "messages": [{"role": "user", "content": "Write a bubble sort in C++."}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 8,
        "temperature": 0.0,
        "top_p": 1.0,
        "model": MODEL,
        **extra,
    }


def reply(endpoint: Endpoint, config: GenerationConfig | None = None, cancelled=lambda: False):
    remote = attach_openai(endpoint)
    events = list(remote.reply([Message("user", "Write a bubble sort in C++.")], config or GenerationConfig(max_tokens=8, depth=AUTO), True, cancelled))  # fmt: skip
    return remote, events[:-1], events[-1]


# ---- against the replayed server ---------------------------------------------------


def test_vllm_is_recognised_and_a_reply_charts_its_acceptance_per_position(replay):
    state, endpoint = replay
    state.token_ids = True
    remote, tokens, stats = reply(endpoint, GenerationConfig(max_tokens=8, depth=AUTO, sampling=SamplingConfig(top_k=20, seed=7)))  # fmt: skip
    assert isinstance(remote, VllmRemote)
    info = remote.info
    assert (info.kind, info.model, info.provenance, info.per_position, info.thermal) == ("vllm", MODEL, False, True, False)  # fmt: skip
    assert info.why_uncoloured == (
        "vLLM reports only its draft counters (drafts, drafted and accepted tokens, acceptance per "
        "position), not which tokens were drafted: tokens are not coloured."
    )
    assert info.describe() == f"vLLM at {endpoint.host}"
    assert [(t.text, t.token_id, t.kind, t.round_index, t.position) for t in tokens] == [
        (text, tid, TokenKind.UNREPORTED, i, 0) for i, (text, tid) in enumerate(zip(DELTAS, TOKEN_IDS))
    ]
    assert isinstance(stats, RunStats)
    assert (stats.text, stats.prompt_tokens, stats.generated_tokens, stats.from_prefill) == ("".join(DELTAS), 36, 8, 1)  # fmt: skip
    assert (stats.drafted, stats.accepted, stats.rounds) == (9, 4, 3)
    assert stats.drafted_per_position == (3, 3, 3)
    assert stats.accepted_per_position == (2, 1, 1)
    assert stats.acceptance_per_position == (2 / 3, 1 / 3, 1 / 3)
    assert (stats.depth, stats.finish_reason, stats.message) == (AUTO, FinishReason.MAX_TOKENS, "")
    assert state.bodies == [openai_body(seed=7, top_k=20, chat_template_kwargs={"enable_thinking": True})]
    assert remote.read_thermal().state is ThermalState.UNKNOWN
    assert remote.read_thermal().source == "vLLM does not report its machine's thermal state"


def test_another_clients_reply_is_named(replay):
    state, endpoint = replay
    state.others = 50
    stats = reply(endpoint)[2]
    assert (stats.drafted, stats.accepted, stats.rounds) == (12, 4, 4)  # the other's round counted in
    assert stats.message == (
        "vLLM's draft counters count every client of the server, and another reply ran alongside this one "
        "(the server wrote 58 tokens, this reply 8): these draft figures include it."
    )


def test_per_request_metrics_win_over_the_counters(replay):
    state, endpoint = replay
    state.others = 50
    state.request_metrics = {"speculative_decoding": {"mean_acceptance_length": 2.333, "draft_acceptance_rate": 0.444, "acceptance_histogram": [1, 1, 0, 1], "num_spec_steps": 3, "num_accepted_draft_tokens": 4, "num_draft_tokens": 9, "num_spec_tokens": 3}}  # fmt: skip
    stats = reply(endpoint)[2]
    assert (stats.drafted, stats.accepted, stats.rounds, stats.accepted_per_position, stats.message) == (9, 4, 3, (2, 1, 1), "")  # fmt: skip


@pytest.mark.parametrize(
    ("finish", "stop_reason", "expected"),
    [
        ("stop", None, FinishReason.EOG),
        ("stop", 151645, FinishReason.EOG),  # the stop token's id
        ("stop", "\n\n", FinishReason.STOP_STRING),
        ("length", None, FinishReason.MAX_TOKENS),
    ],
)
def test_finish_reasons(replay, finish, stop_reason, expected):
    state, endpoint = replay
    state.finish_reason, state.stop_reason = finish, stop_reason
    assert reply(endpoint)[2].finish_reason is expected


def test_a_stop_ends_the_reply_with_what_arrived(replay):
    state, endpoint = replay
    state.delay_s = 0.05
    seen: list[TokenEvent] = []
    remote = attach_openai(endpoint)
    events = []
    for event in remote.reply([Message("user", "hi")], GenerationConfig(max_tokens=8), False, lambda: len(seen) >= 2):
        events.append(event)
        if isinstance(event, TokenEvent):
            seen.append(event)
    stats = events[-1]
    assert (stats.finish_reason, stats.text, stats.generated_tokens) == (FinishReason.CANCELLED, "Certainly!", 2)
    assert (stats.drafted, stats.accepted) == (0, 0)  # vLLM counts a round once it is done


def test_an_error_chunk_is_the_servers_sentence(replay):
    state, endpoint = replay
    state.error_after = 3
    with pytest.raises(RemoteError) as err:
        reply(endpoint)
    assert str(err.value) == (
        f"{endpoint.host} stopped the reply with an error: The engine died: CUDA error: an illegal memory "
        "access was encountered"
    )


def test_a_dropped_connection_is_connection_lost(replay):
    state, endpoint = replay
    state.drop_after = 3
    remote = attach_openai(endpoint)
    kept = []
    with pytest.raises(ConnectionLost) as err:
        for event in remote.reply([Message("user", "hi")], GenerationConfig(max_tokens=8), False, lambda: False):
            kept.append(event.text)
    assert kept == DELTAS[:3]
    assert str(err.value) == (
        f"The connection to {endpoint.host} was lost mid-reply (the stream ended before the reply's finish); "
        "the text so far is kept."
    )


def test_any_other_openai_server_gives_text_only(replay):
    state, endpoint = replay
    state.vllm = False
    remote, tokens, stats = reply(endpoint, GenerationConfig(max_tokens=8, depth=2, stop=("\n\n",), ignore_eog=True))
    assert type(remote) is OpenAIRemote
    assert (remote.info.kind, remote.info.per_position, remote.info.describe()) == (
        "openai",
        False,
        f"an OpenAI-compatible server at {endpoint.host}",
    )
    assert remote.info.why_uncoloured == (
        "This OpenAI-compatible server reports neither which tokens were drafted nor any draft totals: "
        "tokens are not coloured."
    )
    assert "".join(t.text for t in tokens) == stats.text == "".join(DELTAS)
    assert {t.token_id for t in tokens} == {-1}
    assert (stats.drafted, stats.accepted, stats.rounds, stats.acceptance_per_position, stats.message) == (0, 0, 0, (), "")  # fmt: skip
    assert (stats.prompt_tokens, stats.generated_tokens) == (36, 8)
    # OpenAI's own fields only: a strict server refuses others
    assert state.bodies[0] == openai_body(stop=["\n\n"])
    assert remote.read_thermal().source == "This server does not report its machine's thermal state"


def test_nothing_listening_is_unreachable():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(Unreachable) as err:
        attach_openai(Endpoint(f"http://127.0.0.1:{port}"))
    assert str(err.value) == (
        f"Could not reach 127.0.0.1:{port}: nothing is listening there (is the server running, and the ssh "
        "tunnel open?)."
    )


def test_a_server_that_is_not_openai_compatible_is_told_apart():
    class NotFound(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(404)
            self.send_header("Content-Length", "22")
            self.end_headers()
            self.wfile.write(b'{"detail":"Not Found"}')

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host = f"127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(RemoteError) as err:
            attach_openai(Endpoint(f"http://{host}"))
    finally:
        server.shutdown()
        server.server_close()
    assert str(err.value) == (
        f"{host} answers, but not as an OpenAI-compatible server (GET /v1/models: {host} has no /v1/models "
        "(404): Not Found)."
    )


def test_a_server_that_writes_past_max_tokens_is_cut_there(replay):
    _, endpoint = replay
    remote = attach_openai(endpoint)
    events = []
    with pytest.raises(RemoteError, match="sent more than the 2 tokens asked for"):
        for event in remote.reply([Message("user", "hi")], GenerationConfig(max_tokens=2), False, lambda: False):
            events.append(event)
    assert len(events) == 2 + 2  # max_tokens and the slack, then the refusal
