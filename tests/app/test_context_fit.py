"""One long message cannot break a conversation: refused before it joins the conversation,
with the figures, and the text back in the box; a conversation that outgrew the context
goes on with its oldest turns left out, said beside the reply."""

from __future__ import annotations

from PySide6.QtCore import Qt

from tests.app.conftest import REPLY_TIMEOUT_MS

PARAGRAPH = "The mill on the river turned for a century, stood empty for thirty years, and was rebuilt. "


def test_an_over_long_message_is_refused_and_the_conversation_goes_on(qtbot, make_window, send):
    window = make_window(depth=0, max_tokens=4)
    long_message = PARAGRAPH * 600  # about 11,000 tokens: more than the context's 4,096
    window.input.setPlainText(long_message)
    with qtbot.waitSignal(window.reply_finished, timeout=REPLY_TIMEOUT_MS) as blocker:
        qtbot.keyClick(window.input, Qt.Key.Key_Return)
    assert blocker.args[0] is None
    assert window.store.messages(window.conversation_id) == []
    assert window.input.toPlainText() == long_message.strip()
    assert window.notice.text().startswith("This message is ")
    assert window.notice.text().endswith(
        "and the context holds 4,096 tokens with 4 of them kept for the reply: shorten the message, "
        "or raise the context size in Preferences."
    )
    assert "Error" not in window.transcript.toPlainText() and "Assistant" not in window.transcript.toPlainText()
    stats = send(window, "Name a colour.")
    assert stats is not None and stats.generated_tokens > 0
    assert [m.role for m in window.store.messages(window.conversation_id)] == ["user", "assistant"]
