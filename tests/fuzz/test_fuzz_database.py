"""Damaged chat databases: truncations at several points, random bytes, flipped page bytes.

A child process (under a time and memory budget, as bounded.py runs every fuzz case) opens
each damaged file as the window does, reads every conversation, writes a message and a
streamed reply, and reports what it was told. Each case must end with no signal and no
traceback, either with the database working or with it moved aside (kept byte for byte) and
a sentence saying so.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

from app.store import DAMAGED_RECORD, StoredMessage
from app.storeopen import open_store
from engine import TokenEvent, TokenKind
from tests.fuzz.bounded import case_count, run_bounded

CHILD = """
import json, sys
from pathlib import Path
from app.store import StoredMessage
from app.storeopen import open_store
from engine import TokenEvent, TokenKind

for name in sys.argv[1:]:
    failures = []
    store, notice = open_store(Path(name))
    store.on_failure = failures.append
    shown = 0
    for c in store.conversations():
        shown += len(store.messages(c.id))
    cid = store.new_conversation()
    store.add_message(cid, StoredMessage("user", "still here"))
    mid = store.begin_reply(cid)
    token = TokenEvent(token_id=1, text="ok", kind=TokenKind.BONUS, round_index=0, position=0, target_prob=1.0)
    store.append_reply(mid, [token])
    store.finish_reply(mid, cid, StoredMessage("assistant", "ok", [token], None, True))
    written = [m.content for m in store.messages(cid)]
    store.close()
    print(json.dumps({"case": name, "notice": notice, "failures": failures, "shown": shown, "written": written}))
"""


def healthy(path: Path) -> bytes:
    store, _ = open_store(path)
    token = TokenEvent(token_id=7, text="hi", kind=TokenKind.ACCEPTED, round_index=0, position=0, target_prob=0.5)
    for n in range(6):
        cid = store.new_conversation(f"conversation {n}")
        for i in range(30):
            store.add_message(cid, StoredMessage("user", f"question {i} " * 30))
            store.add_message(cid, StoredMessage("assistant", "hi " * 50, [token] * 20, None, False))
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file: the damage lands there
    store.close()
    return path.read_bytes()


def damaged_copies(rng: random.Random, data: bytes, count: int) -> list[tuple[str, bytes]]:
    page = int.from_bytes(data[16:18], "big")
    pages = len(data) // page
    cases = []
    for n in range(count):
        how = ["truncate_page", "truncate_odd", "random", "flip_page", "flip_bytes", "zero_page"][n % 6]
        b = bytearray(data)
        if how == "truncate_page":
            b = b[: page * rng.randrange(0, pages)]
        elif how == "truncate_odd":
            b = b[: rng.randrange(1, len(data))]
        elif how == "random":
            b = bytearray(rng.randbytes(rng.choice([100, page, len(data)])))
        elif how == "flip_page":
            start = page * rng.randrange(1, pages)
            for off in range(start, start + page):
                b[off] ^= rng.randrange(1, 256)
        elif how == "flip_bytes":
            for _ in range(rng.randint(1, 16)):
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        else:
            start = page * rng.randrange(0, pages)
            b[start : start + page] = bytes(page)
        cases.append((f"{n:03d}-{how}", bytes(b)))
    return cases


def test_damaged_databases_are_kept_and_replaced_or_still_work(tmp_path):
    data = healthy(tmp_path / "healthy.sqlite3")
    rng = random.Random(5005)
    cases = damaged_copies(rng, data, case_count(fast=24, full=240))
    names = []
    for name, content in cases:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "conversations.sqlite3").write_bytes(content)
        names.append(str(folder / "conversations.sqlite3"))
    outcome = run_bounded(["-c", CHILD, *names], timeout_s=30 + 2 * len(cases), memory_mb=1024)
    assert outcome.problems() == [] and outcome.returncode == 0, outcome.stderr[-2000:]
    reports = [json.loads(line) for line in outcome.stdout.splitlines()]
    assert len(reports) == len(cases)
    moved = 0
    for (name, content), report in zip(cases, reports):
        folder = Path(report["case"]).parent
        notice = report["notice"]
        if notice:
            assert notice.startswith("The chat database was damaged (") and "a fresh one was started" in notice
            assert "\n" not in notice, notice
            kept = [p for p in folder.iterdir() if ".damaged-" in p.name and p.suffix == ".sqlite3"]
            assert len(kept) == 1 and kept[0].read_bytes() == content, name
            moved += 1
        for failure in report["failures"]:  # damage the quick check missed: said, never raised
            assert failure == DAMAGED_RECORD, failure
        assert report["written"] == ["still here", "ok"], name  # new messages always reach the disk
    assert moved >= len(cases) // 2
    assert os.path.getsize(tmp_path / "healthy.sqlite3") == len(data)
