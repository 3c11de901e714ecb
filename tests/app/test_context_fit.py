"""One long message cannot break a conversation: refused before it joins the conversation,
with the figures, and the text back in the box; a conversation that outgrew the context
goes on with its oldest turns left out, said beside the reply."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.store import StoredMessage
from app.storeopen import open_store
from tests.app.conftest import LOAD_TIMEOUT_MS, REPLY_TIMEOUT_MS

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


def test_an_outgrown_conversation_leaves_its_oldest_turns_out(qtbot, tmp_path, make_window, send):
    store, _ = open_store(tmp_path / "long.sqlite3")
    cid = store.new_conversation("Mills")
    for i in range(8):  # about 200 tokens a turn: 1,600 in all, past a context of 1,024
        store.add_message(cid, StoredMessage("user", f"Question {i}: {PARAGRAPH * 10}"))
        store.add_message(cid, StoredMessage("assistant", f"Answer {i}."))
    store.close()
    window = make_window(store_name="long.sqlite3", drafter="none", depth=0, max_tokens=4, context=1024)
    assert window.conversation_id == cid and window.pair.n_ctx == 1024
    stats = send(window, "Which mill was it?")
    assert stats is not None and stats.generated_tokens > 0
    shown = window.transcript.toPlainText()
    line = window.fit_note
    assert line.startswith("The ") and line.endswith(
        " oldest messages were left out of the prompt to fit the context (1,024 tokens)."
    )
    assert shown.count(line) == 1  # once, in the line right under the new reply's heading
    assert shown[shown.rindex("Assistant") :].split("\n")[:2] == ["Assistant", line]
    window.legend.raw.toggle()  # drawn again as raw text: the line stays above the reply
    shown = window.transcript.toPlainText()
    assert shown[shown.rindex("Assistant") :].split("\n")[:2] == ["Assistant", line]
    assert len(window.store.messages(cid)) == 18  # nothing deleted: only the prompt leaves them out
    window.new_conversation()  # away and back: the line is kept with the reply and drawn again above it
    window.open_conversation(cid)
    shown = window.transcript.toPlainText()
    assert shown.count(line) == 1
    assert shown[shown.rindex("Assistant") :].split("\n")[:2] == ["Assistant", line]
    reopened, _ = open_store(window.store.where)  # as the next start reads it
    assert [m.above for m in reopened.messages(cid)] == [""] * 17 + [line]
    reopened.close()


def test_the_context_is_shown_and_set_in_preferences(qtbot, make_window):
    window = make_window(drafter="none", depth=0, context=1024)
    window.open_preferences()
    prefs = window.preferences_window
    assert prefs.context.value() == 1024
    assert prefs.context_now.text() == f"Now 1,024 tokens (trained for {window.pair.n_ctx_train:,})."
    assert window.pair.n_ctx_train == 32_768  # the default target's
    prefs.context.setValue(0)
    assert prefs.context.text() == "Auto"
    first = window.pair
    prefs.accept()
    assert window.prefs.context == 0
    qtbot.waitUntil(lambda: window.pair is not first and not window.busy, timeout=LOAD_TIMEOUT_MS)
    assert 1024 < window.pair.n_ctx <= 32_768 and window.pair.n_ctx % 256 == 0
    window.open_preferences()
    assert prefs.context_now.text() == f"Now {window.pair.n_ctx:,} tokens (trained for 32,768)."
