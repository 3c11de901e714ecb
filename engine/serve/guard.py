"""What the server does about peers that do not behave: deadlines and closed connections.

uvicorn's own settings come first (its h11 head-size limit, keep-alive timeout and
connection limit, set in server.py); these add what it lacks:
  - `Deadlines.protocol()`: uvicorn's h11 protocol with a deadline for each request's head
    (a silent socket, or a head sent a byte at a time, is closed) and one for a client that
    stops reading what it asked for;
  - `close_refused`: a request refused before its body was read has its connection closed
    after the answer, so that a body that never ends is not read on for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

# Connections a refused request's unread body may still be read from, so that a client that
# is merely sending a large body reads the refusal instead of a reset connection.
DRAIN_BYTES = 1 << 20
DRAIN_S = 1.0


@dataclass(frozen=True)
class Deadlines:
    """How long a peer may take (seconds); `ServeConfig` carries them."""

    head_s: float = 10.0  # a request's line and headers: one packet from any real client
    body_s: float = 30.0  # a request's body (1 MiB by default: 35 KB/s is plenty)
    keep_alive_s: int = 5  # an idle connection between requests (uvicorn's own setting)
    stalled_reader_s: float = 30.0  # a client whose socket accepts nothing of its reply

    def protocol(self) -> type[H11Protocol]:
        """uvicorn's h11 protocol with these deadlines."""
        return type("DeadlineH11Protocol", (_DeadlineH11,), {"head_s": self.head_s, "stalled_s": self.stalled_reader_s})


class _DeadlineH11(H11Protocol):
    head_s = 10.0
    stalled_s = 30.0
    _head_timer: asyncio.TimerHandle | None = None
    _stall_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._arm_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE and self._head_timer is not None:
            self._head_timer.cancel()  # the head has arrived
            self._head_timer = None

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm_head()  # the next request's head, however slowly its bytes come

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._stall_timer is None:
            self._stall_timer = self.loop.call_later(self.stalled_s, self._cut)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None

    def _arm_head(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_timer = self.loop.call_later(self.head_s, self._head_late)

    def _head_late(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()  # no request began: nothing to answer

    def _cut(self) -> None:
        self._stall_timer = None
        self.transport.abort()  # its buffered reply is dropped; the reply stops as for a client gone

    def _cancel(self) -> None:
        for timer in (self._head_timer, self._stall_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._stall_timer = None


def has_body(scope: dict) -> bool:
    """Whether the request's head announces a body (a chunked one, or a length above 0)."""
    headers = dict(scope.get("headers", ()))
    if b"transfer-encoding" in headers:
        return True
    length = headers.get(b"content-length", b"0").strip()
    return not length.isdigit() or int(length) > 0


def close_refused(app):
    """ASGI middleware: an answer sent before the request's body was read whole drains what
    arrives within DRAIN_S (up to DRAIN_BYTES) and closes the connection after it."""

    async def guarded(scope, receive, send) -> None:
        if scope["type"] != "http" or not has_body(scope):
            await app(scope, receive, send)
            return
        state = {"read": False, "gone": False}

        async def receive_noting():
            message = await receive()
            if message["type"] == "http.disconnect":
                state["gone"] = True
            elif not message.get("more_body", False):
                state["read"] = True
            return message

        async def drain() -> None:
            seen = 0
            while not state["read"] and not state["gone"] and seen <= DRAIN_BYTES:
                message = await receive_noting()
                seen += len(message.get("body", b""))

        async def send_closing(message) -> None:
            if message["type"] == "http.response.start" and not state["read"]:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(drain(), DRAIN_S)
                message = {**message, "headers": [*message.get("headers", ()), (b"connection", b"close")]}
            await send(message)

        await app(scope, receive_noting, send_closing)

    return guarded
