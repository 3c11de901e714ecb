"""Why drafts were rejected, on screen: the ranks chart, the p_min what-if, the hover, the
teaching words, and acceptance by content under each reply and in the prompt lab."""

from __future__ import annotations

import pytest

from app.labresults import LabResults, LabRun
from app.teachtext import Totals, explain_round, rank_sentence
from app.transcript import tooltip
from engine import RANK_BUCKETS, BenchPrompt, RoundEvent, RoundStep, TokenEvent, TokenKind, rank_bucket

PROSE = "Write a short travel blog paragraph about a morning in Lisbon."


def test_a_reply_shows_why_drafts_were_rejected_and_how_each_kind_of_text_fared(qtbot, make_window, send):
    window = make_window(depth=3, max_tokens=40)
    stats = send(window, PROSE)
    window.charts.refresh()
    replaced = [t for t in window.reply_tokens if t.kind is TokenKind.REPLACED]
    assert len(replaced) >= 3 and all(t.draft_rank >= 2 for t in replaced)  # greedy: never its first choice
    counts = {b: sum(rank_bucket(t.draft_rank) == b for t in replaced) for b in RANK_BUCKETS}
    m = window.chart_model
    assert m.message_ranks == counts == m.session_ranks
    heights = window.charts.ranks_message.opts["height"]
    assert list(heights) == pytest.approx([counts[b] / len(replaced) for b in RANK_BUCKETS])
    anatomy = m.anatomy()
    assert anatomy.rejections == len(replaced)
    assert window.charts.what_if.text() == m.best_what_if()
    assert window.charts.what_if.text().startswith(("With p_min", "No confidence cutoff"))
    assert anatomy.summary() in window.charts.ranks_plot.toolTip()
    # The hover, the line under the reply, the prompt lab's column and its export.
    assert rank_sentence(replaced[0]) in tooltip(replaced[0])
    assert stats.content_summary()  # it drafted: a line of acceptance by content
    assert f"by content: {stats.content_summary()}" in window.transcript.toPlainText()
    results = LabResults(runs=[LabRun(0, BenchPrompt("prose", "prose", PROSE), 3, stats, ())])
    column = next(c for c in results.columns() if c.header == "By content")
    assert column.value(results.runs[0]) == stats.content_summary()
    assert stats.content_summary() in results.markdown()


def test_the_teaching_words_name_the_drafters_rank():
    r = RoundEvent(round_index=4, drafted=3, accepted=1, draft_tokens=(11, 12, 13), draft_ms=3, verify_ms=9)
    tokens = (
        TokenEvent(token_id=11, text="a", kind=TokenKind.ACCEPTED, round_index=4, position=0, target_prob=0.9),
        TokenEvent(token_id=20, text="b", kind=TokenKind.REPLACED, round_index=4, position=1, target_prob=0.6,
                   rejected_id=12, rejected_text="c", draft_rank=2, rejected_prob=0.55),
    )  # fmt: skip
    text = explain_round(RoundStep(r, tokens), Totals(), 10.0, lambda t: f"t{t}")
    assert (
        "The target's token was the drafter's 2nd choice, and the drafter was 55% sure of its draft: "
        "a draft tree of width 2 would have caught it." in text
    )
