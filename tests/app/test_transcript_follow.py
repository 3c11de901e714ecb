"""The transcript follows a streaming reply unless the reader scrolled away (then "Jump to
latest" brings them back); Regenerate streams the new reply where the old one was; the focus
goes back to the message box after Send."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.transcript import TranscriptView
from engine import TokenEvent, TokenKind

REPLY_TIMEOUT_MS = 300_000


def tokens(text: str, start: int = 0) -> list[TokenEvent]:
    return [
        TokenEvent(token_id=start + i, text=c, kind=TokenKind.PLAIN, round_index=i, position=0, target_prob=0.9)
        for i, c in enumerate(text)
    ]


def lines(n: int, word: str) -> str:
    return "".join(f"{word} {i}\n\n" for i in range(n))


def transcript(qtbot) -> TranscriptView:
    view = TranscriptView()
    qtbot.addWidget(view)
    view.resize(420, 240)
    view.show()
    view.add_user("Count to forty.")
    view.show_reply(tokens(lines(30, "earlier")), None, False)
    return view


def test_a_streaming_reply_stays_in_view(qtbot):
    view = transcript(qtbot)
    bar = view.verticalScrollBar()
    assert bar.maximum() > 0 and bar.value() == bar.maximum()
    view.add_user("Again, please.")
    view.begin_reply()
    for i in range(40):
        view.append_tokens(tokens(f"line {i}\n\n", 100 * i))
        assert bar.value() == bar.maximum(), i
    assert not view.follower.jump.isVisibleTo(view)


def test_scrolled_away_the_reader_stays_put_until_jump_to_latest(qtbot):
    view = transcript(qtbot)
    bar = view.verticalScrollBar()
    view.begin_reply()
    view.append_tokens(tokens("The first line.\n\n"))
    bar.setValue(0)  # the reader goes back to read the start
    assert not view.follower.following
    for i in range(20):
        view.append_tokens(tokens(f"line {i}\n\n", 100 * i))
    assert bar.value() == 0 and bar.maximum() > 0
    jump = view.follower.jump
    assert jump.isVisibleTo(view) and jump.text() == "Jump to latest ↓"
    assert view.viewport().geometry().contains(jump.geometry())
    qtbot.mouseClick(jump, Qt.MouseButton.LeftButton)
    assert bar.value() == bar.maximum() and not jump.isVisibleTo(view)
    view.append_tokens(tokens(lines(10, "more"), 5000))
    assert bar.value() == bar.maximum()
    view.end_reply(None)
    bar.setValue(0)
    view.add_user("A new message.")  # sending brings the reader back to the end
    assert view.follower.following and bar.value() == bar.maximum()


def test_a_reader_who_scrolls_back_to_the_end_is_followed_again(qtbot):
    view = transcript(qtbot)
    bar = view.verticalScrollBar()
    view.begin_reply()
    bar.setValue(0)
    view.append_tokens(tokens(lines(10, "more")))
    assert view.follower.jump.isVisibleTo(view)
    bar.setValue(bar.maximum())
    assert view.follower.following and not view.follower.jump.isVisibleTo(view)
    view.append_tokens(tokens(lines(10, "still more"), 500))
    assert bar.value() == bar.maximum()


def test_the_regenerated_reply_streams_where_the_old_one_was(qtbot):
    view = transcript(qtbot)
    view.drop_last_reply()
    assert view.toPlainText().split() == ["You", "Count", "to", "forty."]
    assert [e.role for e in view.entries] == ["user"] and view.tokens == []
    view.begin_reply()
    view.append_tokens(tokens("One, two, three."))
    assert view.toPlainText().split() == ["You", "Count", "to", "forty.", "Assistant", "One,", "two,", "three."]


def test_focus_returns_to_the_message_box_after_send(qtbot, make_window):
    window = make_window(depth=0, max_tokens=4)
    window.input.setPlainText("Name a colour.")
    window.send_button.setFocus()
    with qtbot.waitSignal(window.reply_finished, timeout=REPLY_TIMEOUT_MS):
        qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)
    assert window.focusWidget() is window.input


def test_regenerate_replaces_the_reply_on_screen_at_once(qtbot, make_window, send):
    window = make_window(depth=0, max_tokens=6)
    send(window, "Name three rivers.")
    qtbot.waitUntil(lambda: not window.busy, timeout=REPLY_TIMEOUT_MS)
    with qtbot.waitSignal(window.reply_finished, timeout=REPLY_TIMEOUT_MS):
        qtbot.keyClick(window, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
        assert window.transcript.toPlainText().split() == ["You", "Name", "three", "rivers.", "Assistant"]
    shown = window.transcript.toPlainText()
    assert shown.count("Assistant") == 1 and "reply 2 of 2" in shown
