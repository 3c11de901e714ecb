"""The teaching window with replay files and no model: a broken file is a sentence in the
window, and token text is shown as typed, never read as HTML."""

from __future__ import annotations

import json

import pytest
from PySide6.QtGui import QTextDocument

from app.teaching import TeachingWindow
from app.teachtext import Totals, explain_round, lookup_sentence
from app.teachview import CandidatesView
from app.transcript import tooltip
from engine import NgramMatch, TokenKind
from tests.engine.replay_samples import sample_replay

HOSTILE = ["<h1>BIG</h1>", "<img src=x>", "a & b", "<b>"]


def shown_text(rich: str) -> str:
    """What a person reads: the rich text as Qt renders it."""
    doc = QTextDocument()
    doc.setHtml(rich)
    return doc.toPlainText()


@pytest.fixture
def teach(qtbot):
    window = TeachingWindow()
    qtbot.addWidget(window)
    window.show()
    return window


def hostile_replay(tmp_path):
    replay = sample_replay(rounds=6)
    ids = sorted(replay.pieces)
    for i, text in zip(ids, HOSTILE * 100):
        replay.pieces[i] = text
    data = replay.to_json()
    del data["pieces"][str(ids[-1])]  # one id without text: the "<id>" fallback label
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path, ids[-1]


def test_a_broken_replay_is_one_sentence_in_the_window_and_it_keeps_working(teach, tmp_path):
    bad = tmp_path / "bad.json"
    data = sample_replay().to_json()
    data["pieces"] = []
    bad.write_text(json.dumps(data))
    assert not teach.open_replay_file(bad)
    assert shown_text(teach.explanation.text()) == "bad.json is a damaged replay: pieces is list, not an object."
    good = sample_replay().save(tmp_path / "good.json")
    assert teach.open_replay_file(good)
    assert "Replay of target.gguf with drafter.gguf: 12 rounds" in teach.explanation.text()


def test_token_text_in_the_explanations_is_shown_as_typed(teach, tmp_path):
    path, missing = hostile_replay(tmp_path)
    assert teach.open_replay_file(path)
    seen = []
    while teach.stats is None:
        teach.step()
        seen.append(shown_text(teach.explanation.text()))
    everything = "\n".join(seen)
    for text in HOSTILE:
        assert repr(text) in everything
    drafted = [t for s in teach.replay.steps for t in s.drafts]
    if missing in drafted:
        assert repr(f"<{missing}>") in everything


def test_explain_round_escapes_pieces_and_rejected_drafts():
    step = next(s for s in sample_replay().steps if s.tokens[-1].kind is TokenKind.REPLACED)
    last = step.tokens[-1]
    from dataclasses import replace

    step = replace(step, tokens=(*step.tokens[:-1], replace(last, rejected_text="<h1>no</h1>")))
    text = shown_text(explain_round(step, Totals(), 40.0, lambda t: "<img src=x>" if t % 2 else f"<{t}>"))
    assert "'<h1>no</h1>'" in text
    assert "'<img src=x>'" in text or any(f"'<{t}>'" in text for t in step.drafts)


def test_prompt_lookups_source_is_said_as_typed_in_the_prompt_or_the_reply():
    """Where an n-gram round's drafts came from: the matched tokens as typed, and where they were seen."""
    piece = {1: "<b>", 2: "x"}.get
    in_prompt = shown_text(lookup_sentence(NgramMatch(start=4, ngram=(1, 2), follow=(7, 8)), 30, piece))
    assert in_prompt == (
        "Prompt lookup: the last 2 tokens ('<b>' 'x') appeared before in the prompt (its token 5 of 30); "
        "the drafts are the tokens that followed them there."
    )
    in_reply = shown_text(lookup_sentence(NgramMatch(start=33, ngram=(2,), follow=(7,)), 30, piece))
    assert in_reply == (
        "Prompt lookup: the last token ('x') appeared before in the reply (its token 4); "
        "the drafts are the tokens that followed it there."
    )


def test_tooltips_and_candidate_titles_show_token_text_as_typed(qtbot):
    step = next(s for s in sample_replay().steps if s.tokens[-1].kind is TokenKind.REPLACED)
    from dataclasses import replace

    token = replace(step.tokens[-1], text="<h1>x</h1>", rejected_text="<img src=y>")
    tip = shown_text(tooltip(token))
    assert "'<h1>x</h1>'" in tip and "'<img src=y>'" in tip
    view = CandidatesView()
    qtbot.addWidget(view)
    view.show_token(token, lambda t: "<b>bold?</b>")
    assert "'<b>bold?</b>'" in shown_text(view.plot.plotItem.titleLabel.text)
