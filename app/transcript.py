"""The conversation, with every assistant token on a background of its provenance colour."""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from PySide6.QtCore import QEvent, QPoint, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QGuiApplication,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextFrameFormat,
    QTextOption,
)
from PySide6.QtWidgets import QTextEdit, QToolTip

from app import palette
from app.codeblocks import COPY_SCHEME
from app.follow import Follower
from app.markdown import Renderer
from app.teachtext import rank_sentence
from engine import AUTO, FinishReason, RunStats, TokenEvent, TokenKind

TOKEN_PROPERTY = QTextCharFormat.Property.UserProperty + 1  # index into TranscriptView.tokens
KIND_PROPERTY = QTextCharFormat.Property.UserProperty + 2  # the kind's word, for checks


@dataclass(frozen=True)
class Span:
    """A run of text on screen that belongs to one token."""

    start: int
    end: int
    token_index: int
    kind: str
    background: str


@dataclass
class Entry:
    """One message as drawn, kept so that the transcript can be drawn again (raw or rendered)."""

    role: str
    text: str = ""
    first: int = 0  # a reply's tokens are tokens[first:last]
    last: int = 0
    stats: RunStats | None = None
    stopped: bool = False
    note: str = ""
    done: bool = False
    above: str = ""  # a line under the reply's heading, before its text: what its prompt left out
    code: dict[str, str] = field(default_factory=dict)


def tooltip(token: TokenEvent) -> str:
    """What hovering a token tells: kind, round and position, the rejected draft, probabilities."""
    lines = [f"<b>{palette.LABELS[token.kind]}</b>: {palette.EXPLANATIONS[token.kind]}"]
    if token.kind is TokenKind.UNREPORTED:  # a remote server's token: its text is all there is
        return "<br>".join([*lines, html.escape(repr(token.text), quote=False)])
    lines.append(f"round {token.round_index + 1}, position {token.position + 1}")
    if token.kind is TokenKind.REPLACED and token.rejected_id is not None:
        lines.append(
            f"rejected draft: {html.escape(repr(token.rejected_text), quote=False)} (token {token.rejected_id:,})"
        )
        if token.draft_rank is not None:
            lines.append(rank_sentence(token))
    lines.append(f"target p = {token.target_prob:.3f}")
    if token.draft_prob is not None:
        lines.append(f"drafter p = {token.draft_prob:.3f}")
    lines.append(f"token {token.token_id:,}: {html.escape(repr(token.text), quote=False)}")
    return "<br>".join(lines)


def summary(stats: RunStats, stopped: bool = False) -> str:
    parts = [f"{stats.generated_tokens} tokens", f"{stats.decode_tps:.1f} tok/s decode"]
    if stats.drafted:
        parts.append(f"acceptance {stats.acceptance:.0%}")
        parts.append(f"{stats.mean_accepted_length:.2f} tokens/round")
    parts.append({0: "speculation off", AUTO: "auto depth"}.get(stats.depth, f"depth {stats.depth}"))
    if stopped:
        parts.append("stopped")
    elif stats.finish_reason is FinishReason.MAX_TOKENS:
        parts.append("reached max tokens")
    elif stats.finish_reason is FinishReason.CONTEXT_FULL:
        parts.append("context full")
    return " · ".join(parts)


class TranscriptView(QTextEdit):
    """Read-only rich text: one framed block per message, tokens as coloured spans.

    Replies are rendered as Markdown (see app/markdown.py) unless `raw` is set; views that
    write into the reply themselves (the teaching view) turn `renders_markdown` off.
    """

    renders_markdown = True
    copied = Signal(str)  # a code block's Copy: what was copied, in a sentence

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)
        self.setUndoRedoEnabled(False)
        # Lines break between words only: a table column never splits "Complexity" into "Complexit"
        # and "y"; a table wider than the view scrolls sideways, as in a browser.
        self.setWordWrapMode(QTextOption.WrapMode.WordWrap)
        self.viewport().setMouseTracking(True)
        self.viewport().installEventFilter(self)
        self.tokens: list[TokenEvent] = []
        self._palette = palette.current()
        self._reply_cursor: QTextCursor | None = None
        self.raw = False
        self.entries: list[Entry] = []
        self._reply: Entry | None = None
        self._reply_start = 0  # where the open reply's text begins in the document
        self.zoom = 1.0  # the View menu's text size, over the system's
        self.follower = Follower(self)
        self._fit_font()
        QGuiApplication.instance().fontChanged.connect(self._system_font_changed)

    # ---- building the document ----
    def clear_conversation(self) -> None:
        self.follower.following = True
        self.clear()
        self.tokens.clear()
        self.entries.clear()
        self._reply_cursor = None
        self._reply = None

    def _frame(self, role: str) -> QTextCursor:
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        fmt = QTextFrameFormat()
        fmt.setPadding(8)
        fmt.setTopMargin(6)
        fmt.setBottomMargin(6)
        fmt.setBorder(0)
        dark = self._palette.dark
        if role == "user":
            fmt.setBackground(QColor("#2b3545" if dark else "#eef3fb"))
            fmt.setLeftMargin(80)
        elif role == "error":
            fmt.setBackground(QColor("#4a2020" if dark else "#fdecea"))
        else:
            fmt.setBackground(QColor("#222222" if dark else "#ffffff"))
            fmt.setRightMargin(40)
        frame = cursor.insertFrame(fmt)
        inner = frame.firstCursorPosition()
        header = QTextCharFormat()
        header.setFontWeight(QFont.Weight.Bold)
        label = {"user": "You", "assistant": "Assistant", "error": "Error"}.get(role, role.title())
        inner.insertText(label, header)
        inner.insertBlock()
        inner.setCharFormat(QTextCharFormat())
        return inner

    def add_user(self, text: str) -> None:
        self.entries.append(Entry("user", text))
        self._draw_text("user", text)

    def add_error(self, text: str) -> None:
        self.entries.append(Entry("error", text))
        self._draw_text("error", text)

    def _draw_text(self, role: str, text: str) -> None:
        cursor = self._frame(role)
        cursor.insertText(text, QTextCharFormat())
        self._scroll_to_end()

    def begin_reply(self, above: str = "") -> None:
        self._reply = Entry("assistant", first=len(self.tokens), last=len(self.tokens), above=above)
        self.entries.append(self._reply)
        self._open_reply()

    def _open_reply(self) -> None:
        self._reply_cursor = self._frame("assistant")
        if self._reply is not None and self._reply.above:
            self._reply_cursor.insertText(self._reply.above, self._quiet_format())
            self._reply_cursor.insertBlock(QTextBlockFormat(), QTextCharFormat())
        self._reply_start = self._reply_cursor.position()

    def say_above_reply(self, line: str) -> None:
        """A line between the open reply's heading and its text (the oldest turns left out of its
        prompt): drawn again with the reply, raw or rendered."""
        if self._reply is None or not line or self._reply.above:
            return
        self._reply.above = line
        if self._reply.last == self._reply.first and self._reply_cursor is not None:  # before its text
            cursor = self._reply_cursor
            cursor.setPosition(self._reply_start)
            cursor.insertText(line, self._quiet_format())
            cursor.insertBlock(QTextBlockFormat(), QTextCharFormat())
            self._reply_start = cursor.position()
        else:  # text came first (it cannot from this machine's engine): draw the reply again, line first
            self.redraw()

    def _quiet_format(self) -> QTextCharFormat:
        fmt = QTextCharFormat()
        fmt.setForeground(QColor("#9a9a9a" if self._palette.dark else "#6a6a6a"))
        fmt.setFontPointSize(max(self.font().pointSizeF() - 1.5, 8.0))
        return fmt

    def token_format(self, index: int) -> QTextCharFormat:
        """A token's own format: its kind's background, its index, and its kind's underline cue."""
        kind = self.tokens[index].kind
        fmt = QTextCharFormat()
        fmt.setBackground(self._palette.background(kind))
        fmt.setProperty(TOKEN_PROPERTY, index)
        fmt.setProperty(KIND_PROPERTY, kind.value)
        palette.apply_cue(fmt, kind)
        return fmt

    def append_tokens(self, events: list[TokenEvent]) -> None:
        if self._reply_cursor is None:
            self.begin_reply()
        first = len(self.tokens)
        self.tokens.extend(events)
        if self._reply is not None:
            self._reply.last = len(self.tokens)
        self._draw_tokens(first, len(self.tokens))  # the follower keeps the end in view, if it follows

    def _draw_tokens(self, first: int, last: int) -> None:
        """Raw: insert the new tokens. Rendered: render the open reply again from its start."""
        cursor = self._reply_cursor
        cursor.beginEditBlock()  # one layout pass for the batch, not one per token
        if self.raw or not self.renders_markdown or self._reply is None:
            for index in range(first, last):
                if self.tokens[index].text:  # an unfinished character or the end-of-turn token: nothing
                    cursor.insertText(self.tokens[index].text, self.token_format(index))
        else:
            self._render_reply(cursor, self._reply)
        cursor.endEditBlock()

    def _render_reply(self, cursor: QTextCursor, entry: Entry) -> None:
        frame = cursor.currentFrame()
        cursor.setPosition(self._reply_start)
        cursor.setPosition(frame.lastPosition(), QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        cursor.setBlockFormat(QTextBlockFormat())
        owners: list[int] = []
        for index in range(entry.first, entry.last):
            owners.extend([index] * len(self.tokens[index].text))
        source = "".join(t.text for t in self.tokens[entry.first : entry.last])
        key = f"{COPY_SCHEME}{self.entries.index(entry)}."
        renderer = Renderer(
            cursor, source, owners, self.token_format, self._palette.dark, self.font().pointSizeF(), key
        )
        renderer.render()
        entry.code = {f"{key}{n}": code for n, code in enumerate(renderer.code_blocks)}
        self._reply_cursor = frame.lastCursorPosition()

    def set_raw(self, raw: bool) -> None:
        """Draw every message again, as its raw text (True) or rendered Markdown (False)."""
        self.raw = raw
        open_reply = self._reply
        self.clear()
        self._reply_cursor = None
        for entry in self.entries:
            if entry.role != "assistant":
                self._draw_text(entry.role, entry.text)
                continue
            self._reply = entry
            self._open_reply()
            self._draw_tokens(entry.first, entry.last)
            if entry.done:
                self._draw_summary(entry)
        self._reply = open_reply
        if open_reply is None or open_reply.done:
            self._reply_cursor = None

    def end_reply(self, stats: RunStats | None, stopped: bool = False, note: str = "") -> None:
        if self._reply_cursor is None:
            return
        if self._reply is not None:
            self._reply.stats, self._reply.stopped, self._reply.note, self._reply.done = stats, stopped, note, True
            self._draw_summary(self._reply)
        self._reply_cursor = None
        self._reply = None

    def _draw_summary(self, entry: Entry) -> None:
        cursor, stats, stopped, note = self._reply_cursor, entry.stats, entry.stopped, entry.note
        fmt = self._quiet_format()
        cursor.insertBlock(QTextBlockFormat())
        text = summary(stats, stopped) if stats else ""
        if note:
            text = f"{text} · {note}" if text else note
        cursor.insertText(text, fmt)
        content = stats.content_summary() if stats else ""
        if content:  # acceptance is a property of the text: how each kind of text fared
            cursor.insertBlock()
            cursor.insertText(f"by content: {content}", fmt)

    def show_reply(
        self, tokens: list[TokenEvent], stats: RunStats | None, stopped: bool, note: str = "", above: str = ""
    ) -> None:
        """A stored reply drawn whole: `above` is its line above the text, `note` the one under it."""
        self.begin_reply(above)
        self.append_tokens(tokens)
        self.end_reply(stats, stopped, note)

    def _scroll_to_end(self) -> None:
        self.follower.follow()

    def drop_last_reply(self) -> None:
        """Take the last reply off the screen (Regenerate): the new one streams where it was."""
        index = next((i for i in range(len(self.entries) - 1, -1, -1) if self.entries[i].role == "assistant"), None)
        if index is None or not self.entries[index].done:
            return
        entry = self.entries.pop(index)
        del self.tokens[entry.first : entry.last]  # the last tokens: what follows it is errors, with none
        self.redraw()

    # ---- reading it back: what is on screen ----
    def spans(self) -> list[Span]:
        """Every token span in the document, in order, with the colour it is drawn with.

        A token whose text is only line breaks takes no room on screen and has no span.
        """
        out: list[Span] = []
        block = self.document().begin()
        while block.isValid():
            it = block.begin()
            while not it.atEnd():
                frag = it.fragment()
                fmt = frag.charFormat()
                index = fmt.property(TOKEN_PROPERTY)
                if index is not None:
                    start = frag.position()
                    span = Span(
                        start,
                        start + frag.length(),
                        int(index),
                        str(fmt.property(KIND_PROPERTY)),
                        fmt.background().color().name(),
                    )
                    if out and out[-1].token_index == span.token_index:  # a token whose text spans lines
                        out[-1] = Span(out[-1].start, span.end, span.token_index, span.kind, span.background)
                    else:
                        out.append(span)
                it += 1
            block = block.next()
        return out

    def token_at(self, point: QPoint) -> TokenEvent | None:
        cursor = self.cursorForPosition(point)
        cursor.movePosition(QTextCursor.MoveOperation.Right, QTextCursor.MoveMode.KeepAnchor)
        index = cursor.charFormat().property(TOKEN_PROPERTY)
        if index is None:
            return None
        rect = self.cursorRect(cursor)
        if abs(rect.center().y() - point.y()) > rect.height():
            return None
        return self.tokens[int(index)]

    def eventFilter(self, obj, event) -> bool:
        if obj is self.viewport() and event.type() == QEvent.Type.ToolTip:
            token = self.token_at(event.pos())
            if token is not None:
                QToolTip.showText(event.globalPos(), tooltip(token), self)
            else:
                QToolTip.hideText()
            return True
        return super().eventFilter(obj, event)

    def set_dark(self, dark: bool) -> None:
        """Colour every message for a dark (or light) window, those on screen included."""
        if dark != self._palette.dark:
            self._palette = palette.current(dark)
            self.redraw()

    @staticmethod
    def base_size() -> float:
        """The system's text size in points, 11 at least: the size at zoom 1."""
        return max(QGuiApplication.font().pointSizeF(), 11.0)

    def _fit_font(self) -> None:
        """The system's text size times the zoom."""
        font = QGuiApplication.font()
        font.setPointSizeF(round(self.base_size() * self.zoom, 2))
        self.setFont(font)

    def _system_font_changed(self, _font) -> None:
        """The system's text size changed (macOS's or the desktop's setting): follow it."""
        self._fit_font()
        self.redraw()

    def set_zoom(self, zoom: float) -> None:
        """Text larger or smaller than the system's; every message is drawn again at the new size."""
        self.zoom = min(max(zoom, 0.5), 3.0)
        self._fit_font()
        self.redraw()

    def redraw(self) -> None:
        """Draw every message again in the current colours."""
        self.set_raw(self.raw)

    def changeEvent(self, event) -> None:
        if event.type() == QEvent.Type.PaletteChange:  # the system or Preferences switched light and dark
            self.set_dark(palette.is_dark())

        super().changeEvent(event)

    def mouseReleaseEvent(self, event) -> None:
        href = self.anchorAt(event.position().toPoint())
        if href.startswith(COPY_SCHEME):  # a code block's Copy link: exactly its code, no fences
            code = next((e.code[href] for e in self.entries if href in e.code), None)
            if code is not None:
                QGuiApplication.clipboard().setText(code)
                lines = code.count("\n") + (not code.endswith("\n"))
                self.copied.emit(f"Copied the code block ({lines} line{'s' if lines != 1 else ''}).")
        super().mouseReleaseEvent(event)

    def keyPressEvent(self, event) -> None:
        if event.key() == Qt.Key.Key_Escape:
            self.clearFocus()
        super().keyPressEvent(event)
