"""`draftlight ledger show|export|clear` on a ledger made here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.ledger import recording
from engine.ledger.store import Setup

SETUP = Setup("t.gguf", "d.gguf", "model", "gguf:1:aa", "gguf:2:bb", "llama-cpp-python 0.3.36", "0.1.0", "greedy", "3")


@pytest.fixture
def book(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DRAFTLIGHT_LEDGER", str(tmp_path / "ledger.sqlite3"))
    book = recording.ledger()
    book.add(SETUP, "chat", (10, 8), (9, 6), [("code", 18, 15)], at=1.8e9)
    return book


def test_show_export_and_clear(book, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["ledger", "show"]) == 0
    out = capsys.readouterr().out
    assert "t.gguf + d.gguf: 1 reply" in out
    assert "Ledger: 1 reply of this pair in the ledger; a baseline needs more drafts" in out
    assert main(["ledger", "export", "--format", "json", "--output", str(tmp_path / "l.json")]) == 0
    assert json.loads((tmp_path / "l.json").read_text())["replies"][0]["accepted_per_position"] == [9, 6]
    assert main(["ledger", "clear"]) == 2
    assert "add --yes to do it" in capsys.readouterr().err
    assert main(["ledger", "clear", "--yes"]) == 0
    assert capsys.readouterr().out.startswith("Forgot 1 reply from the acceptance ledger")
    assert book.replies() == []
