"""The window with drafters that read the target: an MTP head, and a hybrid target that rolls back.

The models are tiny random-weight files written at test time (tests/engine/synthetic.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("gguf")

from app import settings
from app.selftest import check_document
from app.window import MainWindow
from engine import TokenKind

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from synthetic import hybrid_qwen35

LOAD_TIMEOUT_MS = 60_000


@pytest.fixture
def mtp_window(qtbot, tmp_path):
    target = hybrid_qwen35(tmp_path / "hybrid-mtp.gguf", nextn=True)
    prefs = settings.Preferences(target=str(target), drafter="mtp", depth=3, max_tokens=24)
    window = MainWindow(store_path=tmp_path / "c.sqlite3", prefs=prefs)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.pair is not None and not window.busy, timeout=LOAD_TIMEOUT_MS)
    yield window
    window.close()


def test_the_target_drafts_for_itself_in_the_window(qtbot, mtp_window):
    window = mtp_window
    assert window.pair.drafter == "mtp" and window.pair.drafter_name.endswith("MTP head")
    assert "drafts for itself with the MTP head" in window.side.verdict.text()
    assert "MTP head" in window.windowTitle()
    window.input.setPlainText("the mill on the river turned; the mill on the river")
    with qtbot.waitSignal(window.reply_finished, timeout=LOAD_TIMEOUT_MS) as blocker:
        window.send()
    stats = blocker.args[0]
    assert stats.generated_tokens == 24 and stats.drafted > 0 and stats.depth == 3
    kinds = {t.kind for t in window.reply_tokens}
    assert TokenKind.REPLACED in kinds  # rejected drafts, each undone on the hybrid target's state
    assert check_document(window.transcript, window.reply_tokens) == []
