"""A round, made visible: drafts appear as pending, then the verdict lands.

Accepted drafts take the accepted colour; the first rejected draft is struck through with
the target's replacement beside it; the drafts after it vanish; a bonus token appears.
"""

from __future__ import annotations

import html

import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtGui import QColor, QFont, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QVBoxLayout, QWidget

from app import palette
from app.plots import plot_widget
from app.transcript import KIND_PROPERTY, TOKEN_PROPERTY, TranscriptView
from engine import RoundStep, TokenEvent, TokenKind

PENDING = "#d9d9d9"
PENDING_DARK = "#555555"


class RoundView(TranscriptView):
    """The reply so far, with the round in progress shown in two phases."""

    token_clicked = Signal(object)  # TokenEvent
    renders_markdown = False  # it writes drafts and struck text into the reply itself

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._pending: tuple[int, int] | None = None  # document range of the tentative drafts

    def redraw(self) -> None:
        """The round's pending drafts and struck tokens live only in the document, so a switch
        between light and dark colours what is written from then on."""

    def show_drafts(self, step: RoundStep, piece) -> None:
        """Phase 1: the drafter's proposal, tentative."""
        if self._reply_cursor is None:
            self.begin_reply()
        cursor = self._reply_cursor
        start = cursor.position()
        fmt = QTextCharFormat()
        fmt.setBackground(QColor(PENDING_DARK if self._palette.dark else PENDING))
        fmt.setFontItalic(True)
        fmt.setFontUnderline(True)
        fmt.setUnderlineStyle(QTextCharFormat.UnderlineStyle.DotLine)
        fmt.setToolTip("drafted, waiting for the target's verdict")
        for token in step.drafts:
            cursor.insertText(piece(token), fmt)
        self._pending = (start, cursor.position())
        self._scroll_to_end()

    def show_verdict(self, step: RoundStep) -> None:
        """Phase 2: drafts replaced by what the target kept, struck, replaced and added."""
        cursor = self._reply_cursor
        if self._pending is not None:
            start, end = self._pending
            cursor.setPosition(start)
            cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
            cursor.removeSelectedText()
            self._pending = None
        for token in step.tokens:
            if token.kind is TokenKind.REPLACED and token.rejected_text:
                struck = QTextCharFormat()
                struck.setFontStrikeOut(True)
                struck.setForeground(QColor(palette.STROKES[TokenKind.REPLACED]))
                struck.setToolTip(f"<p>rejected draft: {html.escape(repr(token.rejected_text), quote=False)}</p>")
                cursor.insertText(token.rejected_text, struck)
            self.append_tokens([token])
        self._scroll_to_end()

    def struck_texts(self) -> list[str]:
        """The struck-through rejected drafts now in the document, in order."""
        out, block = [], self.document().begin()
        while block.isValid():
            it = block.begin()
            while not it.atEnd():
                frag = it.fragment()
                if frag.charFormat().fontStrikeOut():
                    out.append(frag.text())
                it += 1
            block = block.next()
        return out

    def pending_text(self) -> str:
        if self._pending is None:
            return ""
        start, end = self._pending
        cursor = QTextCursor(self.document())
        cursor.setPosition(start)
        cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        return cursor.selectedText()

    def mouseReleaseEvent(self, event) -> None:
        super().mouseReleaseEvent(event)
        token = self.token_at(event.position().toPoint())
        if token is not None:
            self.token_clicked.emit(token)


class CandidatesView(QWidget):
    """Why a draft was kept or rejected: both models' top candidates at one position."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.plot = plot_widget()
        self.plot.setMinimumHeight(180)
        self.plot.setTitle("Click a token to see both models' top candidates", size="8pt")
        self.plot.setLabel("bottom", "probability")
        self.plot.setXRange(0, 1)
        layout.addWidget(self.plot)
        self.target_bars = pg.BarGraphItem(x0=[], y=[], width=[], height=0.35, brush=palette.STROKES[TokenKind.BONUS])
        self.draft_bars = pg.BarGraphItem(x0=[], y=[], width=[], height=0.35, brush=palette.STROKES[TokenKind.ACCEPTED])
        self.plot.addItem(self.target_bars)
        self.plot.addItem(self.draft_bars)
        self.rows: list[tuple[str, float | None, float | None]] = []

    def show_token(self, token: TokenEvent, piece) -> None:
        """Rows: the union of both top lists, target's order first; bars for each model."""
        target = dict(token.target_top)
        draft = dict(token.draft_top)
        ids = [i for i, _ in token.target_top] + [i for i, _ in token.draft_top if i not in target]
        self.rows = [(piece(i), target.get(i), draft.get(i)) for i in ids]
        n = len(ids)
        ys = list(range(n))[::-1]
        self.target_bars.setOpts(x0=[0] * n, y=[y + 0.18 for y in ys], width=[target.get(i, 0.0) for i in ids])
        self.draft_bars.setOpts(x0=[0] * n, y=[y - 0.18 for y in ys], width=[draft.get(i, 0.0) for i in ids])
        axis = self.plot.getAxis("left")
        axis.setTicks([[(y, repr(piece(i))[1:-1][:14]) for y, i in zip(ys, ids)]])
        self.plot.setYRange(-0.6, max(n - 0.4, 0.6))
        t_col, d_col = palette.STROKES[TokenKind.BONUS], palette.STROKES[TokenKind.ACCEPTED]
        verdict = palette.LABELS[token.kind]
        self.plot.setTitle(
            f"{verdict} {html.escape(repr(piece(token.token_id)), quote=False)}: <span style='color:{t_col}'>■ target</span> "
            f"<span style='color:{d_col}'>■ drafter</span>",
            size="8pt",
        )


def bold() -> QTextCharFormat:
    fmt = QTextCharFormat()
    fmt.setFontWeight(QFont.Weight.Bold)
    return fmt


__all__ = ["KIND_PROPERTY", "TOKEN_PROPERTY", "CandidatesView", "RoundView"]
