"""The ledger on disk: what a reply adds, bounds, damaged and foreign files, export and clear."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path

import pytest

from engine.ledger import store
from engine.ledger.report import export_csv, export_json, pair_ledger
from engine.ledger.store import Setup, open_ledger

SETUP = Setup("t.gguf", "d.gguf", "model", "gguf:1:aa", "gguf:2:bb", "llama-cpp-python 0.3.36", "0.1.0", "greedy", "3")


def test_a_reply_is_kept_with_its_setup_positions_and_content(tmp_path: Path) -> None:
    book = open_ledger(tmp_path / "ledger.sqlite3")
    book.add(SETUP, "chat", (10, 9, 7), (9, 7, 4), [("code", 20, 16), ("prose", 6, 4)], at=1000.0)
    book.close()
    book = open_ledger(tmp_path / "ledger.sqlite3")  # kept across runs
    (reply,) = book.replies(("t.gguf", "d.gguf"))
    assert (reply.at, reply.source, reply.drafted, reply.accepted) == (1000.0, "chat", 26, 20)
    assert (reply.drafted_per_position, reply.accepted_per_position) == ((10, 9, 7), (9, 7, 4))
    assert reply.content == {"code": (20, 16), "prose": (6, 4)}
    assert reply.setup == SETUP
    assert book.notice == "" and book.failure == ""
    db = sqlite3.connect(tmp_path / "ledger.sqlite3")  # readable by a person with sqlite3
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == ("1",)
    assert db.execute("SELECT drafted_per_position FROM replies").fetchone() == ("10,9,7",)


def test_the_ledger_is_bounded_oldest_replies_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "MAX_REPLIES", 5)
    book = open_ledger(tmp_path / "ledger.sqlite3")
    for i in range(8):
        book.add(SETUP, "chat", (i + 1,), (i,), [("code", i + 1, i)], at=float(i + 1))
    assert [r.at for r in book.replies()] == [4.0, 5.0, 6.0, 7.0, 8.0]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"not a database at all, only text" * 200, "SQLite cannot read it: file is not a database"),
        (None, "it is a database, but not a ledger"),
    ],
)
def test_a_damaged_or_foreign_file_is_set_aside_and_a_new_ledger_started(
    tmp_path: Path, content: bytes | None, reason: str
) -> None:
    path = tmp_path / "ledger.sqlite3"
    if content is None:
        other = sqlite3.connect(path)
        other.execute("CREATE TABLE recipes (name TEXT)")
        other.commit()
        other.close()
    else:
        path.write_bytes(content)
    book = open_ledger(path)
    (aside,) = [p for p in tmp_path.iterdir() if ".set-aside-" in p.name and not p.name.endswith(("-wal", "-shm"))]
    assert book.notice == (
        f"The acceptance ledger at {path} could not be used, as {reason}: it was moved to {aside.name} "
        "and a new ledger started."
    )
    if content is not None:
        assert aside.read_bytes() == content  # kept as it was
    book.add(SETUP, "chat", (3,), (2,), [("code", 3, 2)])
    assert len(book.replies()) == 1 and book.where == str(path)


def test_a_newer_schema_is_set_aside_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    book = open_ledger(path)
    book.db.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
    book.db.commit()
    book.close()
    again = open_ledger(path)
    assert "a newer Draftlight wrote it (schema 99)" in again.notice


def test_an_unwritable_place_keeps_the_ledger_in_memory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    book = open_ledger(blocker / "ledger.sqlite3")  # a file where the folder should be
    assert book.where == "memory"
    assert book.notice.startswith(f"The acceptance ledger cannot be written at {blocker / 'ledger.sqlite3'} (")
    assert book.notice.endswith("this run's acceptance is kept in memory only.")
    book.add(SETUP, "chat", (3,), (2,), [("code", 3, 2)])
    assert len(book.replies()) == 1


def test_export_and_clear(tmp_path: Path) -> None:
    book = open_ledger(tmp_path / "ledger.sqlite3")
    book.add(SETUP, "serve", (4, 2), (3, 1), [("json", 6, 4)], at=86400.0 * 365)
    rows = list(csv.DictReader(io.StringIO(export_csv(book))))
    assert [(r["kind"], r["drafted"], r["accepted"], r["source"]) for r in rows] == [
        ("all", "6", "4", "serve"),
        ("json", "6", "4", "serve"),
    ]
    data = json.loads(export_json(book))
    assert data["replies"][0]["by_content"] == {"json": {"drafted": 6, "accepted": 4}}
    assert data["replies"][0]["setup"]["target_fingerprint"] == "gguf:1:aa"
    assert book.clear() == 1
    assert book.replies() == [] and pair_ledger(book, "t.gguf", "d.gguf").replies == 0
