"""Provenance colours: one palette for the transcript, the legends and the charts."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtGui import QColor, QGuiApplication, QPalette, QTextCharFormat

from engine import TokenKind

KINDS = (TokenKind.ACCEPTED, TokenKind.REPLACED, TokenKind.BONUS, TokenKind.PLAIN)

LABELS = {
    TokenKind.ACCEPTED: "accepted",
    TokenKind.REPLACED: "replaced",
    TokenKind.BONUS: "bonus",
    TokenKind.PLAIN: "plain",
    TokenKind.UNREPORTED: "not reported",
}

EXPLANATIONS = {
    TokenKind.ACCEPTED: "drafted, and the target agreed",
    TokenKind.REPLACED: "the target's own token where it rejected a draft",
    TokenKind.BONUS: "the target's extra token after every draft was accepted",
    TokenKind.PLAIN: "one target pass, nothing drafted",
    TokenKind.UNREPORTED: "the server does not say whether this token was drafted",
}

# Chart strokes: saturated, readable on light and dark plot backgrounds alike.
STROKES = {
    TokenKind.ACCEPTED: "#2ca02c",
    TokenKind.REPLACED: "#d62728",
    TokenKind.BONUS: "#1f77b4",
    TokenKind.PLAIN: "#8c8c8c",
    TokenKind.UNREPORTED: "#8c8c8c",
}

# Token backgrounds: opaque, so text stays readable and what is on screen can be checked.
_LIGHT = {
    TokenKind.ACCEPTED: "#c6efc6",
    TokenKind.REPLACED: "#f7c1c1",
    TokenKind.BONUS: "#c4dafc",
    TokenKind.PLAIN: "#e9e9e9",
    TokenKind.UNREPORTED: "transparent",  # no colour: nothing is known to show
}
_DARK = {
    TokenKind.ACCEPTED: "#1e5a30",
    TokenKind.REPLACED: "#7a2b2b",
    TokenKind.BONUS: "#23457a",
    TokenKind.PLAIN: "#3c3c3c",
    TokenKind.UNREPORTED: "transparent",
}

# A cue beside each colour for readers who cannot tell the colours apart: an underline style
# per kind (the legend names it). Accepted, the commonest kind, is the one left bare.
_LINE = QTextCharFormat.UnderlineStyle
CUES = {
    TokenKind.ACCEPTED: (_LINE.NoUnderline, "no line"),
    TokenKind.REPLACED: (_LINE.WaveUnderline, "wavy line"),
    TokenKind.BONUS: (_LINE.DashUnderline, "dashed line"),
    TokenKind.PLAIN: (_LINE.DashDotLine, "dash-dot line"),
    TokenKind.UNREPORTED: (_LINE.NoUnderline, "no line"),
}


def apply_cue(fmt: QTextCharFormat, kind: TokenKind) -> None:
    """Underline `fmt` in its kind's style, in the kind's chart stroke colour."""
    style, _word = CUES[kind]
    if style != _LINE.NoUnderline:
        fmt.setUnderlineStyle(style)
        fmt.setUnderlineColor(QColor(STROKES[kind]))


# Round-time parts in the stacked chart.
ROUND_PARTS = {"draft": "#9467bd", "verify": "#ff7f0e", "commit": "#17becf", "host": "#7f7f7f"}


@dataclass(frozen=True)
class Palette:
    dark: bool
    backgrounds: dict[TokenKind, str]
    text: str

    def background(self, kind: TokenKind) -> QColor:
        return QColor(self.backgrounds[kind])

    def describe(self) -> str:
        return ", ".join(f"{LABELS[k]} {self.backgrounds[k]}" for k in KINDS)


def is_dark() -> bool:
    app = QGuiApplication.instance()
    if app is None:
        return False
    window = app.palette().color(QPalette.ColorRole.Window)
    return window.lightness() < 128


def current(dark: bool | None = None) -> Palette:
    """The colours for a dark or a light window; by default, the application's own."""
    dark = is_dark() if dark is None else dark
    return Palette(dark, _DARK if dark else _LIGHT, "#f0f0f0" if dark else "#111111")
