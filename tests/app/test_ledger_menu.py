"""Tools → Acceptance ledger and the pairing panel's history, on a ledger made here."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from app.ledgermenu import clear_ledger, export_ledger
from app.pairing import ledger_html
from engine.ledger import recording
from engine.ledger.report import pair_ledger
from engine.ledger.store import Setup

SETUP = Setup("t.gguf", "d.gguf", "model", "gguf:1:aa", "gguf:2:bb", "llama-cpp-python 0.3.36", "0.1.0", "greedy", "3")


@pytest.fixture
def book(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DRAFTLIGHT_LEDGER", str(tmp_path / "ledger.sqlite3"))
    book = recording.ledger()
    at = time.mktime((2026, 12, 1, 12, 0, 0, 0, 0, -1))
    for i in range(30):  # a baseline: 3,000 drafts of code
        book.add(SETUP, "app", (50, 50), (45, 41), [("code", 100, 86)], at=at + i)
    changed = Setup(**{**{f: getattr(SETUP, f) for f in SETUP.__dataclass_fields__}, "target_fingerprint": "gguf:1:cc"})
    for i in range(3):
        book.add(changed, "app", (50, 50), (35, 25), [("code", 100, 60)], at=at + 2 * 86400 + i)
    return book


def test_export_and_clear_from_the_menu(book, tmp_path: Path) -> None:
    out = tmp_path / "ledger.json"
    assert export_ledger(out, "json") == f"Exported the acceptance ledger (33 replies) to {out}."
    assert len(json.loads(out.read_text())["replies"]) == 33
    csv_out = tmp_path / "ledger.csv"
    export_ledger(csv_out, "csv")
    assert csv_out.read_text().splitlines()[0].startswith("at,source,target,drafter")
    assert clear_ledger() == "Forgot 33 replies from the acceptance ledger: each pair's baseline starts again."
    assert book.replies() == []


def test_the_pairing_panel_shows_the_warning_and_marks_the_change(book) -> None:
    shown = ledger_html(pair_ledger(book, "t.gguf", "d.gguf"))
    assert "Acceptance on code fell from 86% (3,000 drafts) to 60% (300 drafts) since the target" in shown
    assert "<td align='right'>2026-12-03</td><td align='right'>3</td><td align='right'>60% (300)</td>" in shown
    assert "target file changed" in shown
