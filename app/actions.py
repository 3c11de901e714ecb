"""The message actions: copy a reply, regenerate it, edit and resend, stop, delete.

Each is a QAction with its shortcut, listed in `window.message_actions` (for menus), and an
entry of the transcript's context menu over a message. Without a message named, an action
takes the message holding the transcript's text cursor (clicked into), else the latest one.
A regenerated reply is kept beside the earlier ones: the transcript shows one of them, marked
"reply 2 of 2", and the bar above the legend (or Ctrl+[ and Ctrl+]) steps between them.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPoint, Qt
from PySide6.QtGui import QAction, QKeySequence, QTextCursor
from PySide6.QtWidgets import QApplication, QHBoxLayout, QLabel, QMenu, QPushButton, QWidget

from app import exports, replaystore, storeedits
from app.messagetags import message_at, message_at_position
from app.store import StoredMessage
from engine import DraftlightError

MESSAGE_ENTRY = "message"  # the data of the context menu's entries for the message (after the standard ones)
NO_REPLAY = (
    "This reply has no rounds to step through: replies from a server, replies cut by an error and "
    "replies saved before this version keep only their tokens."
)
EDITING = "Editing your message: {key} resends it and removes what came after it; Esc cancels."


def alternative_note(message: StoredMessage, note: str) -> str:
    """The note under a reply, with which alternative it is where it has several."""
    if message.alternatives < 2:
        return note
    mark = f"reply {message.alternative} of {message.alternatives}"
    return f"{mark} · {note}" if note else mark


class AlternativesBar(QWidget):
    """'Reply 2 of 2' with previous and next buttons, shown while the last reply has alternatives."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(4, 0, 4, 0)
        self.previous = QPushButton("‹ Previous reply")
        self.label = QLabel()
        self.label.setObjectName("alternatives_label")
        self.next = QPushButton("Next reply ›")
        row.addWidget(self.previous)
        row.addWidget(self.label)
        row.addWidget(self.next)
        row.addStretch(1)
        self.hide()

    def show_for(self, message: StoredMessage | None) -> None:
        if message is None or message.role != "assistant" or message.alternatives < 2:
            self.hide()
            return
        self.label.setText(f"Reply {message.alternative} of {message.alternatives}")
        self.previous.setEnabled(message.alternative > 1)
        self.next.setEnabled(message.alternative < message.alternatives)
        self.show()


class MessageActions(QObject):
    """Part of MainWindow: the actions on its messages, and their state (editing, regenerating)."""

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self.editing: int | None = None  # the user message being edited, resent from on Enter
        self.draft = ""  # what the message box held before editing began
        self.regenerating: int | None = None  # the group of the reply being regenerated
        make = self._action
        self.copy = make("Copy reply", "Ctrl+Shift+C", lambda: self.copy_message())
        self.regenerate = make("Regenerate reply", "Ctrl+R", lambda: self.regenerate_reply())
        self.edit = make("Edit and resend", "Ctrl+E", lambda: self.edit_message())
        self.stop = make("Stop", QKeySequence.StandardKey.Cancel, self.escape)
        self.delete = make("Delete message", None, lambda: self.delete_message())
        self.previous = make("Previous reply", "Ctrl+[", lambda: self.step_alternative(-1))
        self.next = make("Next reply", "Ctrl+]", lambda: self.step_alternative(1))
        self.step_through = make("Step through reply in teaching mode", "Ctrl+Shift+T", lambda: self.teach_reply())
        self.export_replay = make("Export reply as replay…", None, lambda: self.export_reply())
        self.stop.setEnabled(False)
        # Delete and Backspace delete the message clicked into, while the transcript has the focus.
        self.delete.setShortcuts([QKeySequence(Qt.Key.Key_Delete), QKeySequence(Qt.Key.Key_Backspace)])
        self.delete.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        window.removeAction(self.delete)
        window.transcript.addAction(self.delete)
        self.actions = [self.copy, self.regenerate, self.edit, self.stop, self.delete, self.previous, self.next]
        self.actions += [self.step_through, self.export_replay]

        self.bar = AlternativesBar()
        self.bar.previous.clicked.connect(lambda: self.step_alternative(-1))
        self.bar.next.clicked.connect(lambda: self.step_alternative(1))
        pane = window.transcript.parentWidget().layout()
        pane.insertWidget(pane.indexOf(window.transcript) + 1, self.bar)

        window.transcript.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        window.transcript.customContextMenuRequested.connect(self._context_menu)
        window.input.installEventFilter(self)  # Up in an empty box edits the last message
        window.stop_button.installEventFilter(self)  # Esc stops while Stop can be pressed
        window.reply_finished.connect(self._reply_finished)

    def _action(self, text: str, shortcut, slot) -> QAction:
        action = QAction(text, self.window)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        action.triggered.connect(slot)
        if action.shortcutContext() == Qt.ShortcutContext.WindowShortcut:
            self.window.addAction(action)  # its shortcut works with no menu bar to hold it
        return action

    # ---- which message ----
    def _messages(self) -> list[StoredMessage]:
        return self.window.store.messages(self.window.conversation_id)

    def _pick(self, message_id: int | None, roles: tuple[str, ...]) -> StoredMessage | None:
        """The message named, or the one clicked into, or the latest of these roles."""
        messages = self._messages()
        transcript = self.window.transcript
        if message_id is None and transcript.hasFocus():
            message_id = message_at_position(transcript, transcript.textCursor().position())
        if message_id is not None:
            return next((m for m in messages if m.id == message_id and m.role in roles), None)
        return next((m for m in reversed(messages) if m.role in roles), None)

    def _last_reply(self) -> StoredMessage | None:
        messages = [m for m in self._messages() if m.role != "error"]
        return messages[-1] if messages and messages[-1].role == "assistant" else None

    def _busy(self, doing: str) -> bool:
        if self.window.streaming:
            self.window._say(f"A reply is streaming: stop it (Esc) before you {doing}.")
            return True
        return False

    # ---- the actions ----
    def copy_message(self, message_id: int | None = None) -> None:
        message = self._pick(message_id, ("assistant", "user", "error"))
        if message is None:
            self.window._say("There is no reply to copy yet.")
            return
        QApplication.clipboard().setText(message.content)
        self.window._say("Copied the reply." if message.role == "assistant" else "Copied the message.")

    def regenerate_reply(self, message_id: int | None = None) -> None:
        """Ask again for the last reply; the earlier one is kept as an alternative with its figures."""
        w = self.window
        last = self._last_reply()
        said = [m for m in self._messages() if m.role != "error"]
        if message_id is None and said and said[-1].role == "user":  # a reply that failed before it began
            if w._can_reply():
                w._request_reply(w.engine_messages())
            return
        if last is None or (message_id is not None and message_id != last.id):
            w._say("Only the last reply can be regenerated: edit and resend an earlier message instead.")
            return
        if not w._can_reply():
            return
        messages = w.engine_messages()
        if messages and messages[-1].role == "assistant":
            messages.pop()  # the reply being regenerated: kept, not sent
        w.transcript.drop_last_reply()  # the new reply streams where this one was
        w._request_reply(messages)
        self.regenerating = last.group
        storeedits.add_alternative(w.store, last.id, w.reply.message_id)

    def edit_message(self, message_id: int | None = None) -> None:
        """Put a message of yours in the box; Enter resends it from there."""
        message = self._pick(message_id, ("user",))
        if message is None or self._busy("edit a message"):
            return
        if self.editing is None:
            self.draft = self.window.input.toPlainText()
        self.editing = message.id
        self.window.input.setPlainText(message.content)
        self.window.input.setFocus()
        self.window.input.moveCursor(QTextCursor.MoveOperation.End)
        self.stop.setEnabled(True)
        self.window._say(EDITING.format(key=self.window.input.send_chord()))

    def resend_edited(self) -> None:
        """Called as an edited message is sent: the conversation is cut where it was."""
        if self.editing is None:
            return
        storeedits.truncate_from(self.window.store, self.window.conversation_id, self.editing)
        self.editing, self.draft = None, ""
        self._update_stop()
        self.window.open_conversation(self.window.conversation_id)

    def cancel_edit(self) -> None:
        if self.editing is not None:
            self.editing = None
            self.window.input.setPlainText(self.draft)
            self._update_stop()
            self.window._say("")

    def escape(self) -> None:
        if self.window.streaming:
            self.window.stop()
        else:
            self.cancel_edit()

    def delete_message(self, message_id: int | None = None) -> None:
        message = self._pick(message_id, ("assistant", "user", "error"))
        if message is None or self._busy("delete a message"):
            return
        what = {"user": "the deletion of your message", "error": "the deletion of the error"}.get(
            message.role, "the deletion of the reply"
        )
        self.window.edits.delete_messages(
            lambda: storeedits.delete_message(self.window.store, self.window.conversation_id, message.id), what
        )
        if self.editing is not None and not any(m.id == self.editing for m in self._messages()):
            self.cancel_edit()
        self.window.open_conversation(self.window.conversation_id)
        said = "Deleted your message and its reply." if message.role == "user" else "Deleted the reply."
        self.window._say(f"{said} Undo (Edit menu) brings it back.")

    def _replay(self, message_id: int | None):
        """The chosen reply's replay, or None with a sentence saying why there is none."""
        message = self._pick(message_id, ("assistant",))
        if message is None:
            self.window._say("There is no reply to step through yet.")
            return None, None
        try:
            replay = replaystore.replay_of(self.window.store, message.id)
        except DraftlightError as exc:
            self.window._say(str(exc))
            return None, None
        if replay is None:
            self.window._say(NO_REPLAY)
        return message, replay

    def teach_reply(self, message_id: int | None = None) -> None:
        """Open the reply's rounds in teaching mode: its drafts, verdicts and candidates, step by step."""
        _message, replay = self._replay(message_id)
        if replay is not None:
            self.window.open_teaching().show_replay(replay)

    def export_reply(self, message_id: int | None = None) -> None:
        message, replay = self._replay(message_id)
        if replay is not None:
            exports.export_replay_dialog(self.window, replay, f"reply {message.id}")

    def step_alternative(self, step: int) -> None:
        """Show the previous (-1) or next (+1) alternative of the last reply, and its figures."""
        last = self._last_reply()
        if last is None or last.alternatives < 2 or self._busy("switch replies"):
            return
        ids = storeedits.alternative_ids(self.window.store, last.group)
        chosen = ids[min(max(last.alternative - 1 + step, 0), len(ids) - 1)]
        if chosen != last.id:
            storeedits.show_alternative(self.window.store, chosen)
            self.window.open_conversation(self.window.conversation_id)
        self._show_figures()

    # ---- keeping up ----
    def refresh(self) -> None:
        """After the conversation is drawn: the alternatives bar follows its last reply."""
        self.bar.show_for(self._last_reply())

    def _show_figures(self) -> None:
        last = self._last_reply()
        stats = last.stats if last else None
        self.window.last_reply_stats = stats
        self.window._show_status(stats)

    def _reply_finished(self, _stats) -> None:
        if self.regenerating is None:
            return
        storeedits.keep_one_shown(self.window.store, self.regenerating)  # a reply that never began
        self.regenerating = None
        self.window.open_conversation(self.window.conversation_id)  # one reply shown, marked
        self._show_figures()

    def _update_stop(self) -> None:
        self.stop.setEnabled(self.window.stop_button.isEnabled() or self.editing is not None)

    def eventFilter(self, obj, event) -> bool:
        if obj is self.window.stop_button and event.type() == QEvent.Type.EnabledChange:
            self._update_stop()
        elif (
            obj is self.window.input
            and event.type() == QEvent.Type.KeyPress
            and event.key() == Qt.Key.Key_Up
            and event.modifiers() == Qt.KeyboardModifier.NoModifier
            and not self.window.input.toPlainText()
        ):
            self.edit_message()
            return True
        return super().eventFilter(obj, event)

    # ---- the mouse ----
    def menu_at(self, point: QPoint) -> QMenu:
        """The transcript's context menu at a viewport point: the selection's copy, then the message's actions."""
        transcript = self.window.transcript
        menu = transcript.createStandardContextMenu(transcript.viewport().mapToGlobal(point))
        mid = message_at(transcript, point)
        message = next((m for m in self._messages() if m.id == mid), None) if mid else None
        if message is None:
            return menu
        menu.addSeparator()
        entries = []
        if message.role == "assistant":
            entries.append(("Copy reply", lambda: self.copy_message(mid)))
            last = self._last_reply()
            if last is not None and last.id == mid:
                entries.append(("Regenerate reply", lambda: self.regenerate_reply(mid)))
                if message.alternatives > 1:
                    entries += [("Previous reply", lambda: self.step_alternative(-1))] * (message.alternative > 1)
                    entries += [("Next reply", lambda: self.step_alternative(1))] * (
                        message.alternative < message.alternatives
                    )
            if replaystore.has_replay(self.window.store, mid):
                entries.append(("Step through in teaching mode", lambda: self.teach_reply(mid)))
                entries.append(("Export as replay…", lambda: self.export_reply(mid)))
        else:
            entries.append(("Copy message", lambda: self.copy_message(mid)))
        if message.role == "user":
            entries.append(("Edit and resend", lambda: self.edit_message(mid)))
        entries.append(("Delete message", lambda: self.delete_message(mid)))
        for text, slot in entries:
            action = menu.addAction(text)
            action.setData(MESSAGE_ENTRY)
            action.triggered.connect(slot)
        return menu

    def _context_menu(self, point: QPoint) -> None:
        menu = self.menu_at(point)
        menu.exec(self.window.transcript.viewport().mapToGlobal(point))
        menu.deleteLater()
