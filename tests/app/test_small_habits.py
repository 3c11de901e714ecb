"""The small habits of a desktop app: titles from the message's words, Esc clears the search,
a stale Auto line leaves with the setting it described, every failed reply offers Retry."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from app.conversations import title_from
from tests.app.test_actions_conversations import listed, three_conversations


def test_a_title_is_the_first_line_in_whole_words():
    assert title_from("Name a colour.") == "Name a colour."
    assert title_from("\n  Write a Python function that sorts a list of dates by weekday\nthen more") == (
        "Write a Python function that sorts a…"
    )
    assert title_from("x" * 60) == "x" * 40 + "…"  # one word longer than a title: cut where it must be
    assert title_from("Write a Python function that parses") == "Write a Python function that parses"


def test_esc_clears_the_search(qtbot, window_at, tmp_path):
    path = tmp_path / "c.sqlite3"
    three_conversations(path)
    window = window_at(path)
    qtbot.keyClick(window, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    search = window.conversation_tools.search
    assert QApplication.focusWidget() is search
    qtbot.keyClicks(search, "KEEPER")
    assert listed(window) == ["Lighthouse"]
    qtbot.keyClick(search, Qt.Key.Key_Escape)
    assert search.text() == "" and listed(window) == ["Sorting", "Bread", "Lighthouse"]


def test_another_depth_clears_what_auto_was_doing(window_at, tmp_path):
    window = window_at(tmp_path / "c.sqlite3")
    note = window.side.depth_note
    note.setText("Auto is using depth 1: predicted 1.20x.")
    window.side.set_depth(4)
    assert note.text() == ""


def test_a_failed_reply_offers_retry(window_at, tmp_path):
    window = window_at(tmp_path / "c.sqlite3")
    assert not window.retry_button.isVisibleTo(window)
    window.worker.reply_failed.emit("The engine failed: out of memory.")
    assert window.retry_button.isVisibleTo(window)
    assert window.transcript.toPlainText().rstrip().endswith("The engine failed: out of memory.")


def test_help_lists_the_keyboard_shortcuts(window_at, tmp_path):
    window = window_at(tmp_path / "c.sqlite3")
    rows = dict((what, keys) for what, keys in window.menus.shortcut_list())
    assert rows["Send the message"] == "Return"
    assert rows["Regenerate reply"] == "Ctrl+R"
    assert rows["Find in conversations"] == "Ctrl+F"
    box = window.menus.show_shortcuts()
    assert "Ctrl+R\tRegenerate reply" in box.text().splitlines()
    assert [a.text() for a in window.menuBar().actions()[-1].menu().actions()][:2] == [
        "Draftlight guide",
        "Keyboard shortcuts",
    ]
    box.close()


def test_a_rejected_file_leaves_the_picker(qtbot, window_at, tmp_path):
    from app.worker import LoadRequest

    window = window_at(tmp_path / "c.sqlite3")
    bad = tmp_path / "notes.gguf"
    bad.write_bytes(b"not a model at all, only some words")
    window.side._remember(str(bad))
    assert window.side.target.findData(str(bad)) >= 0
    with qtbot.waitSignal(window.worker.load_failed, timeout=20_000) as failed:
        window.load(LoadRequest(str(bad), "none"))
    assert "notes.gguf" in failed.args[0]
    qtbot.waitUntil(lambda: window.side.target.findData(str(bad)) < 0)  # the window hears it next
    assert str(bad) not in window.side.recent_files
    assert bad.read_bytes() == b"not a model at all, only some words"  # the file itself untouched
