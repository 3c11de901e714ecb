"""`draftlight serve` as a remote engine: every token with its provenance, as if local.

The stream's first line names the reply and the server's box; then come the lines of
`draftlight chat --json --rounds`, read back into the engine's own events. A Stop asks the
server to end the reply after its round, so the reply still ends with its stats; a Stop
before the first line (the server still filling the prompt) closes the connection, which
the server takes as a Stop too.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Sequence

from engine.chat import Message
from engine.depth import AUTO
from engine.errors import Cancelled
from engine.events import Event, RunStats, TokenEvent, event_from_json
from engine.measure.thermal import ThermalReading, ThermalState
from engine.remote import RemoteInfo
from engine.remote.connection import ConnectionLost, Endpoint, RemoteError, Unreachable
from engine.replayschema import (
    MAX_DRAFTED,
    MAX_TOKEN_ID,
    ROUND_TIMES,
    Invalid,
    array,
    check_stats,
    check_token,
    integer,
    number,
)
from engine.speculative import GenerationConfig

STREAM = "/draftlight/v1/stream"
BOX = "/draftlight/v1/box"
CANCEL = "/draftlight/v1/cancel"
# After a Stop, how long the server may take to end its round and send the stats; past it the
# stream is closed, which stops the server too. Asking for the Stop takes at most
# CANCEL_TIMEOUT_S of it (the whole exchange, however slowly the server answers).
STOP_GRACE_S = 15.0
CANCEL_TIMEOUT_S = 5.0


class DraftlightRemote:
    """A `draftlight serve` at an endpoint."""

    stop_grace_s = STOP_GRACE_S
    cancel_timeout_s = CANCEL_TIMEOUT_S

    def __init__(self, endpoint: Endpoint, box: dict) -> None:
        self.endpoint = endpoint
        self.box = box
        self.info = RemoteInfo(
            kind="draftlight",
            host=endpoint.host,
            model=str(box.get("model", "?")),
            drafter=str(box.get("drafter") or ""),
            machine=_machine(box),
            thermal=True,
            per_position=True,
        )

    @classmethod
    def attach(cls, endpoint: Endpoint) -> DraftlightRemote | None:
        """Ours, if the server answers our box route; None where it is some other server."""
        try:
            box = endpoint.get_json(BOX)
        except RemoteError as exc:
            if exc.status in (404, 405):
                return None
            raise
        if not isinstance(box.get("model"), str) or "runtime" not in box:
            return None
        return cls(endpoint, box)

    def request_body(self, messages: Sequence[Message], config: GenerationConfig, thinking: bool) -> dict:
        sampling = config.sampling
        body = {
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "max_tokens": config.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "top_k": sampling.top_k,
            "stop": list(config.stop),
            "ignore_eos": config.ignore_eog,
            "stream": True,
            "draftlight": {
                "depth": "auto" if config.depth == AUTO else config.depth,
                "thinking": thinking,
                "p_min": config.p_min,
            },
        }
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        return body

    def reply(
        self, messages: Sequence[Message], config: GenerationConfig, thinking: bool, cancelled: Callable[[], bool]
    ) -> Iterator[Event]:
        """The reply's events, read back from the server's lines; ends with RunStats."""
        reply_id: str | None = None
        asked_stop_at: float | None = None

        def stop_now() -> bool:
            """Close the stream where the server cannot be asked, or has not answered a Stop in time."""
            nonlocal asked_stop_at
            if not cancelled():
                return False
            if reply_id is None:
                return True
            if asked_stop_at is None:
                asked_stop_at = time.monotonic()
                self._ask_stop(reply_id)
            return time.monotonic() - asked_stop_at > self.stop_grace_s

        ended, tokens = False, 0
        for item in self.endpoint.stream(STREAM, self.request_body(messages, config, thinking), stop_now):
            if not isinstance(item, dict):
                raise RemoteError(f"{self.endpoint.host} sent a line that is not one of Draftlight's events.")
            kind = item.get("type")
            if kind == "box":
                reply_id = item.get("reply") if isinstance(item.get("reply"), str) else None
                self.box = item
                continue
            if kind == "error":
                raise RemoteError(f"{self.endpoint.host}: {item.get('message', 'the reply failed')}", item.get("code"))
            try:
                check_line(item)  # a server's lines are untrusted: bounded before anything counts them
                event = event_from_json(item)
            except (Invalid, KeyError, TypeError, ValueError) as exc:
                raise RemoteError(f"{self.endpoint.host} sent an event this app cannot read ({exc}).") from None
            if isinstance(event, TokenEvent):
                tokens += 1
                if tokens > config.max_tokens:
                    raise RemoteError(
                        f"{self.endpoint.host} sent more than the {config.max_tokens:,} tokens asked for."
                    )
            yield event
            if isinstance(event, RunStats):
                ended = True
                break
        if ended:
            return
        if cancelled():
            raise Cancelled("Stopped before the server sent the reply's figures.")
        raise ConnectionLost(f"The connection to {self.endpoint.host} ended before the reply did.")

    def _ask_stop(self, reply_id: str) -> None:
        # The reply may have ended meanwhile, or the server gone: the stream says which.
        with contextlib.suppress(RemoteError, Unreachable):
            self.endpoint.request(
                "POST", CANCEL, {"reply": reply_id}, timeout=min(self.cancel_timeout_s, self.stop_grace_s)
            )

    def read_thermal(self) -> ThermalReading:
        """The server box's thermal state, as its own sampler reads it."""
        try:
            box = self.endpoint.get_json(BOX, timeout=3.0)
        except (RemoteError, Unreachable) as exc:
            return ThermalReading(ThermalState.UNKNOWN, f"{self.endpoint.host} did not answer: {exc}")
        self.box = box
        return thermal_of(box)


def check_line(d: dict) -> None:
    """A token, round or stats line within the bounds a replay file must keep (engine.replayschema)."""
    kind = d.get("type")
    if kind == "token":
        check_token(d, "token", integer(d.get("round"), "token.round"))
    elif kind == "round":
        drafted = integer(d.get("drafted"), "round.drafted", high=MAX_DRAFTED)
        integer(d.get("accepted"), "round.accepted", high=drafted)
        integer(d.get("round"), "round.round")
        integer(d.get("depth", 0), "round.depth", high=MAX_DRAFTED)
        for key in (*ROUND_TIMES, "round_ms"):
            number(d.get(key, 0.0), f"round.{key}")
        for i, token in enumerate(array(d.get("draft_tokens", []), "round.draft_tokens", MAX_DRAFTED)):
            integer(token, f"round.draft_tokens[{i}]", high=MAX_TOKEN_ID)
        for i, p in enumerate(array(d.get("draft_confidence", []), "round.draft_confidence", MAX_DRAFTED)):
            number(p, f"round.draft_confidence[{i}]", high=1.0)
    elif kind == "stats":
        check_stats(d)


def thermal_of(box: dict) -> ThermalReading:
    """The reading in a box line; a field of the wrong kind reads as unknown."""
    found = box.get("thermal")
    thermal = found if isinstance(found, dict) else {}
    try:
        state = ThermalState(thermal.get("state"))
    except ValueError:
        state = ThermalState.UNKNOWN
    source = thermal.get("source") if isinstance(thermal.get("source"), str) else "not reported"
    temperature = thermal.get("temperature_c")
    speed = thermal.get("cpu_speed_limit")
    return ThermalReading(
        state,
        f"{box.get('machine', 'the server')}: {source}"[:300],
        temperature_c=_reading(temperature, -100.0, 200.0),
        cpu_speed_limit=_reading(speed, 0.0, 1.0),  # a fraction of full speed
    )


def _reading(value: object, low: float, high: float) -> float | None:
    """A number a sensor can read (JSON's NaN and Infinity, and a true/false, are not)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) and low <= value <= high else None


def _machine(box: dict) -> str:
    name, system = box.get("machine"), box.get("platform")
    if not isinstance(name, str) or not name:
        return ""
    return f"{name} ({system})" if isinstance(system, str) and system else name
