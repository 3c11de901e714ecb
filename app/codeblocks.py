"""Fenced code in a reply: Pygments colours for its text, and the code a Copy link puts on the clipboard."""

from __future__ import annotations

from dataclasses import dataclass

from pygments.lexers import get_lexer_by_name
from pygments.lexers.special import TextLexer
from pygments.styles import get_style_by_name
from pygments.token import Comment
from pygments.util import ClassNotFound

COPY_SCHEME = "copy:"  # the href of a code block's Copy link: copy:<block number>

# Foregrounds only: a token's background is its provenance colour, so the styles chosen here
# are ones whose text reads on those pastel (light) or deep (dark) backgrounds.
LIGHT_STYLE = "default"
DARK_STYLE = "monokai"
# Monokai's comment grey (#959077) reads at under 3:1 on the dark provenance colours; this one
# keeps its hue and reads at 4.9:1 or more on each of them.
DARK_COMMENT = "#d0c9ad"


@dataclass(frozen=True)
class Piece:
    """A run of code in one Pygments colour."""

    text: str
    colour: str | None  # "#rrggbb", or None for the view's own text colour
    bold: bool = False
    italic: bool = False


def lexer_for(info: str):
    """The lexer the fence's info string names, or plain text (guessing would cost a pass over
    every lexer on each re-render of a streaming reply)."""
    name = info.split()[0] if info.strip() else ""
    try:
        return (
            get_lexer_by_name(name, stripnl=False, ensurenl=False) if name else TextLexer(stripnl=False, ensurenl=False)
        )
    except ClassNotFound:
        return TextLexer(stripnl=False, ensurenl=False)


def highlight(code: str, info: str, dark: bool) -> list[Piece]:
    """The code cut into coloured runs whose texts join back to exactly `code`."""
    style = get_style_by_name(DARK_STYLE if dark else LIGHT_STYLE)
    pieces: list[Piece] = []
    for kind, text in lexer_for(info).get_tokens(code):
        if not text:
            continue
        s = style.style_for_token(kind)
        colour = f"#{s['color']}" if s["color"] else None
        if dark and kind in Comment:
            colour = DARK_COMMENT
        pieces.append(Piece(text, colour, bool(s["bold"]), bool(s["italic"])))
    joined = "".join(p.text for p in pieces)
    if joined != code:  # a lexer that rewrote the text (tabs, line ends): show it uncoloured instead
        return [Piece(code, None)]
    return pieces
