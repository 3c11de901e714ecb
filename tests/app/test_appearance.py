"""What the window looks like, with no model: light and dark switched live, the text following
the system's size, the plain-default notice in one line with its "why?", and the short status bar."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QLabel

from app import palette
from app.notice import split_first_sentence
from app.store import StoredMessage
from app.storeopen import open_store
from engine import TokenEvent, TokenKind
from engine.measure.costmodel import why_plain
from engine.runtime import RuntimeOptions
from tests.engine.box_profiles import HOPELESS, profile

KINDS = [TokenKind.PLAIN, TokenKind.ACCEPTED, TokenKind.BONUS, TokenKind.REPLACED]
REPLY = "Here is code:\n\n```python\nx = 1\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"


def stored_reply(path, text: str = REPLY) -> list[TokenEvent]:
    """A conversation with a user message and a finished reply cut into tokens of each kind."""
    store, _ = open_store(path)
    cid = store.new_conversation("look")
    store.add_message(cid, StoredMessage("user", "Show me."))
    pieces = [text[i : i + 3] for i in range(0, len(text), 3)]
    tokens = [
        TokenEvent(token_id=i, text=p, kind=KINDS[i % 4], round_index=i, position=0, target_prob=0.9)
        for i, p in enumerate(pieces)
    ]
    store.append_reply(store.begin_reply(cid), tokens)
    store.close()
    return tokens


def backgrounds(window) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for span in window.transcript.spans():
        out.setdefault(span.kind, set()).add(span.background)
    return out


def test_light_and_dark_switch_live_and_recolour_what_is_drawn(window_at, tmp_path):
    stored_reply(tmp_path / "c.sqlite3")
    window = window_at(tmp_path / "c.sqlite3")
    light, dark = palette.current(False), palette.current(True)
    wanted = {k.value: {light.backgrounds[k]} for k in KINDS}
    assert backgrounds(window) == wanted
    spans_before = [(s.token_index, s.kind) for s in window.transcript.spans()]

    assert window.apply_theme("dark") is True and palette.is_dark()
    assert backgrounds(window) == {k.value: {dark.backgrounds[k]} for k in KINDS}
    assert [(s.token_index, s.kind) for s in window.transcript.spans()] == spans_before  # every token still found
    assert dark.backgrounds[TokenKind.ACCEPTED] in window.legend.swatches["accepted"].styleSheet()
    assert window.charts.tps_plot.backgroundBrush().color().name() == "#1e1e1e"
    assert "x = 1" in window.transcript.toPlainText() and "```" not in window.transcript.toPlainText()

    assert window.apply_theme("light") is False
    assert backgrounds(window) == wanted
    assert light.backgrounds[TokenKind.ACCEPTED] in window.legend.swatches["accepted"].styleSheet()
    assert window.charts.tps_plot.backgroundBrush().color().name() == "#ffffff"


def test_the_transcript_follows_the_systems_text_size_and_the_zoom(window_at, tmp_path):
    stored_reply(tmp_path / "c.sqlite3")
    window = window_at(tmp_path / "c.sqlite3")
    kinds_before = [s.kind for s in window.transcript.spans()]
    font = QGuiApplication.font()
    font.setPointSizeF(20.0)
    QGuiApplication.setFont(font)  # as the system's larger text reaches the app
    QCoreApplication.sendPostedEvents()  # the font's change events, as the event loop delivers them
    assert window.transcript.font().pointSizeF() == 20.0
    assert [s.kind for s in window.transcript.spans()] == kinds_before
    window.transcript.set_zoom(1.5)
    assert window.transcript.font().pointSizeF() == 30.0
    assert [s.kind for s in window.transcript.spans()] == kinds_before


def test_the_plain_default_notice_is_one_line_with_the_arithmetic_behind_why(qtbot, window_at, tmp_path):
    window = window_at(tmp_path / "c.sqlite3")
    target, drafter = tmp_path / "t.gguf", tmp_path / "d.gguf"
    target.write_bytes(b"t")  # a profile is keyed by its files
    drafter.write_bytes(b"d")
    full = why_plain(profile(target, drafter, RuntimeOptions(), *HOPELESS))
    window.notice.say_briefly(full)
    first, rest = split_first_sentence(full)
    assert first.startswith("Speculation cannot pay on this machine: a round with one draft costs ")
    assert first.endswith(" plain passes and yields at most 2 tokens.")
    assert rest.startswith("With d.gguf, the target's 2-row verify pass costs ")
    assert window.notice.shown() == first and window.notice.text() == full
    assert window.notice.why.isVisible()
    window.notice.why.linkActivated.emit("why")
    box = window.notice.details
    assert box is not None and box.isVisible() and box.text() == full
    box.close()

    window.notice.say("The drafter was not loaded: not a GGUF model file. The previous models stay loaded.")
    assert window.notice.shown() == window.notice.text()  # said about something just done: whole
    assert not window.notice.why.isVisible()


def test_first_sentences_end_at_a_full_stop_before_a_capital():
    assert split_first_sentence("Off with qwen2.5-coder.gguf: 2.62 passes. With it, more.") == (
        "Off with qwen2.5-coder.gguf: 2.62 passes.",
        "With it, more.",
    )
    assert split_first_sentence("One sentence, e.g. this one.") == ("One sentence, e.g. this one.", "")


def test_the_status_bar_shows_the_few_figures_and_keeps_the_rest_in_its_tooltip(window_at, tmp_path):
    window = window_at(tmp_path / "c.sqlite3")
    bar = window.statusBar()
    shown = {w.objectName() for w in bar.findChildren(QLabel) if w.objectName().startswith("status_")}
    assert shown == {"status_decode", "status_gauge", "status_acceptance", "status_place", "status_more"}
    window.status.show_drafter("model", "d.gguf")
    window.status.labels["prefill"].setText("prefill 543 ms (36 tokens)")
    window.status.show_place("this machine on llama.cpp")
    tip = window.status.more.toolTip()
    assert "drafting: a draft model" in tip and "prefill 543 ms (36 tokens)" in tip
    assert window.status.labels["place"].text() == "this machine on llama.cpp"


def test_the_gauge_names_its_basis_and_claims_no_saving_a_reply_contradicts(window_at, tmp_path):
    from engine.events import FinishReason, RunStats

    window = window_at(tmp_path / "s.sqlite")
    stats = RunStats(prompt_tokens=5, prefill_s=0.1, generated_tokens=4, decode_s=0.2, rounds=2, depth=2, drafted=3,
                     accepted=2, acceptance_per_position=(1.0, 0.5), drafted_per_position=(2, 1),
                     accepted_per_position=(2, 1), draft_s=0.01, verify_s=0.15, commit_s=0.01, rewind_s=0.001,
                     overhead_s=0.002, finish_reason=FinishReason.MAX_TOKENS, token_ids=(1, 2, 3, 4), from_prefill=1)  # fmt: skip
    gauge = window.status.labels["gauge"]
    window.status.show(stats, 0.05, [stats], "plain 20.0 tok/s ±3%, measured today")
    assert gauge.text() == "plain 20.0 tok/s · speculation 25% slower"
    assert "(15.0 against 20.0 tok/s plain)" in gauge.toolTip()
    # a profile measured on a busy box priced the plain pass 10x: the reply's verify passes ran under it
    window.status.show(stats, 0.5, [stats], "plain 2.0 tok/s ±40%, measured yesterday")
    assert gauge.text() == "plain 2.0 tok/s · plain speed unknown: re-measuring"
    assert gauge.toolTip().startswith(
        "This reply: no saving can be claimed: the box profile's plain pass (2.0 tok/s; plain 2.0 tok/s ±40%, "
        "measured yesterday) measured 7x slower than this reply's own verify passes: re-measuring."
    )
