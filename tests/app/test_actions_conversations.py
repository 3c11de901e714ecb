"""The conversation list's actions on the real window and a real store, with no model:
search, rename, delete with undo, export as markdown, and the older databases they read."""

from __future__ import annotations

import sqlite3

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLineEdit

from app import exports
from app.store import StoredMessage
from app.storeopen import open_store
from engine import FinishReason, RunStats


def three_conversations(path) -> list[int]:
    """Three saved conversations, the first the oldest; their ids."""
    store, _ = open_store(path)
    ids = []
    for title, words in (
        ("Lighthouse", "Tell me about the lighthouse keeper and his lamp."),
        ("Bread", "How long should sourdough rise?"),
        ("Sorting", "Write a bubble sort in C++."),
    ):
        cid = store.new_conversation(title)
        store.add_message(cid, StoredMessage("user", words))
        store.add_message(cid, StoredMessage("assistant", f"An answer about {title.lower()}."))
        ids.append(cid)
    store.close()
    return ids


def listed(window) -> list[str]:
    items = window.conversations.items
    return [items.item(i).text() for i in range(items.count())]


def test_search_finds_a_word_from_an_old_conversation(qtbot, window_at, tmp_path):
    path = tmp_path / "c.sqlite3"
    three_conversations(path)
    window = window_at(path)
    assert listed(window) == ["Sorting", "Bread", "Lighthouse"]
    qtbot.keyClick(window, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert QApplication.focusWidget() is window.conversation_tools.search
    qtbot.keyClicks(window.conversation_tools.search, "KEEPER")
    assert listed(window) == ["Lighthouse"]
    window.conversation_tools.search.clear()
    qtbot.keyClicks(window.conversation_tools.search, "bubble")
    assert listed(window) == ["Sorting"]
    window.conversation_tools.search.setText("sourdough 100%")  # LIKE's wildcards are literal
    assert listed(window) == []
    window.conversation_tools.search.clear()
    assert listed(window) == ["Sorting", "Bread", "Lighthouse"]


def test_rename_in_place_from_the_keyboard_and_the_context_menu(qtbot, window_at, tmp_path):
    path = tmp_path / "c.sqlite3"
    ids = three_conversations(path)
    window = window_at(path)
    items = window.conversations.items
    items.setFocus()
    items.setCurrentRow(1)  # Bread
    qtbot.keyClick(items, Qt.Key.Key_F2)
    editor = items.findChild(QLineEdit)
    assert editor is not None and editor.text() == "Bread"
    editor.selectAll()
    qtbot.keyClicks(editor, "Sourdough timing")
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    # The list shows the editor's text at once; the store is written a turn of the event loop later.
    qtbot.waitUntil(lambda: [c.title for c in window.store.conversations() if c.id == ids[1]] == ["Sourdough timing"])
    assert listed(window) == ["Sorting", "Sourdough timing", "Lighthouse"]
    # The mouse: the context menu over an item names what it does there.
    menu = window.conversation_tools.menu_at(items.visualItemRect(items.item(2)).center())
    assert [a.text() for a in menu.actions()] == [
        "Rename…",
        "Delete",
        "Export as markdown…",
        "Export token trace (JSONL)…",
        "Export replays…",
    ]
    menu.actions()[0].trigger()
    editor = items.findChild(QLineEdit)
    editor.selectAll()
    qtbot.keyClicks(editor, "Lamp")
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: listed(window)[2] == "Lamp")
    assert listed(window) == ["Sorting", "Sourdough timing", "Lamp"]


def test_delete_with_undo_from_the_keyboard_and_the_mouse(qtbot, window_at, tmp_path):
    path = tmp_path / "c.sqlite3"
    ids = three_conversations(path)
    window = window_at(path)
    items = window.conversations.items
    window.open_conversation(ids[2])
    items.setFocus()
    qtbot.keyClick(items, Qt.Key.Key_Delete)  # the current one: Sorting
    assert listed(window) == ["Bread", "Lighthouse"]
    assert window.conversation_id == ids[1]  # the next one opens
    assert window.conversation_tools.undo_notice.label.text() == "Deleted 'Sorting'"
    assert window.conversation_tools.undo_notice.isVisible()
    qtbot.mouseClick(window.conversation_tools.undo_notice.undo, Qt.MouseButton.LeftButton)
    assert listed(window) == ["Sorting", "Bread", "Lighthouse"]
    assert window.conversation_id == ids[2] and "bubble sort" in window.transcript.toPlainText()
    assert not window.conversation_tools.undo_notice.isVisible()
    # Backspace too; and the context menu's Delete on another conversation than the open one.
    items.setFocus()
    items.setCurrentRow(2)
    qtbot.keyClick(items, Qt.Key.Key_Backspace)
    assert listed(window) == ["Sorting", "Bread"]
    menu = window.conversation_tools.menu_at(items.visualItemRect(items.item(1)).center())
    next(a for a in menu.actions() if a.text() == "Delete").trigger()
    assert listed(window) == ["Sorting"]
    assert window.conversation_tools.undo_notice.label.text() == "Deleted 'Bread'"
    # Deleted and not undone: gone once the app closes.
    window.close()
    store, _ = open_store(path)
    assert [c.title for c in store.conversations()] == ["Sorting"]
    assert store.messages(ids[0]) == [] and store.messages(ids[1]) == []


def test_deleting_the_last_conversation_leaves_an_empty_one(qtbot, window_at, tmp_path):
    window = window_at(tmp_path / "c.sqlite3")
    only = window.conversation_id
    window.conversation_tools.delete_conversation()
    assert len(window.store.conversations()) == 1 and window.conversation_id != only
    window.conversation_tools.undo_delete()
    assert window.conversation_id == only and len(window.store.conversations()) == 2


def test_export_as_markdown(window_at, tmp_path):
    path = tmp_path / "c.sqlite3"
    store, _ = open_store(path)
    cid = store.new_conversation("Bread")
    store.add_message(cid, StoredMessage("user", "How long should sourdough rise?"))
    stats = RunStats(
        prompt_tokens=12, prefill_s=0.1, generated_tokens=5, decode_s=0.5, rounds=4, depth=0, drafted=0, accepted=0,
        acceptance_per_position=(), drafted_per_position=(), accepted_per_position=(), draft_s=0.0, verify_s=0.5,
        commit_s=0.0, rewind_s=0.0, overhead_s=0.0, finish_reason=FinishReason.EOG, text="Four to six hours.",
        from_prefill=1,
    )  # fmt: skip
    store.add_message(cid, StoredMessage("assistant", "Four to six hours.", stats=stats))
    store.close()
    window = window_at(path)
    out = tmp_path / "bread.md"
    exports.export_markdown(window.store, cid, "Bread", out)
    assert out.read_text(encoding="utf-8") == (
        "# Bread\n\n**You:**\n\nHow long should sourdough rise?\n\n**Assistant:**\n\nFour to six hours.\n\n"
        "*5 tokens · 8.0 tok/s decode · speculation off*\n"
    )


def test_an_older_database_gains_the_alternative_and_deleted_columns(tmp_path):
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE conversations (id INTEGER PRIMARY KEY, title TEXT NOT NULL, created REAL NOT NULL, "
        "updated REAL NOT NULL); CREATE TABLE messages (id INTEGER PRIMARY KEY, conversation_id INTEGER NOT NULL, "
        "role TEXT NOT NULL, content TEXT NOT NULL, tokens TEXT, stats TEXT, stopped INTEGER NOT NULL DEFAULT 0, "
        "created REAL NOT NULL, interrupted INTEGER NOT NULL DEFAULT 0); INSERT INTO conversations VALUES "
        "(1, 'old', 0, 0); INSERT INTO messages(conversation_id, role, content, created) VALUES "
        "(1, 'user', 'from before', 0), (1, 'assistant', 'a reply', 0);"
    )
    db.commit()
    db.close()
    store, notice = open_store(path)
    assert notice == "" and [c.title for c in store.conversations()] == ["old"]
    got = [(m.role, m.content, m.alternative, m.alternatives) for m in store.messages(1)]
    assert got == [("user", "from before", 1, 1), ("assistant", "a reply", 1, 1)]
    assert [m.above for m in store.messages(1)] == ["", ""]  # no line above a reply from before
    store.set_above(2, "The oldest message was left out of the prompt to fit the context (1,024 tokens).")
    assert store.messages(1)[1].above.startswith("The oldest message was left out")
