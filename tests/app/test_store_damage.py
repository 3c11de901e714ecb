"""The chat database never stops the app: damaged files are moved aside and kept, unwritable
places fall back to memory, each said in a sentence; a reply is on disk while it streams."""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import pytest

from app.store import StoredMessage
from app.storeopen import open_store
from engine import TokenEvent, TokenKind


def token(i: int, kind: TokenKind = TokenKind.ACCEPTED, text: str | None = None) -> TokenEvent:
    return TokenEvent(token_id=100 + i, text=f"t{i} " if text is None else text, kind=kind, round_index=i // 3,
                      position=i % 3, target_prob=0.5)  # fmt: skip


def healthy_database(path: Path, messages: int = 200) -> bytes:
    store, notice = open_store(path)
    assert notice == ""
    cid = store.new_conversation("kept")
    for i in range(messages):
        store.add_message(cid, StoredMessage("user", f"message {i} " * 40))
    store.close()
    return path.read_bytes()


def flipped(data: bytes, page: int, page_size: int = 4096) -> bytes:
    b = bytearray(data)
    for off in range(page * page_size + 8, page * page_size + 200):
        b[off] ^= 0xFF
    return bytes(b)


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("half", "cut short"),
        ("header", "cut short"),
        ("random", "file is not a database"),
        ("page", "integrity check"),
    ],
)
def test_a_damaged_database_is_moved_aside_kept_and_a_fresh_one_started(tmp_path, case, says):
    path = tmp_path / "conversations.sqlite3"
    data = healthy_database(path)
    damaged = {
        "half": data[: len(data) // 2 + 100],
        "header": data[:60],
        "random": os.urandom(len(data)),
        "page": flipped(data, 3),
    }[case]
    path.write_bytes(damaged)
    store, notice = open_store(path)
    assert "The chat database was damaged" in notice and says in notice and "a fresh one was started" in notice
    kept = [p for p in tmp_path.iterdir() if ".damaged-" in p.name and not p.name.endswith(("-wal", "-shm"))]
    assert len(kept) == 1 and kept[0].name in notice
    assert kept[0].read_bytes() == damaged  # kept as it was, to be rescued
    assert store.where == str(path) and store.conversations() == []
    cid = store.new_conversation()
    store.add_message(cid, StoredMessage("user", "after"))
    store.close()
    again, notice = open_store(path)
    assert notice == "" and [m.content for m in again.messages(cid)] == ["after"]


def test_a_second_damaged_file_never_overwrites_the_first(tmp_path):
    path = tmp_path / "conversations.sqlite3"
    names = set()
    for n in range(3):  # within the same second: the timestamped names must still differ
        path.write_bytes(b"not a database %d" % n * 100)
        store, _ = open_store(path)
        store.close()
        names |= {p.name for p in tmp_path.iterdir() if ".damaged-" in p.name}
    assert len(names) == 3
    assert sorted((tmp_path / n).read_bytes()[-1:] for n in names) == [b"0", b"1", b"2"]


def test_a_folder_in_the_way_keeps_conversations_in_memory_and_says_what_to_do(tmp_path):
    path = tmp_path / "conversations.sqlite3"
    path.mkdir()
    store, notice = open_store(path)
    assert store.in_memory
    assert notice.startswith(f"There is a folder at {path}, where the chat database should be: move or rename it")
    assert "kept in memory only" in notice
    cid = store.new_conversation()
    store.add_message(cid, StoredMessage("user", "hello"))
    assert [m.content for m in store.messages(cid)] == ["hello"]
    assert path.is_dir()  # nothing of the user's was touched


def test_a_file_where_the_folder_should_be(tmp_path):
    (tmp_path / "data").write_text("mine")
    store, notice = open_store(tmp_path / "data" / "conversations.sqlite3")
    assert store.in_memory and f"Cannot make the folder {tmp_path / 'data'}" in notice
    assert "restart Draftlight" in notice and (tmp_path / "data").read_text() == "mine"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sysfs is Linux's")
def test_a_read_only_location_keeps_conversations_in_memory():
    store, notice = open_store(Path("/sys/conversations.sqlite3"))  # sysfs: read-only even for root
    assert store.in_memory
    assert notice.startswith("Cannot write the chat database /sys/conversations.sqlite3")
    assert "make /sys writable" in notice and "kept in memory only" in notice


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_shows_what_it_holds_in_memory(tmp_path):
    path = tmp_path / "ro" / "conversations.sqlite3"
    path.parent.mkdir()
    healthy_database(path, messages=3)
    path.parent.chmod(0o555)
    path.chmod(0o444)
    try:
        store, notice = open_store(path)
        assert store.in_memory and "Cannot write the chat database" in notice
        assert [c.title for c in store.conversations()] == ["kept"]
    finally:
        path.parent.chmod(0o755)


def test_a_streaming_reply_is_on_disk_marked_interrupted_until_it_ends(tmp_path):
    path = tmp_path / "c.sqlite3"
    store, _ = open_store(path)
    cid = store.new_conversation()
    store.add_message(cid, StoredMessage("user", "hi"))
    mid = store.begin_reply(cid)
    kinds = [TokenKind.PLAIN, TokenKind.ACCEPTED, TokenKind.REPLACED, TokenKind.BONUS]
    first = [token(i, kinds[i % 4]) for i in range(5)]
    store.append_reply(mid, first)
    store.append_reply(mid, [token(5, TokenKind.BONUS, "<end>")])
    # Another connection (the next start) sees the reply so far, provenance included.
    reader, _ = open_store(path)
    reply = reader.messages(cid)[-1]
    assert reply.role == "assistant" and reply.interrupted and reply.stats is None
    assert reply.tokens == [*first, token(5, TokenKind.BONUS, "<end>")]
    assert reply.content == "t0 t1 t2 t3 t4 <end>"
    reader.close()
    store.finish_reply(mid, cid, StoredMessage("assistant", "final", first, None, True))
    done = store.messages(cid)[-1]
    assert not done.interrupted and done.stopped and done.content == "final" and done.tokens == first
    assert store.db.execute("SELECT count(*) FROM reply_chunks").fetchone() == (0,)


def test_an_older_database_gains_the_interrupted_column(tmp_path):
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE conversations (id INTEGER PRIMARY KEY, title TEXT NOT NULL, created REAL NOT NULL, "
        "updated REAL NOT NULL); CREATE TABLE messages (id INTEGER PRIMARY KEY, conversation_id INTEGER NOT NULL, "
        "role TEXT NOT NULL, content TEXT NOT NULL, tokens TEXT, stats TEXT, stopped INTEGER NOT NULL DEFAULT 0, "
        "created REAL NOT NULL); INSERT INTO conversations VALUES (1, 'old', 0, 0); "
        "INSERT INTO messages(conversation_id, role, content, created) VALUES (1, 'user', 'from before', 0);"
    )
    db.commit()
    db.close()
    store, notice = open_store(path)
    assert notice == "" and [(m.content, m.interrupted) for m in store.messages(1)] == [("from before", False)]


def test_a_failed_write_is_a_sentence_not_an_exception(tmp_path):
    store, _ = open_store(tmp_path / "c.sqlite3")
    said = []
    store.on_failure = said.append
    cid = store.new_conversation()
    store.db.close()  # the connection is gone, as after a disk error
    assert store.add_message(cid, StoredMessage("user", "x")) == 0
    assert store.messages(cid) == [] and store.conversations() == []
    assert said and said[0].startswith("Could not save the message in the chat database")
    assert "what is on screen is kept" in said[0]


def test_a_damaged_record_shows_its_text_without_colours(tmp_path):
    store, _ = open_store(tmp_path / "c.sqlite3")
    said = []
    store.on_failure = said.append
    cid = store.new_conversation()
    store.add_message(cid, StoredMessage("assistant", "kept text", [token(0)], None, False))
    store.add_message(cid, StoredMessage("user", "second"))
    # What quick_check cannot see: a byte flipped inside the token list, and bad UTF-8 in a text.
    store.db.execute("UPDATE messages SET tokens = '{\"type\": \"tok' WHERE role = 'assistant'")
    store.db.execute("UPDATE messages SET content = CAST(x'7365636fff6e64' AS TEXT) WHERE role = 'user'")
    store.db.commit()
    messages = store.messages(cid)
    assert [(m.content, m.tokens) for m in messages] == [("kept text", []), ("seco\ufffdnd", [])]
    assert said == ["Part of a reply in the chat database is damaged: its text is shown without its colours."]
