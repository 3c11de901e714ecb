"""The Edit menu: Undo/Redo of deleted messages, failed replies and conversations (the message box's
own typing when it has the focus), Cut/Copy/Paste/Select All on the focused widget; Help's guide."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from app.store import StoredMessage
from app.storeopen import open_store
from tests.app.test_actions_conversations import listed, three_conversations

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier


def roles(window) -> list[str]:
    return [m.role for m in window.store.messages(window.conversation_id)]


def keys(qtbot, window, modifiers) -> None:
    """Ctrl+Z (or Ctrl+Shift+Z) in the transcript: a window's shortcuts fire while it is the active one."""
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=5_000)
    window.transcript.setFocus()
    qtbot.keyClick(window.transcript, Qt.Key.Key_Z, modifiers)


def undo(qtbot, window) -> None:
    keys(qtbot, window, CTRL)


def redo(qtbot, window) -> None:
    keys(qtbot, window, CTRL | SHIFT)


def test_the_edit_menu_holds_the_standard_actions(window_at, tmp_path):
    window = window_at(tmp_path / "c.sqlite3")
    edit = window.menuBar().actions()[1].menu()
    assert [a.text() for a in edit.actions() if a.text()][:6] == ["Undo", "Redo", "Cut", "Copy", "Paste", "Select All"]
    shortcuts = dict(window.menus.shortcut_list())
    assert shortcuts["Undo"].startswith("Ctrl+Z") and "Ctrl+Shift+Z" in shortcuts["Redo"]
    assert shortcuts["Copy"].startswith("Ctrl+C") and shortcuts["Select All"] == "Ctrl+A"


def test_a_failed_reply_is_removed_and_undo_brings_it_back(qtbot, window_at, tmp_path):
    path = tmp_path / "c.sqlite3"
    three_conversations(path)
    window = window_at(path)
    window.worker.reply_failed.emit("The engine failed: out of memory.")
    assert roles(window) == ["user", "assistant", "error"]
    assert window.remove_failed_button.isVisibleTo(window)
    window.remove_failed_button.click()
    assert roles(window) == ["user", "assistant"] and "out of memory" not in window.transcript.toPlainText()
    assert not window.remove_failed_button.isVisibleTo(window) and not window.retry_button.isVisibleTo(window)
    window.transcript.setFocus()
    undo(qtbot, window)
    assert roles(window) == ["user", "assistant", "error"]
    assert window.transcript.toPlainText().rstrip().endswith("The engine failed: out of memory.")
    assert window.notice.text() == "Undid the removal of the failed reply."
    redo(qtbot, window)
    assert roles(window) == ["user", "assistant"]
    assert window.notice.text() == "Redid the removal of the failed reply."


def test_a_deleted_message_comes_back_with_undo_exactly_as_it_was(qtbot, window_at, tmp_path):
    path = tmp_path / "c.sqlite3"
    three_conversations(path)
    window = window_at(path)
    before = window.store.messages(window.conversation_id)
    window.message_tools.delete_message(before[0].id)  # the user's message, and its reply with it
    assert roles(window) == [] and window.notice.text().startswith("Deleted your message and its reply.")
    window.transcript.setFocus()
    undo(qtbot, window)
    assert window.store.messages(window.conversation_id) == before
    assert "Write a bubble sort in C++." in window.transcript.toPlainText()
    undo(qtbot, window)
    assert window.notice.text() == "Nothing to undo."


def test_undo_brings_back_a_deleted_conversation_and_redo_deletes_it_again(qtbot, window_at, tmp_path):
    path = tmp_path / "c.sqlite3"
    three_conversations(path)
    window = window_at(path)
    window.conversation_tools.delete_conversation()  # the open one, "Sorting"
    assert listed(window) == ["Bread", "Lighthouse"]
    window.transcript.setFocus()
    undo(qtbot, window)
    assert listed(window) == ["Sorting", "Bread", "Lighthouse"] and not window.conversation_tools.deleted
    assert window.notice.text() == "Undid the deletion of 'Sorting'."
    redo(qtbot, window)
    assert listed(window) == ["Bread", "Lighthouse"]
    window.conversation_tools.undo_delete()  # the list's own Undo button: Edit → Undo has nothing left of it
    window.transcript.setFocus()
    undo(qtbot, window)
    assert listed(window) == ["Sorting", "Bread", "Lighthouse"] and window.notice.text() == "Nothing to undo."


def test_in_the_message_box_undo_and_the_clipboard_act_on_its_text(qtbot, window_at, tmp_path):
    path = tmp_path / "c.sqlite3"
    three_conversations(path)
    window = window_at(path)
    window.message_tools.delete_message(window.store.messages(window.conversation_id)[1].id)
    box = window.input
    box.setFocus()
    qtbot.keyClicks(box, "hello")
    window.edits.undo.trigger()  # Edit → Undo with the box focused: its typing, not the deletion
    assert box.toPlainText() == "" and roles(window) == ["user"]
    box.setPlainText("lighthouse keeper")
    window.edits.select_all.trigger()
    assert box.textCursor().selectedText() == "lighthouse keeper"
    window.edits.cut.trigger()
    assert box.toPlainText() == "" and QApplication.clipboard().text() == "lighthouse keeper"
    window.edits.paste.trigger()
    window.edits.paste.trigger()
    assert box.toPlainText() == "lighthouse keeperlighthouse keeper"
    window.transcript.setFocus()
    window.edits.select_all.trigger()
    window.edits.copy.trigger()  # in the transcript: its selection
    assert "Write a bubble sort in C++." in QApplication.clipboard().text()
    window.edits.paste.trigger()  # the transcript takes no paste
    assert "lighthouse" not in window.transcript.toPlainText()


def test_help_has_a_short_guide(window_at, tmp_path):
    window = window_at(tmp_path / "c.sqlite3")
    guide = window.menus.show_guide()
    assert guide.isVisible() and not guide.isModal()
    text = guide.page.toPlainText()
    assert text.startswith("Draftlight in five minutes")
    for words in ("accepted", "replaced", "bonus", "plain", "Auto", "Measure This Machine", "Ctrl+Z"):
        assert words in text
    guide.close()


def test_removing_a_failed_reply_takes_the_part_that_arrived_with_it(qtbot, window_at, tmp_path):
    path = tmp_path / "c.sqlite3"
    store, _ = open_store(path)
    cid = store.new_conversation("Mills")
    store.add_message(cid, StoredMessage("user", "Tell me about the mill."))
    store.add_message(cid, StoredMessage("assistant", "The mill on the", stopped=True))  # cut by the failure
    store.add_message(cid, StoredMessage("error", "The engine failed: out of memory."))
    store.close()
    window = window_at(path)
    assert roles(window) == ["user", "assistant", "error"]
    window.edits.remove_failed_reply()
    assert roles(window) == ["user"] and window.notice.text().startswith("Removed the failed reply.")
    window.transcript.setFocus()
    undo(qtbot, window)
    assert window.notice.text() == "Undid the removal of the failed reply."
    assert roles(window) == ["user", "assistant", "error"]
    assert [m.content for m in window.store.messages(cid)][1:] == [
        "The mill on the",
        "The engine failed: out of memory.",
    ]
