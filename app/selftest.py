"""`draftlight --self-test`: the window, a fixed prompt at depth 2, and a check that every
token on screen wears its kind's colour, in the rendered Markdown and in the raw text."""

from __future__ import annotations

import re
import sys
import time
from collections import Counter

from PySide6.QtCore import QEventLoop, QTimer
from PySide6.QtGui import QColor, QTextCursor

from app import palette
from app.transcript import TranscriptView
from engine import TokenEvent

TIMEOUT_S = 600


def visible(token: TokenEvent) -> bool:
    """Whether a token occupies room on screen (line breaks alone do not)."""
    return bool(token.text.replace("\n", ""))


def check_document(view: TranscriptView, tokens: list[TokenEvent]) -> list[str]:
    """Token spans in the document against the engine's events, one by one (in rendered
    Markdown, where markup takes no room, see check_rendered)."""
    if view.renders_markdown and not view.raw:
        return check_rendered(view, tokens)
    pal = palette.current()
    shown = [(i, t) for i, t in enumerate(view.tokens) if visible(t)]
    expected = [t for t in tokens if visible(t)]
    problems = []
    spans = view.spans()
    if len(spans) != len(expected):
        problems.append(f"{len(spans)} coloured spans on screen for {len(expected)} tokens with text")
    for span, (index, _token), event in zip(spans, shown, expected):
        if span.token_index != index or view.tokens[index] != event:
            problems.append(f"span at {span.start} belongs to token {span.token_index}, expected {index}")
        if span.kind != event.kind.value:
            problems.append(f"token {index} {event.text!r} shown as {span.kind}, the engine said {event.kind.value}")
        if span.background != pal.backgrounds[event.kind]:
            problems.append(
                f"token {index} {event.text!r} drawn on {span.background}, not {pal.backgrounds[event.kind]}"
            )
    return problems


def check_rendered(view: TranscriptView, tokens: list[TokenEvent]) -> list[str]:
    """Rendered Markdown: markup leaves the screen, but each character left wears its token,
    in order, and every token with a word in it is there."""
    pal = palette.current()
    problems, last = [], -1
    spans = view.spans()
    for span in spans:
        event = view.tokens[span.token_index]
        if span.token_index < last:
            problems.append(f"span at {span.start} belongs to token {span.token_index}, after token {last}")
        last = span.token_index
        if span.kind != event.kind.value:
            problems.append(f"token {span.token_index} {event.text!r} shown as {span.kind}, not {event.kind.value}")
        if span.background != pal.backgrounds[event.kind]:
            problems.append(
                f"token {span.token_index} {event.text!r} drawn on {span.background}, not {pal.backgrounds[event.kind]}"
            )
    shown = {span.token_index for span in spans}
    missing = [i for i, t in enumerate(tokens) if re.search(r"\w", t.text) and i not in shown]
    if view.tokens != tokens:
        problems.append("the transcript's tokens are not the engine's events")
    for i in missing[:5]:
        problems.append(f"token {i} {tokens[i].text!r} is not on screen in the rendered reply")
    return problems


def check_pixels(view: TranscriptView) -> tuple[int, list[str]]:
    """Sample the rendered viewport: each visible span's background pixels are its colour."""
    image = view.viewport().grab().toImage()
    pal = palette.current()
    checked, problems = 0, []
    for span in view.spans():
        cursor = QTextCursor(view.document())
        cursor.setPosition(span.start)
        left = view.cursorRect(cursor)
        cursor.setPosition(span.start + 1)
        right = view.cursorRect(cursor)
        if right.top() != left.top() or right.left() - left.left() < 3:
            continue  # wraps, or too narrow to sample
        y = left.top() + 1
        if not (0 <= y < image.height() and left.left() >= 0 and right.left() < image.width()):
            continue  # scrolled out of view
        colours = {QColor(image.pixel(x, y)).name() for x in range(left.left() + 1, right.left())}
        want = pal.backgrounds[palette.KINDS[[k.value for k in palette.KINDS].index(span.kind)]]
        checked += 1
        if want not in colours:
            problems.append(f"pixels of span at {span.start} are {sorted(colours)}, not {want}")
    return checked, problems


def run_self_test(app, window, prompt: str, screenshot: str | None) -> int:
    out = sys.stdout
    deadline = time.monotonic() + TIMEOUT_S
    loop = QEventLoop()
    while window.pair is None and time.monotonic() < deadline:
        if window.transcript.toPlainText().count("Error"):
            break
        QTimer.singleShot(100, loop.quit)
        loop.exec()
    if window.pair is None:
        print(f"self-test: the models did not load: {window.side.verdict.text()}", file=out)
        window.close()
        return 1
    done = []
    window.reply_finished.connect(done.append)
    window.side.set_depth(2)
    window.input.setPlainText(prompt)
    window.send()
    while not done and time.monotonic() < deadline:
        QTimer.singleShot(50, loop.quit)
        loop.exec()
    stats = done[0] if done else None
    if stats is None:
        print("self-test: no reply came back", file=out)
        window.close()
        return 1
    app.processEvents()
    view = window.transcript
    view.verticalScrollBar().setValue(0)
    app.processEvents()
    problems = [f"rendered: {p}" for p in check_document(view, window.reply_tokens)]
    checked, pixel_problems = check_pixels(view)
    problems += [f"rendered: {p}" for p in pixel_problems]
    view.set_raw(True)  # and the raw text, every token as written
    app.processEvents()
    view.verticalScrollBar().setValue(0)
    app.processEvents()
    problems += [f"raw: {p}" for p in check_document(view, window.reply_tokens)]
    raw_checked, pixel_problems = check_pixels(view)
    problems += [f"raw: {p}" for p in pixel_problems]
    view.set_raw(False)
    app.processEvents()
    if checked == 0 or raw_checked == 0:
        problems.append("no token span could be sampled on screen")
    if screenshot:
        window.grab().save(screenshot)
    counts = Counter(t.kind.value for t in window.reply_tokens)
    print(
        f"self-test: {len(window.reply_tokens)} tokens at depth {stats.depth}: "
        + ", ".join(f"{k.value} {counts.get(k.value, 0)}" for k in palette.KINDS),
        file=out,
    )
    print(
        f"self-test: palette ({'dark' if palette.current().dark else 'light'}): {palette.current().describe()}",
        file=out,
    )
    print(
        f"self-test: {stats.decode_tps:.1f} tok/s decode, acceptance {stats.acceptance:.0%}; "
        f"{checked} spans checked on screen rendered, {raw_checked} raw",
        file=out,
    )
    for p in problems[:20]:
        print(f"self-test: MISMATCH {p}", file=out)
    print(
        "self-test: " + ("FAILED" if problems else "passed: the colours on screen match the engine's events"), file=out
    )
    window.close()
    return 1 if problems else 0
