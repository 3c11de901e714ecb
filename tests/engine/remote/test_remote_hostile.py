"""The remote client against hostile servers (tests/engine/remote/hostile_servers.py): a Stop
that a slow cancel answer cannot hold, an event with no end, a JSON answer that trickles,
readings that are not numbers, a stream that is not an event stream."""

from __future__ import annotations

import pytest

from engine import Cancelled, GenerationConfig, Message, RemoteError, ThermalState, Unreachable, attach_remote
from engine.remote.connection import _sse_items
from engine.remote.draftlight import DraftlightRemote, thermal_of
from tests.engine.remote.hostile_servers import BOX, Behaviour, HostileServer, box_line, sse, trickle

KEEP_ALIVE = b": keep-alive\n\n"
MAX_EVENT, LINE_COST = 1 << 24, 64  # engine.remote.connection's: an event's cap, and what each line costs of it


def reply(remote, cancelled=lambda: False, max_tokens: int = 8):
    return list(remote.reply([Message("user", "hi")], GenerationConfig(max_tokens=max_tokens), False, cancelled))


def test_a_stop_ends_within_its_grace_however_slowly_the_cancel_is_answered():
    def stream():
        yield box_line()
        yield from trickle(KEEP_ALIVE, 0.01, 3000)()  # 30 s of keep-alives, never the stats

    behaviour = Behaviour(stream=stream, cancel=trickle(b" ", 0.01, 3000))  # the cancel answer: 30 s of spaces
    with HostileServer(behaviour) as server:
        remote = attach_remote(server.endpoint)
        assert isinstance(remote, DraftlightRemote)
        remote.stop_grace_s, remote.cancel_timeout_s = 1.0, 0.5
        with pytest.raises(Cancelled, match="Stopped before the server sent the reply's figures"):
            reply(remote, cancelled=lambda: remote.box.get("reply") == "r1")
    assert "cancel" not in behaviour.finished, "the Stop waited for the server to end its cancel answer"
    assert "stream" not in behaviour.finished


class Endless:
    """A response that is one event's `data:` lines with no blank line, up to `cap` lines."""

    def __init__(self, cap: int) -> None:
        self.cap, self.lines = cap, 0

    def readline(self, limit: int) -> bytes:
        self.lines += 1
        return b"data: x\n" if self.lines <= self.cap else b""


def test_an_event_that_never_ends_is_cut_at_its_cap():
    cap = 10 * MAX_EVENT // LINE_COST
    endless = Endless(cap)
    with pytest.raises(ValueError, match="an event longer than 16 MiB"):
        list(_sse_items(endless))
    assert endless.lines <= MAX_EVENT // LINE_COST + 1

    def stream():
        yield box_line()
        for _ in range(20):  # 2,000,000 lines, 16 MB: the event's cap counts what Python keeps per line
            yield b"data: x\n" * 100_000

    with (
        HostileServer(Behaviour(stream=stream)) as server,
        pytest.raises(RemoteError, match="sent an event longer than 16 MiB; the reply was cut there"),
    ):
        reply(attach_remote(server.endpoint))


def test_a_json_answer_that_trickles_ends_within_its_timeout():
    with HostileServer(Behaviour(json_body=trickle(b" ", 0.01, 3000))) as server:
        with pytest.raises(Unreachable, match=r"did not answer /draftlight/v1/box within 0\.5 s"):
            server.endpoint.request("GET", "/draftlight/v1/box", timeout=0.5)
        assert "/draftlight/v1/box" not in server.behaviour.finished


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), True, 1e300, "71"])
def test_thermal_readings_that_are_not_readings_are_unknown(bad):
    reading = thermal_of({"machine": "m", "thermal": {"state": "fair", "temperature_c": bad, "cpu_speed_limit": bad}})
    assert (reading.state, reading.temperature_c, reading.cpu_speed_limit) == (ThermalState.FAIR, None, None)


def test_a_box_with_nan_over_the_wire_reads_as_unknown_figures():
    box = {**BOX, "thermal": {"state": "serious", "temperature_c": float("nan"), "cpu_speed_limit": float("inf")}}
    with HostileServer(Behaviour(box=box)) as server:
        reading = attach_remote(server.endpoint).read_thermal()
    assert (reading.state, reading.temperature_c, reading.cpu_speed_limit) == (ThermalState.SERIOUS, None, None)


@pytest.mark.parametrize("kind", ["draftlight", "llama-server", "vllm"])
def test_a_stream_that_is_not_an_event_stream_is_refused(kind):
    def stream():
        yield box_line()
        yield sse({"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]})
        yield b"<html><body>Welcome to the captive portal</body></html>\n\n"

    behaviour = Behaviour(kind=kind, stream=stream, content_type="text/html; charset=utf-8")
    with (
        HostileServer(behaviour) as server,
        pytest.raises(RemoteError, match=r"answered /.* with text/html; charset=utf-8, not an event stream"),
    ):
        reply(attach_remote(server.endpoint))


def test_counts_that_are_infinite_are_not_counts():
    from engine.remote.openai_chat import _count
    from engine.remote.openai_servers import _milliseconds

    for bad in (float("inf"), float("nan"), -1, True):
        assert _count({"n": bad}, "n") is None and _milliseconds({"n": bad}, "n") is None
    assert (_count({"n": 7.0}, "n"), _milliseconds({"n": 2}, "n")) == (7, 2.0)


@pytest.mark.parametrize("choices", [7, "abc", {"0": {}}, True])
def test_choices_that_are_not_a_list_carry_no_text(choices):
    from engine.remote.openai_chat import Reply

    assert Reply(started=0.0).take({"choices": choices}, "h") == []
