"""The conversation, with every assistant token on a background of its provenance colour."""

from __future__ import annotations

import html
from dataclasses import dataclass

from PySide6.QtCore import QEvent, QPoint, Qt
from PySide6.QtGui import QColor, QFont, QTextCharFormat, QTextCursor, QTextFrameFormat
from PySide6.QtWidgets import QTextEdit, QToolTip

from app import palette
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
    """Read-only rich text: one framed block per message, tokens as coloured spans."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)
        self.setUndoRedoEnabled(False)
        self.viewport().setMouseTracking(True)
        self.viewport().installEventFilter(self)
        self.tokens: list[TokenEvent] = []
        self._palette = palette.current()
        self._reply_cursor: QTextCursor | None = None
        font = self.font()
        font.setPointSizeF(max(font.pointSizeF(), 11.0))
        self.setFont(font)

    # ---- building the document ----
    def clear_conversation(self) -> None:
        self.clear()
        self.tokens.clear()
        self._reply_cursor = None

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
        cursor = self._frame("user")
        cursor.insertText(text, QTextCharFormat())
        self._scroll_to_end()

    def add_error(self, text: str) -> None:
        cursor = self._frame("error")
        cursor.insertText(text, QTextCharFormat())
        self._scroll_to_end()

    def begin_reply(self) -> None:
        self._reply_cursor = self._frame("assistant")

    def append_tokens(self, events: list[TokenEvent]) -> None:
        cursor = self._reply_cursor
        if cursor is None:
            self.begin_reply()
            cursor = self._reply_cursor
        at_end = self._at_end()
        cursor.beginEditBlock()  # one layout pass for the batch, not one per token
        for event in events:
            index = len(self.tokens)
            self.tokens.append(event)
            if not event.text:
                continue  # an unfinished character or the end-of-turn token: nothing to show
            fmt = QTextCharFormat()
            fmt.setBackground(self._palette.background(event.kind))
            fmt.setProperty(TOKEN_PROPERTY, index)
            fmt.setProperty(KIND_PROPERTY, event.kind.value)
            cursor.insertText(event.text, fmt)
        cursor.endEditBlock()
        if at_end:
            self._scroll_to_end()

    def end_reply(self, stats: RunStats | None, stopped: bool = False, note: str = "") -> None:
        cursor = self._reply_cursor
        if cursor is None:
            return
        fmt = QTextCharFormat()
        fmt.setForeground(QColor("#9a9a9a" if self._palette.dark else "#6a6a6a"))
        fmt.setFontPointSize(max(self.font().pointSizeF() - 1.5, 8.0))
        cursor.insertBlock()
        text = summary(stats, stopped) if stats else ""
        if note:
            text = f"{text} · {note}" if text else note
        cursor.insertText(text, fmt)
        content = stats.content_summary() if stats else ""
        if content:  # acceptance is a property of the text: how each kind of text fared
            cursor.insertBlock()
            cursor.insertText(f"by content: {content}", fmt)
        self._reply_cursor = None
        self._scroll_to_end()

    def show_reply(self, tokens: list[TokenEvent], stats: RunStats | None, stopped: bool, note: str = "") -> None:
        self.begin_reply()
        self.append_tokens(tokens)
        self.end_reply(stats, stopped, note)

    def _at_end(self) -> bool:
        bar = self.verticalScrollBar()
        return bar.value() >= bar.maximum() - 4

    def _scroll_to_end(self) -> None:
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())

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
        """Colour tokens written from now on for a dark (or light) window."""
        self._palette = palette.current(dark)

    def changeEvent(self, event) -> None:
        if event.type() == QEvent.Type.PaletteChange:  # the system switched between light and dark
            self.set_dark(palette.is_dark())
        super().changeEvent(event)

    def keyPressEvent(self, event) -> None:
        if event.key() == Qt.Key.Key_Escape:
            self.clearFocus()
        super().keyPressEvent(event)
