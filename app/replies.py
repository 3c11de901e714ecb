"""A streaming reply on its way to disk: a row begun with the request, tokens as they arrive.

The row stays marked interrupted until the reply ends, so an app that is killed or closed
mid-reply shows it on the next start as cut short, with every token's provenance.
"""

from __future__ import annotations

import time

from app import replaystore
from app.store import Store, StoredMessage
from engine import Replay, RunStats, TokenEvent

# How often a streaming reply reaches the disk: a kill loses at most this much of it, and
# a write (one small transaction in WAL mode) stays far below a round's time.
WRITE_EVERY_S = 0.25


class ReplyWriter:
    """The reply now streaming, written to the store in batches."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.conversation_id = 0
        self.message_id = 0
        self.tokens: list[TokenEvent] = []  # every token of the reply so far
        self._unwritten: list[TokenEvent] = []
        self._last_write = 0.0
        self.replay: Replay | None = None  # the worker's record of a local reply, just before its stats

    def begin(self, conversation_id: int) -> None:
        self.conversation_id = conversation_id
        self.message_id = self.store.begin_reply(conversation_id)
        self.tokens, self._unwritten, self._last_write, self.replay = [], [], 0.0, None

    def add(self, tokens: list[TokenEvent]) -> None:
        self.tokens.extend(tokens)
        self._unwritten.extend(tokens)
        if time.monotonic() - self._last_write >= WRITE_EVERY_S:
            self.flush()

    def say_above(self, line: str) -> None:
        """The line above the reply (the oldest turns its prompt left out): on disk with it at once."""
        self.store.set_above(self.message_id, line)

    def flush(self) -> None:
        if self._unwritten:
            self.store.append_reply(self.message_id, self._unwritten)
            self._unwritten = []
        self._last_write = time.monotonic()

    def finish(self, stats: RunStats, stopped: bool) -> None:
        """The reply ended (finished, stopped or context full): its final row."""
        message = StoredMessage("assistant", stats.text, list(self.tokens), stats, stopped)
        message_id = self.store.finish_reply(self.message_id, self.conversation_id, message)
        if self.replay is not None:
            replaystore.keep(self.store, message_id, self.replay)
        self._done()

    def fail(self) -> None:
        """An error ended the reply: keep what arrived as a stopped reply, or drop an empty row."""
        if self.tokens:
            text = "".join(t.text for t in self.tokens)
            message = StoredMessage("assistant", text, list(self.tokens), None, True)
            self.store.finish_reply(self.message_id, self.conversation_id, message)
        else:
            self.store.drop_reply(self.message_id)
        self._done()

    def _done(self) -> None:
        self.message_id, self._unwritten, self.replay = 0, [], None
