"""Teaching mode: stepping through rounds live and from a replay; off and on side by side."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.selftest import visible
from app.teaching import TeachingWindow
from app.teachtext import Totals, explain_round
from engine import GenerationConfig, Message, TokenEvent, TokenKind

PROMPT = "Write a bubble sort in C++."


def _started(qtbot, window, depth=3):
    teach = window.open_teaching()
    qtbot.addWidget(teach)
    teach.prompt.setText(PROMPT)
    teach.depth.setValue(depth)
    teach.start()
    qtbot.waitUntil(lambda: not teach.waiting, timeout=120_000)
    return teach


def _finish(qtbot, teach):
    while teach.stats is None or teach.verdict_due is not None:
        teach.step()
        qtbot.waitUntil(lambda: not teach.waiting, timeout=120_000)


def test_a_round_shows_drafts_pending_then_the_verdict(qtbot, make_window, engine):
    window = make_window()
    teach = _started(qtbot, window)
    teach.step()  # round 0: the prompt's own pass wrote the first token; nothing was drafted
    qtbot.waitUntil(lambda: teach.verdict_due is not None, timeout=120_000)
    assert teach.verdict_due.round.from_prefill and teach.view.pending_text() == ""
    teach.step()
    assert "comes from the pass that read the prompt" in teach.explanation.text()
    first = [s.kind for s in teach.view.spans()]
    assert first == ["plain"]
    teach.step()  # phase 1 of round 1: the drafts, tentative
    qtbot.waitUntil(lambda: teach.verdict_due is not None, timeout=120_000)
    step = teach.verdict_due
    assert step.round.drafted == 3
    assert teach.view.pending_text() == "".join(engine.target.display(t) for t in step.drafts)
    assert [s.kind for s in teach.view.spans()] == first  # nothing new is coloured before the verdict
    teach.step()  # phase 2: the verdict
    assert teach.view.pending_text() == ""
    kinds = [s.kind for s in teach.view.spans()]
    assert kinds == first + [t.kind.value for t in step.tokens if visible(t)]
    replaced = [t for t in step.tokens if t.kind is TokenKind.REPLACED]
    assert teach.view.struck_texts() == [t.rejected_text for t in replaced if t.rejected_text]
    assert f"Round {step.round.round_index + 1}" in teach.explanation.text()
    assert f"proposed {step.round.drafted} tokens" in teach.explanation.text()


def test_stepping_shows_what_streaming_writes(qtbot, make_window, engine, monkeypatch):
    monkeypatch.setattr("app.teaching.TEACH_TOKENS", 40)
    window = make_window(depth=2)
    teach = _started(qtbot, window, depth=2)
    _finish(qtbot, teach)
    stepped = [t for s in teach.steps for t in s.tokens]
    prompt = engine.prompt_ids([Message("user", PROMPT)])
    streamed = [e for e in engine.stream(prompt, GenerationConfig(max_tokens=40, depth=2, top_candidates=5))
                if isinstance(e, TokenEvent)]  # fmt: skip
    assert [(t.token_id, t.kind) for t in stepped] == [(t.token_id, t.kind) for t in streamed]
    assert [s.kind for s in teach.view.spans()] == [t.kind.value for t in stepped if visible(t)]


def test_play_pause_and_speed(qtbot, make_window):
    window = make_window()
    teach = _started(qtbot, window)
    teach.speed.setValue(40)  # 4 rounds a second: 125 ms a phase
    assert teach.timer.interval() == 125
    teach.play()
    qtbot.waitUntil(lambda: len(teach.steps) >= 3, timeout=120_000)
    teach.pause()
    assert not teach.timer.isActive()
    shown = len(teach.steps)
    qtbot.wait(400)
    assert len(teach.steps) == shown
    teach.speed.setValue(1)  # slow motion: 0.1 rounds a second
    assert teach.timer.interval() == 5000


def test_a_replay_reproduces_colours_and_explanations(qtbot, make_window, tmp_path):
    window = make_window()
    teach = _started(qtbot, window)
    explanations = []
    while teach.stats is None or teach.verdict_due is not None:
        teach.step()
        qtbot.waitUntil(lambda: not teach.waiting, timeout=120_000)
        if teach.verdict_due is None and teach.steps and teach.stats is None:
            explanations.append(teach.explanation.text())
    live_spans = [(s.kind, s.background) for s in teach.view.spans()]
    path = tmp_path / "round.json"
    teach.current_replay().save(path)

    offline = TeachingWindow(main_window=None)  # no models at all
    qtbot.addWidget(offline)
    offline.open_replay(path)
    replayed = []
    while offline.stats is None or offline.verdict_due is not None:
        offline.step()
        if offline.verdict_due is None and offline.stats is None:
            replayed.append(offline.explanation.text())
    assert [(s.kind, s.background) for s in offline.view.spans()] == live_spans
    assert replayed == explanations
    assert offline.view.toPlainText() == teach.view.toPlainText()


def test_clicking_a_token_shows_both_models_candidates(qtbot, make_window, engine):
    window = make_window()
    teach = _started(qtbot, window)
    teach.step()
    qtbot.waitUntil(lambda: teach.verdict_due is not None, timeout=120_000)
    teach.step()
    span = teach.view.spans()[0]
    token = teach.view.tokens[span.token_index]
    from PySide6.QtGui import QTextCursor

    cursor = QTextCursor(teach.view.document())
    cursor.setPosition(span.start)
    rect = teach.view.cursorRect(cursor)
    qtbot.mouseClick(teach.view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center() + rect.topLeft() * 0)
    qtbot.waitUntil(lambda: bool(teach.candidates.rows), timeout=5_000)
    rows = teach.candidates.rows
    assert [r[0] for r in rows] == [engine.target.display(t) for t, _ in token.target_top][: len(rows)]
    assert rows[0][1] == token.target_top[0][1]
    assert len(rows) >= 5


def test_explanation_numbers_follow_the_formula():
    from engine import RoundEvent, RoundStep

    r = RoundEvent(
        round_index=0,
        drafted=2,
        accepted=2,
        draft_ms=20.0,
        verify_ms=70.0,
        commit_ms=0.5,
        rewind_ms=0.1,
        overhead_ms=0.2,
        draft_tokens=(5, 6),
        depth=2,
    )
    tokens = tuple(
        TokenEvent(token_id=t, text="x", kind=k, round_index=0, position=i, target_prob=0.9)
        for i, (t, k) in enumerate([(5, TokenKind.ACCEPTED), (6, TokenKind.ACCEPTED), (7, TokenKind.BONUS)])
    )
    step = RoundStep(r, tokens)
    totals = Totals()
    totals.add(step)
    text = explain_round(step, totals, 50.0, lambda t: f"t{t}")
    assert "= 1.81 plain passes" in text  # 90.5 ms / 50 ms
    assert "(1 + a) / c = 3.00 / 1.81 = <b>1.66x</b>" in text
    assert "added a bonus token 't7'" in text


def test_off_and_on_side_by_side_agree(qtbot, make_window):
    window = make_window()
    teach = window.open_teaching()
    qtbot.addWidget(teach)
    panel = teach.compare
    panel.prompt.setText("Name three primary colours.")
    panel.depth.setValue(2)
    panel.run()
    qtbot.waitUntil(lambda: panel.result is not None, timeout=300_000)
    result = panel.result
    assert [t.token_id for t in result.off.tokens] == [t.token_id for t in result.on.tokens]
    assert result.first_difference is None
    assert {t.kind for t in result.off.tokens} == {TokenKind.PLAIN}

    def shown(view):
        text = view.toPlainText()
        return "".join(text[s.start : s.end] for s in view.spans())

    assert shown(panel.off_view) == shown(panel.on_view) == result.on.stats.text.replace("\n", "")
    assert "identical" in panel.verdict.text()
    assert "tok/s" in panel.off_label.text() and "tok/s" in panel.on_label.text()
