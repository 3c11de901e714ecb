"""The status bar's break-even gauge: a plain reply, then a speculative one, held against it."""

from __future__ import annotations

from app.statusbar import plain_basis
from engine import gauge

PROMPT = "Write a JSON object for a cat."


def test_the_gauge_holds_a_speculative_reply_against_the_plain_one(qtbot, make_window, send):
    window = make_window(depth=0)
    plain = send(window, PROMPT)
    assert window.status.labels["gauge"].text() == ""  # nothing drafted: nothing to judge
    window.side.set_depth(2)
    spec = send(window, PROMPT)
    # the basis shows where speculation saves time: on a busy box the plain reply may be the slower one
    expected = gauge([spec], plain.decode_s / plain.rounds, plain_basis([plain], ""))
    label = window.status.labels["gauge"]
    assert label.text() == f"plain {expected.plain_tps:.1f} tok/s · {expected.short()}"
    assert label.toolTip() == f"This reply: {expected.verdict()}.\nThis conversation: {expected.verdict()}."
    assert abs(expected.plain_tps - plain.decoded_tokens / plain.decode_s) < 1e-9
