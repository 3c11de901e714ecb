"""Replies rendered as Markdown: every character still wears its token (fast: hand-built events)."""

from __future__ import annotations

import re

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QFontDatabase, QGuiApplication, QTextCharFormat, QTextCursor

from app import palette
from app.selftest import check_document, check_pixels
from app.transcript import KIND_PROPERTY, TOKEN_PROPERTY, TranscriptView
from engine import TokenEvent, TokenKind

CODE = "def add(a, b):\n    return a + b  # sum\n"
SOURCE = (
    "Here is a **list**:\n\n- alpha\n- beta\n\n| name | value |\n|---|---|\n| x | 42 |\n\n"
    f"```python\n{CODE}```\nDone.\n"
)
MODEL_PROMPT = "Write a Python function that adds two numbers, in a fenced code block, then a one-line list."
MODEL_TOKENS = 96
KINDS = (TokenKind.ACCEPTED, TokenKind.REPLACED, TokenKind.BONUS, TokenKind.PLAIN)


def events(source: str = SOURCE) -> list[TokenEvent]:
    """The source cut as a tokenizer would (words, runs of spaces, punctuation), kinds in turn."""
    pieces = re.findall(r" ?\w+|\s+|[^\w\s]+", source)
    assert "".join(pieces) == source
    return [
        TokenEvent(token_id=i, text=p, kind=KINDS[i % 4], round_index=i // 3, position=i % 3, target_prob=0.5)
        for i, p in enumerate(pieces)
    ]


def fragments(view: TranscriptView):
    """(position, text, format) of every fragment in the document, tables and code included."""
    block = view.document().begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            frag = it.fragment()
            yield frag.position(), frag.text(), frag.charFormat()
            it += 1
        block = block.next()


def streamed(qtbot, evs: list[TokenEvent], batch: int = 3, finish: bool = True) -> TranscriptView:
    view = TranscriptView()
    qtbot.addWidget(view)
    view.resize(700, 900)
    view.show()
    view.add_user("Show me markdown.")
    view.begin_reply()
    for i in range(0, len(evs), batch):  # the window hands over a batch per timer tick
        view.append_tokens(evs[i : i + batch])
    if finish:
        view.end_reply(None, note="done")
    return view


def token_chars(view: TranscriptView, index: int) -> list[tuple[int, str, QTextCharFormat]]:
    return [(p, t, f) for p, t, f in fragments(view) if f.property(TOKEN_PROPERTY) == index]


def point_of(view: TranscriptView, position: int) -> QPoint:
    cursor = QTextCursor(view.document())
    cursor.setPosition(position)
    left = view.cursorRect(cursor)
    cursor.setPosition(position + 1)
    right = view.cursorRect(cursor)
    return QPoint(left.left() + max((right.left() - left.left()) // 4, 1), left.center().y())  # the char's left part


def test_every_rendered_character_wears_its_tokens_colour_and_index(qtbot):
    evs = events()
    view = streamed(qtbot, evs)
    pal = palette.current()
    shown = set()
    for _pos, text, fmt in fragments(view):
        index = fmt.property(TOKEN_PROPERTY)
        if index is None:
            continue
        token = view.tokens[int(index)]
        shown.add(int(index))
        assert fmt.background().color().name() == pal.backgrounds[token.kind]
        assert fmt.property(KIND_PROPERTY) == token.kind.value
        # a character comes from its token's text: a bullet stands for a "-", a space for a line break
        assert all(ch in token.text or (ch, token.text) in (("•", "-"), (" ", "\n")) for ch in text), (text, token)
    wordy = {i for i, t in enumerate(evs) if re.search(r"\w", t.text)}
    assert wordy <= shown  # every word of the reply is on screen, in its token's colour
    assert "```" not in view.toPlainText() and "|" not in view.toPlainText() and "**" not in view.toPlainText()


def test_code_block_is_monospace_highlighted_and_copied_exactly(qtbot):
    view = streamed(qtbot, events())
    mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont).families()
    code = [(t, f) for _p, t, f in fragments(view) if f.fontFamilies() == mono]
    assert "".join(t for t, _ in code) == CODE.replace("\n", "")
    colours = {t.strip(): f.foreground().color().name() for t, f in code if t.strip()}
    assert len({colours["def"], colours["add"], colours["sum"]}) == 3  # keyword, name, comment
    (copy,) = [(p, f.anchorHref()) for p, t, f in fragments(view) if t == "Copy"]
    QGuiApplication.clipboard().setText("")
    with qtbot.waitSignal(view.copied) as said:
        qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=point_of(view, copy[0] + 1))
    assert QGuiApplication.clipboard().text() == CODE
    assert said.args == ["Copied the code block (2 lines)."]  # said where the eye is: the line under the chat


def test_hover_finds_tokens_inside_a_code_block_and_a_table(qtbot):
    evs = events()
    view = streamed(qtbot, evs)
    for word in ("42", " value", "return", "add"):
        index = next(i for i, t in enumerate(evs) if t.text.strip() == word.strip())
        pos, text, _fmt = next(c for c in token_chars(view, index) if c[1].strip())
        assert view.token_at(point_of(view, pos + len(text) - 1)) is evs[index]


def test_an_open_fence_renders_as_code_and_closes_cleanly(qtbot):
    evs = events()
    cut = next(i for i, t in enumerate(evs) if t.text == "#") + 1  # mid-code, fence still open
    view = streamed(qtbot, evs[:cut], finish=False)
    mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont).families()
    partial = "".join(t for _p, t, f in fragments(view) if f.fontFamilies() == mono)
    assert partial == "def add(a, b):    return a + b  #"
    assert "Copy" in view.toPlainText() and "```" not in view.toPlainText()
    view.append_tokens(evs[cut:])
    view.end_reply(None)
    assert "".join(t for _p, t, f in fragments(view) if f.fontFamilies() == mono) == CODE.replace("\n", "")
    assert view.toPlainText().rstrip().endswith("Done.")
    done = [f for _p, t, f in fragments(view) if "Done" in t]
    assert done and all(f.fontFamilies() != mono for f in done)


def test_raw_toggle_shows_the_source_and_back(qtbot):
    evs = events()
    view = streamed(qtbot, evs)
    rendered = view.toPlainText()
    view.set_raw(True)
    assert SOURCE in view.toPlainText()
    visible = [i for i, t in enumerate(evs) if t.text.replace("\n", "")]
    assert [s.token_index for s in view.spans()] == visible  # the raw look: every token, as written
    view.set_raw(False)
    assert view.toPlainText() == rendered
    assert view.tokens == evs


def test_each_kind_has_an_underline_cue_named_in_the_legend(qtbot):
    from app.widgets import Legend

    view = streamed(qtbot, events("one two three four"))
    styles = {}
    for _p, _t, f in fragments(view):
        if f.property(KIND_PROPERTY) is not None:
            styles[f.property(KIND_PROPERTY)] = f.underlineStyle()
    line = QTextCharFormat.UnderlineStyle
    assert styles == {
        "accepted": line.NoUnderline,
        "replaced": line.WaveUnderline,
        "bonus": line.DashUnderline,
        "plain": line.DashDotLine,
    }
    legend = Legend()
    qtbot.addWidget(legend)
    assert [legend.swatches[k.value].text().strip() for k in palette.KINDS] == [
        "accepted · no line",
        "replaced · wavy line",
        "bonus · dashed line",
        "plain · dash-dot line",
    ]


@pytest.mark.slow
def test_a_real_reply_renders_with_its_colours_and_toggles_to_raw(qtbot, make_window, send):
    window = make_window(depth=2, max_tokens=MODEL_TOKENS)
    send(window, MODEL_PROMPT)
    view, tokens = window.transcript, window.reply_tokens
    source = "".join(t.text for t in tokens)
    assert "```python" in source  # the model answered with a fenced block
    assert check_document(view, tokens) == []  # rendered: each token's characters, its colour
    checked, problems = check_pixels(view)
    assert problems == [] and checked > 10
    mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont).families()
    code = [f for _p, t, f in fragments(view) if f.fontFamilies() == mono and t.strip()]
    assert len({f.foreground().color().name() for f in code}) >= 2  # highlighted
    assert "```" not in view.toPlainText()
    qtbot.mouseClick(window.legend.raw, Qt.MouseButton.LeftButton)
    assert view.raw and source.strip() in view.toPlainText()
    assert check_document(view, tokens) == []  # raw: one span per visible token, as before


def contrast(a: str, b: str) -> float:
    """WCAG's contrast ratio of two "#rrggbb" colours."""

    def luminance(colour: str) -> float:
        channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
        r, g, b = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_code_comments_read_in_dark_mode():
    from app import palette
    from app.codeblocks import highlight

    pieces = highlight("total = 1  # the running sum\n", "python", dark=True)
    (comment,) = [p for p in pieces if p.text.startswith("#")]
    backgrounds = [c for c in palette.current(True).backgrounds.values() if c.startswith("#")]
    assert len(backgrounds) == 4
    assert min(contrast(comment.colour, bg) for bg in backgrounds) >= 4.5


def test_a_narrow_table_breaks_between_words_never_inside_one(qtbot):
    source = (
        "| Algorithm | Best Time Complexity | Average Time Complexity | Worst Time Complexity |\n|---|---|---|---|\n"
    )
    source += "| Insertion Sort | O(n) | O(n^2) | O(n^2) |\n"
    view = streamed(qtbot, events(source))
    view.resize(440, 600)  # the transcript's width in a 1024-pixel window
    qtbot.wait(50)
    lines = []
    block = view.document().begin()
    while block.isValid():
        layout, text = block.layout(), block.text()
        lines += [text[line.textStart() : line.textStart() + line.textLength()] for line in _lines(layout)]
        block = block.next()
    words = {w for line in lines for w in line.split()}
    assert {"Complexity", "Algorithm", "Insertion"} <= words and not words & {"Complexit", "y"}, lines


def _lines(layout):
    return [layout.lineAt(i) for i in range(layout.lineCount())]
