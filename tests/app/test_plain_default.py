"""The app where drafts cannot pay: Auto replies run plain and fast, it says why, and offers to speculate anyway."""

from __future__ import annotations

from engine import AUTO, TokenKind
from engine.measure.profile import save_profile
from engine.runtime import RuntimeOptions
from tests.engine.box_profiles import HOPELESS, profile

PROMPT = "Write a bubble sort in Python."
LOAD_TIMEOUT_MS = 180_000


def test_plain_where_drafts_cannot_pay_and_speculation_on_request(
    qtbot, make_window, send, monkeypatch, tmp_path, target_path, drafter_path
):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path / "cache"))
    save_profile(profile(target_path, drafter_path, RuntimeOptions(), *HOPELESS))  # what tuning this box found
    window = make_window(depth=AUTO)
    assert window.pair.plain and window.pair.drafter_name == "none" and window.pair.mode == "fast"
    assert window.pair.drafter == str(drafter_path)  # the picker keeps the user's choice
    assert window.notice.text().startswith("Speculation cannot pay on this machine")
    assert window.notice.shown().endswith("plain passes and yields at most 2 tokens.")  # one line; why? has the rest
    assert window.notice.why.isVisible() and len(window.notice.shown()) < len(window.notice.text())
    assert window.speculate_button.isVisible() and "fast" in window.windowTitle()
    stats = send(window, PROMPT)
    assert stats.depth == 0 and stats.drafted == 0 and stats.generated_tokens == 24
    assert {t.kind for t in window.reply_tokens} == {TokenKind.PLAIN}

    window.speculate_button.click()  # to watch it: the drafter loads, exact mode, depth 2
    qtbot.waitUntil(
        lambda: window.pair is not None and not window.pair.plain and not window.busy, timeout=LOAD_TIMEOUT_MS
    )
    assert window.side.chosen_depth() == 2 and window.pair.mode == "exact" and window.pair.drafter_name != "none"
    assert not window.speculate_button.isVisible() and window.notice.text() == ""
    stats = send(window, PROMPT)
    assert stats.depth == 2 and stats.drafted > 0
