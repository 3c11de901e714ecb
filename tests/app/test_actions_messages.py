"""The message actions on the real window and a real store: copy, edit, delete and the
alternatives of a regenerated reply without a model; regenerate and edit-and-resend with one."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from app import storeedits
from app.actions import EDITING, MESSAGE_ENTRY
from app.messagetags import point_in
from app.store import StoredMessage
from app.storeopen import open_store
from engine import RunStats, TokenEvent, TokenKind

REPLY_TIMEOUT_MS = 300_000


def reply(text: str) -> StoredMessage:
    """A reply as the engine leaves it: its text, a plain token a character."""
    tokens = [
        TokenEvent(token_id=i, text=c, kind=TokenKind.PLAIN, round_index=i, position=0, target_prob=0.9)
        for i, c in enumerate(text)
    ]
    return StoredMessage("assistant", text, tokens)


def two_turns(path) -> tuple[int, list[int]]:
    """A conversation of two questions and their answers; its id and the messages' ids."""
    store, _ = open_store(path)
    cid = store.new_conversation("Colours")
    ids = [
        store.add_message(cid, StoredMessage(role, text) if role == "user" else reply(text))
        for role, text in (
            ("user", "Name a colour."),
            ("assistant", "Teal."),
            ("user", "Name a fruit."),
            ("assistant", "A quince."),
        )
    ]
    store.close()
    return cid, ids


def shown(window) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in window.store.messages(window.conversation_id)]


def menu_texts(window, message_id: int) -> list[str]:
    menu = window.message_tools.menu_at(point_in(window.transcript, message_id))
    return [a.text() for a in menu.actions() if a.data() == MESSAGE_ENTRY]


def trigger(window, message_id: int, text: str) -> None:
    menu = window.message_tools.menu_at(point_in(window.transcript, message_id))
    next(a for a in menu.actions() if a.data() == MESSAGE_ENTRY and a.text() == text).trigger()


def test_the_context_menu_offers_what_each_message_can_do(window_at, tmp_path):
    _cid, ids = two_turns(tmp_path / "c.sqlite3")
    window = window_at(tmp_path / "c.sqlite3")
    assert menu_texts(window, ids[0]) == ["Copy message", "Edit and resend", "Delete message"]
    assert menu_texts(window, ids[1]) == ["Copy reply", "Delete message"]  # not the last: no regenerate
    assert menu_texts(window, ids[3]) == ["Copy reply", "Regenerate reply", "Delete message"]
    trigger(window, ids[1], "Copy reply")
    assert QApplication.clipboard().text() == "Teal."


def test_copy_reply_from_the_keyboard_takes_the_last_or_the_one_clicked_into(qtbot, window_at, tmp_path):
    _cid, ids = two_turns(tmp_path / "c.sqlite3")
    window = window_at(tmp_path / "c.sqlite3")
    window.input.setFocus()
    qtbot.keyClick(window.input, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert QApplication.clipboard().text() == "A quince."
    qtbot.mouseClick(window.transcript.viewport(), Qt.MouseButton.LeftButton, pos=point_in(window.transcript, ids[1]))
    qtbot.keyClick(
        window.transcript, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    )
    assert QApplication.clipboard().text() == "Teal."


def test_up_in_an_empty_box_edits_the_last_message_and_esc_cancels(qtbot, window_at, tmp_path):
    _cid, ids = two_turns(tmp_path / "c.sqlite3")
    window = window_at(tmp_path / "c.sqlite3")
    window.input.setFocus()
    qtbot.keyClick(window.input, Qt.Key.Key_Up)
    assert window.input.toPlainText() == "Name a fruit." and window.message_tools.editing == ids[2]
    assert window.notice.text() == EDITING.format(key="Return")
    qtbot.keyClick(window.input, Qt.Key.Key_Escape)
    assert window.input.toPlainText() == "" and window.message_tools.editing is None
    window.input.setPlainText("a draft")
    trigger(window, ids[0], "Edit and resend")  # the mouse: an earlier message; the draft comes back on Esc
    assert window.input.toPlainText() == "Name a colour." and window.message_tools.editing == ids[0]
    qtbot.keyClick(window.input, Qt.Key.Key_Escape)
    assert window.input.toPlainText() == "a draft"
    window.input.clear()
    qtbot.keyClick(window.input, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier)
    assert window.message_tools.editing == ids[2]
    assert shown(window)[-1] == ("assistant", "A quince.")  # nothing is removed until it is resent


def test_delete_a_reply_or_a_message_with_its_reply(qtbot, window_at, tmp_path):
    _cid, ids = two_turns(tmp_path / "c.sqlite3")
    window = window_at(tmp_path / "c.sqlite3")
    qtbot.mouseClick(window.transcript.viewport(), Qt.MouseButton.LeftButton, pos=point_in(window.transcript, ids[3]))
    qtbot.keyClick(window.transcript, Qt.Key.Key_Delete)
    assert shown(window) == [("user", "Name a colour."), ("assistant", "Teal."), ("user", "Name a fruit.")]
    assert "A quince." not in window.transcript.toPlainText()
    trigger(window, ids[0], "Delete message")  # a question goes with its answer: the turns still alternate
    assert shown(window) == [("user", "Name a fruit.")]


def test_a_reply_with_alternatives_shows_one_marked_and_steps_between_them(qtbot, window_at, tmp_path):
    path = tmp_path / "c.sqlite3"
    cid, ids = two_turns(path)
    store, _ = open_store(path)
    second = store.begin_reply(cid)
    store.finish_reply(second, cid, reply("A fig."))
    storeedits.add_alternative(store, ids[3], second)
    store.close()
    window = window_at(path)
    assert shown(window)[-1] == ("assistant", "A fig.")
    assert window.engine_messages()[-1].content == "A fig."  # only the shown one is sent
    text = window.transcript.toPlainText()
    assert "A fig." in text and "A quince." not in text and "reply 2 of 2" in text
    bar = window.message_tools.bar
    assert bar.isVisible() and bar.label.text() == "Reply 2 of 2" and not bar.next.isEnabled()
    assert menu_texts(window, second) == ["Copy reply", "Regenerate reply", "Previous reply", "Delete message"]
    qtbot.mouseClick(bar.previous, Qt.MouseButton.LeftButton)
    assert shown(window)[-1] == ("assistant", "A quince.") and bar.label.text() == "Reply 1 of 2"
    assert "reply 1 of 2" in window.transcript.toPlainText()
    qtbot.keyClick(window, Qt.Key.Key_BracketRight, Qt.KeyboardModifier.ControlModifier)
    assert shown(window)[-1] == ("assistant", "A fig.")
    # Deleting the shown alternative shows the other, no longer marked.
    window.message_tools.delete_message(second)
    assert shown(window)[-1] == ("assistant", "A quince.") and not bar.isVisible()
    assert "reply 1 of" not in window.transcript.toPlainText()


# ---- with a model: real replies ----
def all_replies(window) -> list[tuple[str, RunStats | None, bool]]:
    """Every assistant row of the conversation, shown or not: (text, stats, hidden)."""
    rows = window.store.db.execute(
        "SELECT content, hidden FROM messages WHERE conversation_id = ? AND role = 'assistant' ORDER BY id",
        (window.conversation_id,),
    ).fetchall()
    return rows


def test_regenerate_keeps_both_replies_with_their_own_stats(qtbot, make_window, send):
    window = make_window(depth=2, max_tokens=12)
    first = send(window, "Name three rivers.")
    assert isinstance(first, RunStats) and first.depth == 2
    window.side.set_depth(0)  # the A/B: the same question with speculation off
    qtbot.waitUntil(lambda: not window.busy, timeout=REPLY_TIMEOUT_MS)  # the worker winds down after a reply
    with qtbot.waitSignal(window.reply_finished, timeout=REPLY_TIMEOUT_MS) as blocker:
        qtbot.keyClick(window, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    second = blocker.args[0]
    assert isinstance(second, RunStats) and second.depth == 0 and second.drafted == 0
    assert all_replies(window) == [(first.text, 1), (second.text, 0)]
    stored = window.store.messages(window.conversation_id)
    assert [(m.role, m.alternative, m.alternatives) for m in stored] == [("user", 1, 1), ("assistant", 2, 2)]
    assert stored[-1].stats.depth == 0 and stored[-1].stats.generated_tokens == second.generated_tokens
    assert window.status.labels["decode"].text() == f"decode {second.decode_tps:.1f} tok/s"
    assert "reply 2 of 2" in window.transcript.toPlainText()
    qtbot.keyClick(window, Qt.Key.Key_BracketLeft, Qt.KeyboardModifier.ControlModifier)
    stored = window.store.messages(window.conversation_id)
    assert stored[-1].stats.depth == 2 and stored[-1].stats.drafted == first.drafted and first.drafted > 0
    assert window.status.labels["decode"].text() == f"decode {first.decode_tps:.1f} tok/s"
    assert window.status.labels["acceptance"].text() == f"acceptance {first.acceptance:.0%}"


def test_edit_and_resend_cuts_the_conversation_where_the_message_was(qtbot, make_window, send):
    window = make_window(depth=2, max_tokens=6)
    send(window, "Name a colour.")
    send(window, "Name a fruit.")
    first_user = window.store.messages(window.conversation_id)[0].id
    trigger(window, first_user, "Edit and resend")
    window.input.setPlainText("Name a planet.")
    qtbot.waitUntil(lambda: not window.busy, timeout=REPLY_TIMEOUT_MS)
    with qtbot.waitSignal(window.reply_finished, timeout=REPLY_TIMEOUT_MS) as blocker:
        qtbot.keyClick(window.input, Qt.Key.Key_Return)
    reply = blocker.args[0]
    assert shown(window) == [("user", "Name a planet."), ("assistant", reply.text)]
    assert all_replies(window) == [(reply.text, 0)]  # the old replies are gone, not hidden
    assert [c.title for c in window.store.conversations() if c.id == window.conversation_id] == ["Name a planet."]
    text = window.transcript.toPlainText()
    assert "Name a colour." not in text and "Name a fruit." not in text and "Name a planet." in text
