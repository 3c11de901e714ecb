"""A chat reply kept as a replay: recorded on the engine's thread, stored beside the reply,
exported as files that load back, and stepped through in teaching mode."""

from __future__ import annotations

import json

import pytest

from app import replaystore
from app.actions import NO_REPLAY
from app.store import StoredMessage
from app.storeopen import open_store
from engine import DraftlightError, TokenKind, load_replay
from tests.app.test_actions_messages import menu_texts, reply


def test_a_reply_without_rounds_says_why_it_cannot_be_stepped(window_at, tmp_path):
    store, _ = open_store(tmp_path / "c.sqlite3")
    cid = store.new_conversation("Old")
    store.add_message(cid, StoredMessage("user", "Name a colour."))
    mid = store.add_message(cid, reply("Teal."))
    store.close()
    window = window_at(tmp_path / "c.sqlite3")
    window.open_conversation(cid)
    assert replaystore.replay_of(window.store, mid) is None
    assert "Step through in teaching mode" not in menu_texts(window, mid)
    window.message_tools.teach_reply(mid)
    assert NO_REPLAY in window.notice.text()


def test_a_damaged_stored_replay_is_a_sentence(window_at, tmp_path):
    store, _ = open_store(tmp_path / "c.sqlite3")
    cid = store.new_conversation("Damaged")
    mid = store.add_message(cid, reply("Teal."))
    store.db.execute("UPDATE messages SET replay = ? WHERE id = ?", ('{"format": "draftlight-replay"', mid))
    store.db.commit()
    with pytest.raises(DraftlightError, match=f"reply {mid} are damaged"):
        replaystore.replay_of(store, mid)
    store.db.execute("UPDATE messages SET replay = ? WHERE id = ?", (json.dumps({"format": "nope"}), mid))
    store.db.commit()
    with pytest.raises(DraftlightError, match="not a Draftlight replay"):
        replaystore.replay_of(store, mid)
    store.close()


@pytest.mark.slow
def test_a_local_reply_keeps_its_rounds_and_exports_them(make_window, send, tmp_path):
    window = make_window(max_tokens=24, depth=2)
    stats = send(window, "Write a Python function that adds two numbers.")
    assert stats is not None
    message = window.store.messages(window.conversation_id)[-1]
    replay = replaystore.replay_of(window.store, message.id)
    assert replay is not None
    tokens = [t for step in replay.steps for t in step.tokens]
    assert [(t.token_id, t.kind) for t in tokens] == [(t.token_id, t.kind) for t in message.tokens]
    assert replay.stats.to_json() == message.stats.to_json()
    assert sum(step.round.drafted for step in replay.steps) == stats.drafted
    assert replay.target == window.pair.target_name and replay.config["depth"] == 2
    assert "adds two numbers" in replay.prompt  # the rendered conversation the target read
    for t in tokens:  # every emitted and rejected token has its text, as the model spells it
        assert replay.piece(t.token_id) == t.text or t.kind is TokenKind.UNREPORTED
        if t.rejected_id is not None:
            assert not replay.piece(t.rejected_id).startswith("<")
    assert "Export as replay…" in menu_texts(window, message.id)

    files = replaystore.export_conversation(window.store, window.conversation_id, tmp_path, "Adds")
    assert [f.name for f in files] == ["Adds reply 1.json"]
    loaded = load_replay(files[0])
    assert loaded.to_json() == replay.to_json()

    window.message_tools.teach_reply(message.id)
    teaching = window.teaching
    assert teaching.replay is not None and len(teaching.replay.steps) == len(replay.steps)
    teaching.step()  # the first round's drafts, then its verdict
    teaching.step()
    assert teaching.steps and teaching.steps[0].round == replay.steps[0].round
