"""`draftlight serve` as a remote engine: a real server child on localhost, read back into the
engine's own events, token for token what the engine gives here; a Stop that ends the reply
with its figures; sentences for every way a server can fail to be there."""

from __future__ import annotations

import io
import time

import pytest

from engine import (
    Cancelled,
    ConnectionLost,
    DraftlightError,
    Endpoint,
    FinishReason,
    GenerationConfig,
    Message,
    RemoteError,
    RoundEvent,
    RunStats,
    ThermalState,
    TokenEvent,
    TokenKind,
    Unreachable,
    attach_remote,
)
from engine.remote.connection import _sse_items
from engine.remote.draftlight import DraftlightRemote, check_line, thermal_of
from engine.replayschema import Invalid
from tests.served import Served, free_port

PROMPT = "Write a bubble sort in C++."


@pytest.fixture(scope="module")
def served(target_path, drafter_path):
    server = Served(target_path, drafter_path, "--depth", "2")
    yield server
    server.stop()


def key(e) -> tuple:
    """What must match between an event streamed from the server and one made here."""
    return type(e).__name__, getattr(e, "token_id", None), getattr(e, "kind", None), getattr(e, "round_index", None)


def reply(remote, max_tokens: int, cancelled=lambda: False, text: str = PROMPT):
    return list(remote.reply([Message("user", text)], GenerationConfig(max_tokens=max_tokens, depth=2), False,
                              cancelled))  # fmt: skip


def test_the_remote_reply_is_the_engines_own_token_for_token(served, engine):
    remote = attach_remote(Endpoint(served.url))
    assert isinstance(remote, DraftlightRemote)
    assert remote.info.kind == "draftlight" and remote.info.provenance and remote.info.thermal
    assert remote.info.model == "qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert remote.info.describe().startswith("draftlight serve on ") and served.url.endswith(remote.info.host)
    events = reply(remote, 24)
    prompt = engine.prompt_ids([Message("user", PROMPT)])
    here = list(engine.stream(prompt, GenerationConfig(max_tokens=24, depth=2)))
    assert [key(e) for e in events] == [key(e) for e in here]
    got, want = events[-1], here[-1]
    assert isinstance(got, RunStats) and got.finish_reason is FinishReason.MAX_TOKENS
    assert (got.text, got.token_ids, got.drafted, got.accepted) == (
        want.text,
        want.token_ids,
        want.drafted,
        want.accepted,
    )
    assert got.accepted_per_position == want.accepted_per_position and got.drafted > 0
    assert thermal_of(remote.box).state in set(ThermalState)


def test_a_stop_mid_reply_ends_it_after_the_round_with_its_figures(served):
    remote = attach_remote(Endpoint(served.url))
    seen = []

    def cancelled() -> bool:
        return len(seen) >= 1 and time.monotonic() > seen[0] + 1.0

    events = []
    for event in remote.reply([Message("user", "Write a long essay about sorting.")],
                               GenerationConfig(max_tokens=400, depth=2), False, cancelled):  # fmt: skip
        events.append(event)
        if isinstance(event, TokenEvent) and not seen:
            seen.append(time.monotonic())
    stats = events[-1]
    assert isinstance(stats, RunStats) and stats.finish_reason is FinishReason.CANCELLED
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    assert 0 < len(tokens) < 400 and stats.token_ids == tuple(t.token_id for t in tokens)
    assert remote.endpoint.get_json("/draftlight/v1/status")["cancelled"] >= 1
    assert isinstance(reply(remote, 4)[-1], RunStats)  # the server answers the next one


def test_a_stop_before_the_first_line_is_cancelled_and_the_server_goes_on(served):
    remote = attach_remote(Endpoint(served.url))
    with pytest.raises(Cancelled):
        reply(remote, 400, cancelled=lambda: True)
    assert isinstance(reply(remote, 4)[-1], RunStats)


def test_servers_that_are_not_there_are_sentences():
    port = free_port()
    with pytest.raises(Unreachable, match=rf"Could not reach 127.0.0.1:{port}: nothing is listening there"):
        attach_remote(Endpoint(f"http://127.0.0.1:{port}"))
    for bad in ("127.0.0.1:8765", "ftp://host", "http://", "http://host:99999"):
        with pytest.raises(DraftlightError, match=r"server address|port that is not a number"):
            Endpoint(bad)


def test_a_server_killed_mid_reply_is_a_lost_connection(smollm_path):
    server = Served(smollm_path, "ngram", "--depth", "2")
    try:
        remote = attach_remote(Endpoint(server.url))
        tokens = []
        with pytest.raises(ConnectionLost, match=rf"The connection to 127.0.0.1:{server.port}"):
            for event in remote.reply([Message("user", "Write a long story.")],
                                       GenerationConfig(max_tokens=400, ignore_eog=True), False, lambda: False):  # fmt: skip
                tokens.append(event)
                if len(tokens) == 10:
                    server.kill()
        assert len(tokens) >= 10
    finally:
        server.stop()


def test_event_stream_lines_are_read_as_the_format_says():
    raw = (b": keep-alive\n\ndata: {\"a\": 1}\n\nevent: x\ndata: {\"b\":\ndata: 2}\n\n"
           b"data: [DONE]\r\n\r\ndata: not json\n\n")  # fmt: skip
    assert list(_sse_items(io.BytesIO(raw))) == [{"a": 1}, {"b": 2}, "[DONE]", "not json"]
    with pytest.raises(ValueError, match="ended inside an event"):
        list(_sse_items(io.BytesIO(b'data: {"a": 1}\n')))


def test_a_box_line_of_the_wrong_shape_reads_as_unknown():
    assert thermal_of({}).state is ThermalState.UNKNOWN
    odd = thermal_of({"machine": "m", "thermal": {"state": "melting", "temperature_c": "hot", "source": 3}})
    assert (odd.state, odd.temperature_c, odd.source) == (ThermalState.UNKNOWN, None, "m: not reported")
    fine = thermal_of({"machine": "m", "thermal": {"state": "fair", "temperature_c": 71.5, "source": "pmset"}})
    assert (fine.state, fine.temperature_c, fine.source) == (ThermalState.FAIR, 71.5, "m: pmset")


def test_a_servers_lines_are_bounded_before_anything_counts_them():
    good = RoundEvent(round_index=3, drafted=2, accepted=1, draft_tokens=(5, 6), draft_confidence=(0.9, 0.4)).to_json()
    check_line(good)
    for bad, says in (
        ({**good, "drafted": 10**9}, "round.drafted is 1000000000, outside 0..64"),
        ({**good, "accepted": 3}, "round.accepted is 3, outside 0..2"),
        ({**good, "draft_confidence": [1.5, 0.1]}, r"round.draft_confidence\[0\] is 1.5"),
        ({"type": "token", "round": 0, "token_id": -5}, "token.token_id is -5"),
        ({"type": "stats"}, "stats has no"),
    ):
        with pytest.raises(Invalid, match=says):
            check_line(bad)


def hostile_server(lines: list[dict]):
    """A server that answers as ours does, then streams `lines` (whatever they say)."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    box = {"model": "m", "runtime": "r", "machine": "evil", "platform": "x", "thermal": {"state": "nominal"}}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            body = json.dumps(box).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for line in [{"type": "box", "reply": "r1", **box}, *lines]:
                self.wfile.write(f"data: {json.dumps(line)}\n\n".encode())

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server, Endpoint(f"http://127.0.0.1:{server.server_address[1]}")


def test_a_server_that_says_too_much_is_refused_in_words():
    token = TokenEvent(token_id=7, text="a", kind=TokenKind.PLAIN, round_index=0, position=0, target_prob=0.5)
    server, endpoint = hostile_server([token.to_json()] * 5)
    try:
        remote = attach_remote(endpoint)
        assert remote.info.machine == "evil (x)"
        events = []
        with pytest.raises(RemoteError, match="sent more than the 2 tokens asked for"):
            for event in remote.reply([Message("user", "hi")], GenerationConfig(max_tokens=2), False, lambda: False):
                events.append(event)
        assert len(events) == 2
    finally:
        server.shutdown()
    huge = RoundEvent(round_index=0, drafted=1, accepted=0).to_json() | {"drafted": 10**9}
    server, endpoint = hostile_server([huge])
    try:
        with pytest.raises(RemoteError, match="sent an event this app cannot read"):
            reply(attach_remote(endpoint), 4)
    finally:
        server.shutdown()
