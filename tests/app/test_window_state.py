"""What the window shows about its state, with no model: a damaged or unwritable chat
database, a reply cut short by a kill, and a close that never waits on a stuck engine."""

from __future__ import annotations

import threading
import time

from PySide6.QtCore import QMetaObject, QObject, Qt, Slot

from app import enginethread
from app.store import CUT_SHORT, StoredMessage
from app.storeopen import open_store
from engine import TokenEvent, TokenKind


def test_a_damaged_database_is_said_in_the_window(window_at, tmp_path):
    path = tmp_path / "conversations.sqlite3"
    path.write_bytes(b"\x00garbage" * 5000)
    window = window_at(path)
    said = window.notice.text()
    assert said.startswith(
        "The chat database was damaged (file is not a database): it was kept as conversations.damaged-"
    )
    assert "a fresh one was started" in said
    assert len(window.store.conversations()) == 1  # a fresh, empty conversation to type into


def test_a_folder_in_the_way_is_said_and_the_window_still_works(window_at, tmp_path):
    path = tmp_path / "conversations.sqlite3"
    path.mkdir()
    window = window_at(path)
    assert window.store.in_memory
    assert "where the chat database should be: move or rename it" in window.notice.text()
    window.new_conversation()
    assert len(window.store.conversations()) == 2


def test_a_reply_cut_short_by_a_kill_shows_so_with_its_colours(window_at, tmp_path):
    path = tmp_path / "conversations.sqlite3"
    store, _ = open_store(path)
    cid = store.new_conversation("story")
    store.add_message(cid, StoredMessage("user", "Tell me a story."))
    kinds = [TokenKind.PLAIN, TokenKind.ACCEPTED, TokenKind.ACCEPTED, TokenKind.BONUS, TokenKind.REPLACED]
    tokens = [
        TokenEvent(token_id=i, text=f"w{i} ", kind=k, round_index=i, position=0, target_prob=0.9)
        for i, k in enumerate(kinds)
    ]
    store.append_reply(store.begin_reply(cid), tokens)
    del store  # no close, no finish: as a SIGKILL leaves it
    window = window_at(path)
    text = window.transcript.toPlainText()
    assert "w0 w1 w2 w3 w4" in text and CUT_SHORT in text
    assert [s.kind for s in window.transcript.spans()] == [k.value for k in kinds]
    assert window.store.messages(cid)[-1].interrupted


def test_closing_never_waits_long_on_a_stuck_engine_and_never_aborts(window_at, tmp_path, monkeypatch):
    window = window_at(tmp_path / "c.sqlite3")
    release = threading.Event()

    class Stuck(QObject):  # a llama.cpp call that ignores Stop, on the engine's thread
        @Slot()
        def run(self) -> None:
            release.wait(60)

    stuck = Stuck()
    stuck.moveToThread(window.thread)
    QMetaObject.invokeMethod(stuck, "run", Qt.ConnectionType.QueuedConnection)
    exits = []
    window.hard_exit = exits.append
    monkeypatch.setattr(enginethread, "CLOSE_WAIT_MS", 300)
    started = time.monotonic()
    window.close()
    assert exits == [0]  # the process would end here, cleanly, everything saved
    assert time.monotonic() - started < 5
    release.set()
    assert window.thread.wait(10_000)  # let the test's process carry on without Qt's abort


def test_closing_an_idle_window_ends_the_engine_thread(window_at, tmp_path):
    window = window_at(tmp_path / "c.sqlite3")
    exits = []
    window.hard_exit = exits.append
    window.close()
    assert exits == [] and window.thread.isFinished()
