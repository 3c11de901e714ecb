"""The Edit menu's standard part: Undo and Redo of deleted messages and conversations, and Cut,
Copy, Paste and Select All acting on the widget that has the focus.

Where a text box has the focus, Undo and Redo are its own (typing), as on a Mac. Elsewhere they
undo the latest deletion: a message (a failed reply among them) or a conversation. A message
deletion is kept as the conversation's rows before and after it, so undoing puts back exactly
what was there (an alternative's shown flag included); nothing is kept once the app closes.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QLineEdit, QPlainTextEdit, QTextEdit, QWidget

from app import storeedits

Key = QKeySequence.StandardKey
TEXT_WIDGETS = (QLineEdit, QPlainTextEdit, QTextEdit)


@dataclass(frozen=True)
class MessagesChange:
    """A conversation's message rows before and after a deletion: `what` names it ("the reply")."""

    conversation_id: int
    before: tuple[tuple, ...]
    after: tuple[tuple, ...]
    what: str


@dataclass(frozen=True)
class ConversationDeletion:
    conversation_id: int
    what: str


def message_rows(store, conversation_id: int) -> tuple[tuple, ...]:
    """Every column of the conversation's messages, in order: what a deletion is undone to."""
    try:
        sql = "SELECT * FROM messages WHERE conversation_id = ? ORDER BY id"
        return tuple(tuple(row) for row in store.db.execute(sql, (conversation_id,)).fetchall())
    except Exception as exc:  # a damaged or closed database: said by the store, nothing to undo to
        store._failed(exc, "read the conversation's messages")
        return ()


def put_rows(store, conversation_id: int, rows: tuple[tuple, ...], doing: str) -> bool:
    statements: list[tuple[str, tuple]] = [("DELETE FROM messages WHERE conversation_id = ?", (conversation_id,))]
    for row in rows:
        statements.append((f"INSERT INTO messages VALUES ({', '.join('?' * len(row))})", row))
    return storeedits._edit(store, doing, statements)


def editable(widget: QWidget | None) -> bool:
    """A text box the user types into (not the read-only transcript)."""
    return isinstance(widget, TEXT_WIDGETS) and not widget.isReadOnly()


class EditHistory:
    """Part of MainWindow: Undo/Redo of deletions, and the standard edit actions on the focused widget."""

    def __init__(self, window) -> None:
        self.window = window
        self.done: list[MessagesChange | ConversationDeletion] = []
        self.undone: list[MessagesChange | ConversationDeletion] = []

        def make(text: str, key: QKeySequence.StandardKey, slot) -> QAction:
            action = QAction(text, window)
            action.setShortcuts(QKeySequence.keyBindings(key))
            action.triggered.connect(slot)
            window.addAction(action)
            return action

        self.undo = make("Undo", Key.Undo, self.undo_last)
        self.redo = make("Redo", Key.Redo, self.redo_last)
        self.cut = make("Cut", Key.Cut, lambda: self._on_focus("cut"))
        self.copy = make("Copy", Key.Copy, lambda: self._on_focus("copy"))
        self.paste = make("Paste", Key.Paste, lambda: self._on_focus("paste"))
        self.select_all = make("Select All", Key.SelectAll, lambda: self._on_focus("selectAll"))
        self.actions = [self.undo, self.redo, self.cut, self.copy, self.paste, self.select_all]

    # ---- recording ----
    def delete_messages(self, delete, what: str) -> None:
        """Run `delete` (a change to the open conversation's messages), undoably."""
        store, cid = self.window.store, self.window.conversation_id
        before = message_rows(store, cid)
        delete()
        after = message_rows(store, cid)
        if before != after:
            self.done.append(MessagesChange(cid, before, after, what))
            self.undone.clear()

    def conversation_deleted(self, conversation_id: int, title: str) -> None:
        self.done.append(ConversationDeletion(conversation_id, f"the deletion of '{title}'"))
        self.undone.clear()

    def remove_failed_reply(self) -> None:
        """Take the latest failure out of the conversation, undoably: its error and the partial reply before it."""
        w = self.window
        if w.streaming:
            return
        messages = w.store.messages(w.conversation_id)
        errors = [i for i, m in enumerate(messages) if m.role == "error"]
        if not errors:
            return
        i = errors[-1]
        before = messages[i - 1] if i > 0 else None  # what arrived before the failure, kept as a stopped reply
        partial = before is not None and before.role == "assistant" and before.stopped and before.stats is None
        doomed = [m.id for m in messages[i - 1 if partial else i : i + 1]]
        self.delete_messages(
            lambda: [storeedits.delete_message(w.store, w.conversation_id, d) for d in doomed],
            "the removal of the failed reply",
        )
        w.open_conversation(w.conversation_id)
        w.retry_button.hide()
        w.remove_failed_button.hide()
        w._say("Removed the failed reply. Undo (Edit menu) brings it back.")

    # ---- undo and redo ----
    def undo_last(self) -> None:
        focus = self.window.focusWidget()
        if editable(focus):
            focus.undo()
            return
        if not self._busy():
            self._step(self.done, self.undone, undo=True)

    def redo_last(self) -> None:
        focus = self.window.focusWidget()
        if editable(focus):
            focus.redo()
            return
        if not self._busy():
            self._step(self.undone, self.done, undo=False)

    def _busy(self) -> bool:
        if self.window.streaming:
            self.window._say("A reply is streaming: stop it (Esc) before undoing or redoing.")
            return True
        return False

    def _step(self, source: list, target: list, undo: bool) -> None:
        w = self.window
        while source:
            change = source.pop()
            if isinstance(change, MessagesChange):
                rows = change.before if undo else change.after
                if not put_rows(w.store, change.conversation_id, rows, "undo" if undo else "redo"):
                    return
                w.open_conversation(change.conversation_id)
            elif not self._conversation(change.conversation_id, undo):
                continue  # brought back (or deleted) already, by the list's own Undo button
            target.append(change)
            w._say(f"{'Undid' if undo else 'Redid'} {change.what}.")
            return
        w._say("Nothing to undo." if undo else "Nothing to redo.")

    def _conversation(self, conversation_id: int, undo: bool) -> bool:
        """Bring back (undo) or delete again (redo); False where the list's own Undo button did it already."""
        tools, w = self.window.conversation_tools, self.window
        deleted = [cid for cid, _ in tools.deleted]
        if undo:
            return conversation_id in deleted and tools.bring_back(conversation_id)
        if conversation_id in deleted or conversation_id not in [c.id for c in w.store.conversations()]:
            return False
        tools.delete_conversation(conversation_id, record=False)
        return True

    # ---- the focused widget's own ----
    def _on_focus(self, method: str) -> None:
        focus = self.window.focusWidget()
        if focus is None:
            return
        if method == "copy" and focus is self.window.transcript and not focus.textCursor().hasSelection():
            self.window.message_tools.copy_message()  # nothing selected: the reply, as Copy reply does
            return
        if method in ("cut", "paste") and not editable(focus):
            return
        if hasattr(focus, method):
            getattr(focus, method)()
