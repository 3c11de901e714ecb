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
    assert "rejected drafts are undone from per-token snapshots (up to 6 tokens)" in window.side.verdict.text()
    assert "MTP head" in window.windowTitle()
    assert window.status.labels["drafter"].text() == "drafting: the target's MTP head"
    window.input.setPlainText("the mill on the river turned; the mill on the river")
    with qtbot.waitSignal(window.reply_finished, timeout=LOAD_TIMEOUT_MS) as blocker:
        window.send()
    stats = blocker.args[0]
    assert stats.generated_tokens == 24 and stats.drafted > 0 and stats.depth == 3
    kinds = {t.kind for t in window.reply_tokens}
    assert TokenKind.REPLACED in kinds  # rejected drafts, each undone on the hybrid target's state
    assert check_document(window.transcript, window.reply_tokens) == []


def test_teaching_steps_through_the_heads_rounds(qtbot, mtp_window):
    teach = mtp_window.open_teaching()
    qtbot.addWidget(teach)
    teach.prompt.setText("the mill on the river turned; the mill on the river")
    teach.depth.setValue(3)
    teach.start()
    qtbot.waitUntil(lambda: not teach.waiting, timeout=LOAD_TIMEOUT_MS)
    for _ in range(2):  # round 0 (the prompt's pass): drafts, then the verdict
        teach.step()
        qtbot.waitUntil(lambda: not teach.waiting, timeout=LOAD_TIMEOUT_MS)
    teach.step()  # round 1: the head's three drafts, pending
    qtbot.waitUntil(lambda: teach.verdict_due is not None, timeout=LOAD_TIMEOUT_MS)
    step = teach.verdict_due
    assert step.round.drafted == 3 and len(step.drafts) == 3
    teach.step()  # the verdict
    assert teach.view.pending_text() == ""
    assert f"proposed {step.round.drafted} tokens" in teach.explanation.text()


def test_the_prompt_lab_runs_the_head_at_each_depth(qtbot, mtp_window):
    lab = mtp_window.open_prompt_lab()
    lab.prompts.setPlainText("the mill on the river\nthe river and the mill")
    for depth, box in lab.depth_boxes.items():
        box.setChecked(depth in (0, 2))
    lab.max_tokens.setValue(12)
    assert lab.start()
    qtbot.waitUntil(lambda: not lab.running, timeout=LOAD_TIMEOUT_MS)
    runs = lab.model.results.runs
    assert [(r.prompt_index, r.depth) for r in runs] == [(0, 0), (0, 2), (1, 0), (1, 2)]
    for plain, drafted in (runs[0:2], runs[2:4]):
        assert drafted.stats.token_ids == plain.stats.token_ids  # the head changes the speed, not the words
        assert drafted.stats.drafted > 0 and plain.stats.drafted == 0


def test_gemma_4s_assistant_drafts_in_the_window_and_the_teaching_view(qtbot, tmp_path):
    from synthetic_gemma4 import gemma4, gemma4_assistant, known_tables

    tables = known_tables()  # drafts the construction makes land now and then
    target = gemma4(tmp_path / "gemma-4.gguf", known=tables)
    assistant = gemma4_assistant(tmp_path / "mtp-gemma-4.gguf", known=tables)
    prefs = settings.Preferences(target=str(target), drafter=str(assistant), depth=3, max_tokens=24)
    window = MainWindow(store_path=tmp_path / "c.sqlite3", prefs=prefs)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.pair is not None and not window.busy, timeout=LOAD_TIMEOUT_MS)
    try:
        assert window.pair.drafter_kind == "assistant"
        assert (
            "Gemma 4's assistant model: it reads the target's hidden state and attends to its memory. "
            "The drafter shares the target's vocabulary" in window.side.verdict.text()
        )
        assert window.status.labels["drafter"].text() == "drafting: Gemma 4's assistant"
        window.input.setPlainText("the mill on the river turned; the mill on the river")
        with qtbot.waitSignal(window.reply_finished, timeout=LOAD_TIMEOUT_MS) as blocker:
            window.send()
        stats = blocker.args[0]
        assert stats.generated_tokens == 24 and stats.accepted > 0
        kinds = {t.kind for t in window.reply_tokens}
        assert {TokenKind.ACCEPTED, TokenKind.REPLACED} <= kinds
        assert check_document(window.transcript, window.reply_tokens) == []
        teach = window.open_teaching()
        qtbot.addWidget(teach)
        teach.prompt.setText("the mill on the river")
        teach.depth.setValue(2)
        teach.start()
        qtbot.waitUntil(lambda: not teach.waiting, timeout=LOAD_TIMEOUT_MS)
        for _ in range(3):  # round 0's drafts and verdict, then round 1's drafts
            teach.step()
            qtbot.waitUntil(lambda: not teach.waiting, timeout=LOAD_TIMEOUT_MS)
        qtbot.waitUntil(lambda: teach.verdict_due is not None, timeout=LOAD_TIMEOUT_MS)
        assert len(teach.verdict_due.drafts) == 2
    finally:
        window.close()
