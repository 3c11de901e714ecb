"""Which reply the charts show: the one streaming, or the one the user selects in the transcript.

A stored reply's figures come from its replay (its rounds) where it has one, else from its tokens
and totals; the conversation's replies on screen make the "all" series, so opening another
conversation, deleting a reply or regenerating one redraws the charts from the store.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QTextEdit

from app import replaystore
from app.chartmodel import ChartModel
from app.messagetags import message_at_position
from app.store import Store, StoredMessage
from engine import DraftlightError


def reply_events(store: Store, message: StoredMessage) -> list:
    """A stored reply's event stream as the charts read it: its rounds where they were kept."""
    try:
        replay = replaystore.replay_of(store, message.id) if message.id else None
    except DraftlightError:
        replay = None  # damaged rounds: the reply's own tokens and totals still chart
    if replay is not None:
        return list(replay.events())
    return [*message.tokens, message.stats] if message.stats is not None else list(message.tokens)


class ChartFeed:
    """Feeds the chart model from the store and follows the transcript's selected reply."""

    def __init__(self, store: Store, transcript: QTextEdit, model: ChartModel, streaming: Callable[[], bool]) -> None:
        self.store, self.transcript, self.model, self.streaming = store, transcript, model, streaming
        self.conversation_id = 0
        self.reply_ids: list[int] = []  # the conversation's replies on screen, oldest first
        self.events: list[list] = []
        self.selected: int | None = None  # the reply whose figures are drawn (an id), None: the latest
        transcript.cursorPositionChanged.connect(self.follow_cursor)

    def load(self, conversation_id: int) -> None:
        """Every reply of the conversation on screen: "all", and the latest reply's own figures."""
        replies = [m for m in self.store.messages(conversation_id) if m.role == "assistant" and m.id]
        self.conversation_id = conversation_id
        self.reply_ids = [m.id for m in replies]
        self.events = [reply_events(self.store, m) for m in replies]
        self.selected = self.selected if self.selected in self.reply_ids else None
        shown = self.reply_ids.index(self.selected) if self.selected is not None else None
        self.model.load(self.events, shown)

    def show(self, message_id: int) -> bool:
        """Reply `message_id`'s figures; False where it is not a reply of the conversation on screen."""
        if message_id not in self.reply_ids:
            return False
        self.selected = message_id
        self.model.show(self.events, self.reply_ids.index(message_id))
        return True

    def follow_cursor(self) -> None:
        """A click (or the keyboard) in a stored reply charts it; a streaming reply keeps the charts."""
        if self.streaming():
            return
        mid = message_at_position(self.transcript, self.transcript.textCursor().position())
        if mid is not None and mid != self.selected and mid in self.reply_ids:
            self.show(mid)

    def begin_live(self) -> None:
        """A reply starts streaming: its figures from now on, added to "all" as they come."""
        self.selected = None
        self.model.begin_message()
        self.model.shown = ""

    def end_live(self) -> None:
        """The streamed reply is stored: "all" and the selection read from the store again."""
        self.load(self.conversation_id)
