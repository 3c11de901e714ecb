"""The window end to end: real models in the worker thread, the GUI driven by pytest-qt."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.selftest import check_document, check_pixels, visible
from app.window import MainWindow
from engine import GenerationConfig, Message, RoundEvent, RunStats, TokenEvent, TokenKind

REPLY_TIMEOUT_MS = 300_000

PROMPT = "Write a bubble sort in C++."


def test_spans_on_screen_equal_the_engines_events(qtbot, make_window, engine, send):
    window = make_window(depth=2)
    stats = send(window, PROMPT)
    assert isinstance(stats, RunStats) and stats.generated_tokens == 24
    # The same conversation through the headless engine gives the same tokens and kinds.
    prompt = engine.prompt_ids([Message("user", PROMPT)])
    events = list(engine.stream(prompt, GenerationConfig(max_tokens=24, depth=2)))
    headless = [(e.token_id, e.kind) for e in events if isinstance(e, TokenEvent)]
    assert [(t.token_id, t.kind) for t in window.reply_tokens] == headless
    assert {k for _, k in headless} >= {TokenKind.ACCEPTED, TokenKind.BONUS}
    # On screen: one coloured span per visible token, of its kind and colour.
    assert check_document(window.transcript, window.reply_tokens) == []
    spans = window.transcript.spans()
    assert [s.kind for s in spans] == [t.kind.value for t in window.reply_tokens if visible(t)]
    checked, problems = check_pixels(window.transcript)
    assert problems == [] and checked > 10


def test_check_document_catches_a_wrong_colour(qtbot, make_window, send):
    window = make_window(depth=2)
    send(window, PROMPT)
    wrong = list(window.reply_tokens)
    i = next(i for i, t in enumerate(wrong) if visible(t))
    flipped = TokenKind.PLAIN if wrong[i].kind is not TokenKind.PLAIN else TokenKind.BONUS
    wrong[i] = TokenEvent(**{**{f: getattr(wrong[i], f) for f in TokenEvent.__dataclass_fields__}, "kind": flipped})
    assert check_document(window.transcript, wrong)


def test_stop_ends_within_a_round_and_keeps_the_partial_reply(qtbot, make_window, send):
    window = make_window(depth=2, max_tokens=400)
    rounds_seen = []
    window.worker.events.connect(lambda batch: rounds_seen.extend(e for e in batch if isinstance(e, RoundEvent)))
    window.input.setPlainText("Write a long story about a lighthouse keeper.")
    with qtbot.waitSignal(window.reply_finished, timeout=REPLY_TIMEOUT_MS) as blocker:
        window.send()
        qtbot.waitUntil(lambda: len(rounds_seen) >= 3, timeout=REPLY_TIMEOUT_MS)
        delivered = len(rounds_seen)
        qtbot.mouseClick(window.stop_button, Qt.MouseButton.LeftButton)
    stats = blocker.args[0]
    assert stats.finish_reason.value == "cancelled"
    assert stats.rounds - delivered <= 2  # the round in flight, and at most one batch not yet delivered
    stored = window.store.messages(window.conversation_id)
    assert stored[-1].role == "assistant" and stored[-1].stopped
    assert stored[-1].content == stats.text and stats.text
    assert "stopped" in window.transcript.toPlainText()
    qtbot.waitUntil(lambda: window.send_button.isEnabled(), timeout=10_000)  # once the worker is idle
    assert not window.stop_button.isEnabled()


def test_chart_figures_equal_the_events(qtbot, make_window, send):
    window = make_window(depth=3)
    events = []
    window.worker.events.connect(events.extend)
    send(window, PROMPT)
    rounds = [e for e in events if isinstance(e, RoundEvent)]
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    stats = events[-1]
    m = window.chart_model
    # acceptance per position: accepted at i / rounds that drafted i, as the engine reports it
    assert m.message_acceptance() == pytest.approx(list(stats.acceptance_per_position))
    # decode tok/s after each round: tokens so far over round time so far
    t, n, expected = 0.0, 0, []
    for r in rounds:
        if r.from_prefill:  # the prompt's pass wrote round 0's token: not decode time
            continue
        t += r.total_ms / 1e3
        n += sum(1 for e in tokens if e.round_index == r.round_index)
        expected.append(n / t)
    assert [y for _, y in m.tps] == pytest.approx(expected)
    assert [y for _, y in m.mean_length][-1] == pytest.approx(stats.mean_accepted_length)
    last = rounds[-1]
    host = max(0.0, last.round_ms - last.total_ms)
    assert list(m.rounds)[-1] == (last.draft_ms, last.verify_ms, last.commit_ms, host)
    assert m.kinds[TokenKind.ACCEPTED] == sum(t.kind is TokenKind.ACCEPTED for t in tokens)
    window.charts.refresh()  # the timer's work, done now: curves hold the model's figures
    xs, ys = window.charts.tps_curve.getData()
    assert list(ys) == pytest.approx(expected)
    # the axes' limits move in steps (fewer redraws) and still hold every point
    for plot, (px, py) in ((window.charts.tps_plot, (xs, ys)), (window.charts.length_plot, zip(*m.mean_length))):
        (x0, x1), (y0, y1) = plot.viewRange()
        assert x0 <= min(px) and max(px) <= x1 and y0 <= min(py) and max(py) <= y1


def test_axis_limits_are_round_numbers():
    from app.charts import nice_ceiling

    values = (0, 0.7, 1, 1.2, 2.5, 21, 95, 100, 101)
    assert [nice_ceiling(v) for v in values] == pytest.approx([1, 0.8, 1, 1.5, 3, 30, 100, 100, 150])


def test_drafter_none_gives_only_plain_tokens(qtbot, make_window, send):
    window = make_window(drafter="none", depth=2)
    assert window.pair.drafter == "none"
    send(window, PROMPT)
    assert {t.kind for t in window.reply_tokens} == {TokenKind.PLAIN}


def test_an_incompatible_drafter_is_refused_with_the_reason(qtbot, make_window, smollm_path, send):
    window = make_window()
    window.side.models_requested.emit(window.pair.target, str(smollm_path))
    qtbot.waitUntil(lambda: "cannot draft for this target" in window.side.verdict.text(), timeout=120_000)
    reason = window.notice.text()
    assert "cannot draft for this target" in reason and "token" in reason
    assert "SentencePiece" in reason or "tokens and the drafter" in reason
    assert window.pair.drafter != str(smollm_path)
    assert window.side.drafter.currentData() == window.pair.drafter  # the picker snapped back
    assert send(window, "Say hi.") is not None  # still usable, with the old drafter


def test_a_bad_model_file_keeps_the_previous_models(qtbot, make_window, tmp_path, send):
    bad = tmp_path / "notes.gguf"
    bad.write_text("these are my notes, not a model")
    window = make_window()
    before = window.pair
    # worker signals reach pytest-qt on the worker's thread: wait for what the window shows
    window.side.models_requested.emit(str(bad), before.drafter)
    qtbot.waitUntil(lambda: "previous models stay loaded" in window.notice.text(), timeout=60_000)
    assert "not a GGUF model file" in window.notice.text()
    assert "not a GGUF model file" in window.side.verdict.text()
    assert window.pair == before
    stats = send(window, "Say hi.")
    assert stats is not None and stats.generated_tokens > 0


def test_first_run_without_models_explains_what_to_do(qtbot, make_window, tmp_path):
    window = make_window(target=str(tmp_path / "missing.gguf"), drafter="none")
    assert window.pair is None
    text = window.transcript.toPlainText()
    assert "No model file" in text and "make models" in text
    assert not window.send_button.isEnabled()


def test_a_conversation_survives_closing_and_reopening(qtbot, make_window, send):
    window = make_window(depth=2)
    send(window, PROMPT)
    before = [(s.kind, window.transcript.toPlainText()[s.start : s.end]) for s in window.transcript.spans()]
    conversation = window.conversation_id
    window.close()
    again = make_window(wait=False, depth=2, last_conversation=conversation)
    assert again.conversation_id == conversation
    after = [(s.kind, again.transcript.toPlainText()[s.start : s.end]) for s in again.transcript.spans()]
    assert after == before and len(after) > 10
    assert check_document(again.transcript, again.transcript.tokens) == []


def test_sending_while_a_reply_streams_is_refused_visibly(qtbot, make_window, send):
    window = make_window(depth=2, max_tokens=64)
    window.input.setPlainText(PROMPT)
    with qtbot.waitSignal(window.reply_finished, timeout=REPLY_TIMEOUT_MS):
        window.send()
        window.input.setPlainText("another one")
        window.send()
        assert "still streaming" in window.notice.text()
        assert window.input.toPlainText() == "another one"  # the message is kept
    users = [m for m in window.store.messages(window.conversation_id) if m.role == "user"]
    assert len(users) == 1


def test_shift_enter_is_a_new_line_and_enter_sends(qtbot, make_window):
    window = make_window(depth=0, max_tokens=4)
    window.input.setPlainText("line one")
    window.input.moveCursor(window.input.textCursor().MoveOperation.End)
    qtbot.keyClick(window.input, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    assert window.input.toPlainText() == "line one\n"
    with qtbot.waitSignal(window.reply_finished, timeout=REPLY_TIMEOUT_MS):
        qtbot.keyClick(window.input, Qt.Key.Key_Return)
    assert window.input.toPlainText() == ""


def test_export_trace_is_the_cli_json_schema(qtbot, make_window, tmp_path, send):
    import json

    from engine.events import event_from_json

    window = make_window(depth=2)
    stats = send(window, PROMPT)
    path = tmp_path / "trace.jsonl"
    assert window.export_trace(path) == len(window.reply_tokens) + 1
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    events = [event_from_json(d) for d in lines]
    assert events[:-1] == window.reply_tokens
    assert events[-1].token_ids == stats.token_ids
    png = tmp_path / "charts.png"
    assert window.export_charts(png) and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_preferences_are_written_on_close_and_read_at_start(qtbot, tmp_path, monkeypatch, target_path):
    from PySide6.QtCore import QSettings

    from app import settings

    QSettings.setPath(QSettings.Format.NativeFormat, QSettings.Scope.UserScope, str(tmp_path / "settings"))
    QSettings.setDefaultFormat(QSettings.Format.IniFormat)
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(tmp_path / "settings"))
    prefs = settings.Preferences(target=str(target_path), drafter="none", depth=3, temperature=0.7, max_tokens=77)
    settings.save(prefs)
    window = MainWindow(store_path=tmp_path / "c.sqlite3")
    qtbot.addWidget(window)
    assert window.side.depth.currentData() == 3
    assert window.side.temperature.value() == pytest.approx(0.7)
    assert window.side.max_tokens.value() == 77
    window.side.max_tokens.setValue(99)
    window.close()
    assert settings.load().max_tokens == 99
    assert Path(tmp_path / "settings").exists()


def test_round_cost_comes_from_the_saved_box_profile(qtbot, make_window, send, monkeypatch, tmp_path, target_path):
    from engine.measure.costmodel import BoxProfile
    from engine.measure.profile import machine_id, save_profile
    from engine.runtime import RuntimeOptions

    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path / "empty"))
    assert make_window(depth=2).pair.plain_pass_s is None  # no profile: c waits for a plain reply
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path / "cache"))
    options = RuntimeOptions()
    save_profile(
        BoxProfile(
            key="test", machine=machine_id(), target=target_path.name, drafter="drafter.gguf", runtime=options.runtime_version(),
            mode=options.mode, threads=options.threads, target_rows_s=[0.05, 0.08, 0.1], drafter_step_s=0.01,
            overhead_s=0.001, acceptance_prior=[0.8, 0.7],
        )
    )  # fmt: skip
    window = make_window("second.sqlite3", depth=2)
    assert window.pair.plain_pass_s == pytest.approx(0.051)
    stats = send(window, PROMPT)
    c = (stats.decode_s / stats.rounds) / 0.051
    assert window.status.labels["cost"].text() == f"round cost c {c:.2f}"
