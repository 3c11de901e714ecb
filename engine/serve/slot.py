"""One generation at a time per model, a bounded queue behind it, and a reply that stops when
its client leaves.

The engine is synchronous; a reply runs on a thread of its own and hands its events to the
event loop. The slot is freed by that thread when the reply has really ended (a cancelled
reply ends after its round), so a second reply never runs beside the first.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass

from engine.events import Event, FinishReason, RunStats, TokenEvent
from engine.serve.protocol import RequestError

_END = object()


@dataclass
class Counters:
    replies: int = 0
    cancelled: int = 0
    refused_busy: int = 0


class Slot:
    """The model's one seat: `run` waits for it (up to `queue` waiting), then streams a reply."""

    def __init__(self, queue: int) -> None:
        self.queue = queue
        self.busy = False
        self.waiting = 0
        self.counters = Counters()
        self._free: asyncio.Event | None = None

    async def run(self, reply: Callable[[Callable[[], bool]], Iterator[Event]]) -> AsyncIterator[Event | Exception]:
        """Wait for the seat, then yield the reply's events (or the exception that ended it).

        `reply(cancelled)` builds the engine's event iterator; leaving the loop early (a client
        gone) sets `cancelled`, and the engine stops after its round.
        """
        loop = asyncio.get_running_loop()
        if self._free is None:
            self._free = asyncio.Event()
            self._free.set()
        if self.busy and self.waiting >= self.queue:
            self.counters.refused_busy += 1
            raise RequestError(
                429,
                f"The server is busy: one reply is running and {self.waiting} more are waiting (the queue holds "
                f"{self.queue}); try again shortly.",
                "rate_limit_error",
            )
        self.waiting += 1
        try:
            while self.busy:
                self._free.clear()
                await self._free.wait()
        finally:
            self.waiting -= 1
        self.busy = True
        events: asyncio.Queue = asyncio.Queue()
        stop = threading.Event()

        def work() -> None:
            pending: list = []
            try:
                for last in reply(stop.is_set):
                    pending.append(last)
                    # A round's tokens travel with their round: one wake-up of the event loop a
                    # round, not one an event, which on a small box takes cores from the decode.
                    if not isinstance(last, TokenEvent):
                        if isinstance(last, RunStats) and last.finish_reason is FinishReason.CANCELLED:
                            loop.call_soon_threadsafe(self._count_cancelled)  # before the client sees the stats
                        loop.call_soon_threadsafe(events.put_nowait, pending)
                        pending = []
            except Exception as exc:  # the client reads it as a sentence; the server goes on
                loop.call_soon_threadsafe(events.put_nowait, [*pending, exc])
                pending = []
            finally:
                loop.call_soon_threadsafe(self._release)
                loop.call_soon_threadsafe(events.put_nowait, [*pending, _END])

        self.counters.replies += 1
        threading.Thread(target=work, name="draftlight-reply", daemon=True).start()
        try:
            while True:
                for event in await events.get():
                    if event is _END:
                        return
                    yield event
        finally:
            stop.set()  # a client that left, or a reply that ended: either way nothing more is wanted

    def _count_cancelled(self) -> None:
        self.counters.cancelled += 1

    def _release(self) -> None:
        self.busy = False
        if self._free is not None:
            self._free.set()

    def status(self) -> dict:
        return {"busy": self.busy, "waiting": self.waiting, **self.counters.__dict__}
