"""The conversation list's actions: find, rename, delete with undo, export.

Ctrl+F focuses a search field above the list, which then shows only the conversations whose
title or messages hold the words. Delete (or Backspace) in the list deletes the conversation
chosen there; a notice under the list says so with an Undo button, until the app closes.
Rename edits the title in place (F2, or the context menu). The actions are listed in
`window.conversation_actions`, for menus.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPoint, Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QListWidgetItem, QMenu, QPushButton, QWidget

from app import exports, storeedits
from app.store import Conversation

TITLE_CHARS = 40  # a conversation's title from its first message: whole words, this long at most


def title_from(text: str) -> str:
    """A title from a message's first line: its words up to TITLE_CHARS, never cut mid-word."""
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if len(line) <= TITLE_CHARS:
        return line
    words, title = line.split(), ""
    for word in words:
        if len(title) + len(word) + 1 > TITLE_CHARS:
            break
        title = f"{title} {word}".strip()
    return f"{title or line[:TITLE_CHARS]}…"


class UndoNotice(QWidget):
    """'Deleted "title"' with an Undo button, under the conversation list."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.label = QLabel()
        self.label.setObjectName("deleted_notice")
        self.label.setWordWrap(True)
        self.undo = QPushButton("Undo")
        self.undo.setObjectName("undo_delete")
        row.addWidget(self.label, 1)
        row.addWidget(self.undo)
        self.hide()


class ConversationActions(QObject):
    """Part of MainWindow: what the conversation list does besides choosing one."""

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self.deleted: list[tuple[int, str]] = []  # (id, title), the latest last: what Undo brings back
        panel = window.conversations
        self.list = panel.items
        self.search = QLineEdit()
        self.search.setObjectName("search_conversations")
        self.search.setPlaceholderText("Search conversations")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(lambda _text: window._fill_conversation_list())
        self.search.installEventFilter(self)  # Esc clears it
        panel.layout().insertWidget(panel.layout().indexOf(self.list), self.search)
        self.undo_notice = UndoNotice()
        self.undo_notice.undo.clicked.connect(self.undo_delete)
        panel.layout().addWidget(self.undo_notice)

        self.find = self._action("Find in conversations", QKeySequence.StandardKey.Find, self.focus_search)
        window.addAction(self.find)
        self.rename = self._action("Rename conversation", Qt.Key.Key_F2, lambda: self.start_rename())
        self.delete = self._action("Delete conversation", None, lambda: self.delete_conversation())
        self.delete.setShortcuts([QKeySequence(Qt.Key.Key_Delete), QKeySequence(Qt.Key.Key_Backspace)])
        self.export_markdown = self._action("Export as markdown…", None, lambda: self._export(markdown=True))
        self.export_trace = self._action("Export token trace (JSONL)…", None, lambda: self._export(markdown=False))
        for action in (self.rename, self.delete):  # while the list has the focus: elsewhere these keys edit text
            action.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
            self.list.addAction(action)
        self.export_replays = self._action("Export replays…", None, lambda: self._export_replays())
        self.actions = [
            self.find,
            self.rename,
            self.delete,
            self.export_markdown,
            self.export_trace,
            self.export_replays,
        ]

        self.list.itemChanged.connect(self._renamed)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._context_menu)

    def _action(self, text: str, shortcut, slot) -> QAction:
        action = QAction(text, self.window)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        action.triggered.connect(slot)
        return action

    def visible(self, conversations: list[Conversation]) -> list[Conversation]:
        """What the list shows: all conversations, or those the search finds."""
        words = self.search.text().strip()
        return storeedits.search(self.window.store, words) if words else conversations

    def eventFilter(self, obj, event) -> bool:
        """Esc in the search field clears it (before any window shortcut on Esc sees the key)."""
        is_escape = event.type() in (QEvent.Type.ShortcutOverride, QEvent.Type.KeyPress) and (
            event.key() == Qt.Key.Key_Escape
        )
        if obj is self.search and is_escape and self.search.text():
            event.accept()
            if event.type() == QEvent.Type.KeyPress:
                self.search.clear()
            return event.type() == QEvent.Type.KeyPress
        return super().eventFilter(obj, event)

    def focus_search(self) -> None:
        self.search.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.search.selectAll()

    def _chosen_id(self, conversation_id: int | None) -> int:
        if conversation_id is not None:
            return conversation_id
        item = self.list.currentItem()
        return int(item.data(Qt.ItemDataRole.UserRole)) if item is not None else self.window.conversation_id

    def _item(self, conversation_id: int) -> QListWidgetItem | None:
        for row in range(self.list.count()):
            item = self.list.item(row)
            if int(item.data(Qt.ItemDataRole.UserRole)) == conversation_id:
                return item
        return None

    # ---- rename ----
    def start_rename(self, conversation_id: int | None = None) -> None:
        """Edit the title in place; Enter keeps it, Esc leaves it as it was."""
        item = self._item(self._chosen_id(conversation_id))
        if item is None:
            return
        self.list.blockSignals(True)  # a flag change is not a rename
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
        self.list.blockSignals(False)
        self.list.editItem(item)

    def rename_to(self, conversation_id: int, title: str) -> None:
        title = " ".join(title.split())
        if title and title != storeedits.title_of(self.window.store, conversation_id):
            self.window.store.rename(conversation_id, title)
        self.window._fill_conversation_list()

    def _renamed(self, item: QListWidgetItem) -> None:
        # The editor is still writing into this item: the list is refilled once it has let go.
        cid, title = int(item.data(Qt.ItemDataRole.UserRole)), item.text()
        QTimer.singleShot(0, lambda: self.rename_to(cid, title))

    # ---- delete and undo ----
    def delete_conversation(self, conversation_id: int | None = None, record: bool = True) -> None:
        """Delete (hide) a conversation until the app closes; Undo (the button, or Edit → Undo) brings it back."""
        w = self.window
        cid = self._chosen_id(conversation_id)
        if cid == w.conversation_id and w.streaming:
            w._say("A reply is streaming: stop it (Esc) before deleting its conversation.")
            return
        title = storeedits.title_of(w.store, cid)
        storeedits.mark_deleted(w.store, cid)
        self.deleted.append((cid, title))
        if record:
            w.edits.conversation_deleted(cid, title)
        if cid == w.conversation_id:
            rest = w.store.conversations()
            w.open_conversation(rest[0].id if rest else w.store.new_conversation())
        else:
            w._fill_conversation_list()
        self.undo_notice.label.setText(f"Deleted '{title}'")
        self.undo_notice.show()

    def undo_delete(self) -> None:
        """Bring back the conversation deleted last, and open it."""
        if self.deleted:
            self.bring_back(self.deleted[-1][0])

    def bring_back(self, cid: int) -> bool:
        """Bring back a conversation deleted in this session, and open it."""
        if cid not in [d for d, _ in self.deleted]:
            return False
        self.deleted = [d for d in self.deleted if d[0] != cid]
        storeedits.restore(self.window.store, cid)
        if self.window.streaming:
            self.window._fill_conversation_list()
        else:
            self.window.open_conversation(cid)
        if self.deleted:
            self.undo_notice.label.setText(f"Deleted '{self.deleted[-1][1]}'")
        else:
            self.undo_notice.hide()
        return True

    # ---- export ----
    def _export(self, markdown: bool, conversation_id: int | None = None) -> None:
        cid = self._chosen_id(conversation_id)
        if markdown:
            exports.export_markdown_dialog(self.window, cid, storeedits.title_of(self.window.store, cid))
        else:
            exports.export_conversation_trace_dialog(self.window, cid)

    def _export_replays(self, conversation_id: int | None = None) -> None:
        cid = self._chosen_id(conversation_id)
        exports.export_replays_dialog(self.window, cid, storeedits.title_of(self.window.store, cid))

    # ---- the mouse ----
    def menu_at(self, point: QPoint) -> QMenu:
        """The list's context menu at a viewport point: rename, delete, export the conversation there."""
        menu = QMenu(self.list)
        item = self.list.itemAt(point)
        if item is None:
            return menu
        cid = int(item.data(Qt.ItemDataRole.UserRole))
        for text, slot in (
            ("Rename…", lambda: self.start_rename(cid)),
            ("Delete", lambda: self.delete_conversation(cid)),
            ("Export as markdown…", lambda: self._export(True, cid)),
            ("Export token trace (JSONL)…", lambda: self._export(False, cid)),
            ("Export replays…", lambda: self._export_replays(cid)),
        ):
            action = menu.addAction(text)
            action.setObjectName(text)
            action.triggered.connect(slot)
        return menu

    def _context_menu(self, point: QPoint) -> None:
        menu = self.menu_at(point)
        if menu.actions():
            menu.exec(self.list.viewport().mapToGlobal(point))
        menu.deleteLater()
