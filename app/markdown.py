"""A reply's Markdown, rendered into the transcript with every character still wearing its token.

markdown-it-py parses the reply's source text; the blocks it finds are written with a
QTextCursor (tables as QTextTable, code as monospace blocks coloured by Pygments). Each
rendered character is matched to the offset in the source it came from, and so to the token
that wrote it: that token's format (its provenance background and TOKEN_PROPERTY) is merged
into the character's, so hover and teaching find tokens inside rendered text too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from markdown_it import MarkdownIt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextFormat,
    QTextLength,
    QTextTableFormat,
)

from app.codeblocks import COPY_SCHEME, highlight

_PARSER = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
HEADING_SCALE = {1: 1.5, 2: 1.3, 3: 1.15}


@dataclass
class _Style:
    bold: bool = False
    italic: bool = False
    strike: bool = False
    code: bool = False
    href: str = ""
    scale: float = 1.0


@dataclass
class Renderer:
    """Writes one reply's Markdown at `cursor`; `owners[i]` is the token that wrote source[i]."""

    cursor: QTextCursor
    source: str
    owners: list[int]
    token_format: Callable[[int], QTextCharFormat]
    dark: bool
    point_size: float
    key: str = COPY_SCHEME  # the Copy links' href prefix, unique to this reply
    code_blocks: list[str] = field(default_factory=list)  # each block's code, for its Copy link
    _ptr: int = 0  # source offset up to which characters have been matched
    _hi: int = 0  # end of the source block now being rendered
    _fresh: bool = True  # the cursor's block is empty and unformatted: the next block can use it
    _item_start: bool = False  # a list item's marker was just written: its first paragraph joins it
    _indent: int = 0
    _lists: list[list[int]] = field(default_factory=list)  # per open list: [ordered, next number]
    _style: _Style = field(default_factory=_Style)

    def __post_init__(self) -> None:
        self._lines = [0]
        for i, ch in enumerate(self.source):
            if ch == "\n":
                self._lines.append(i + 1)
        self._mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)

    # ---- source offsets ----
    def _line(self, n: int) -> int:
        return self._lines[n] if n < len(self._lines) else len(self.source)

    def _enter(self, token, skip_lines: int = 0) -> None:
        """Matching continues inside this token's source lines (skipping e.g. an opening fence)."""
        if token.map:
            self._ptr = max(self._ptr, self._line(token.map[0] + skip_lines))
            self._hi = self._line(token.map[1])
        else:
            self._hi = len(self.source)

    def _locate(self, text: str) -> list[int | None]:
        """Each character's source offset: the next same character, in order, in this block."""
        out: list[int | None] = []
        for ch in text:
            j = self.source.find(ch, self._ptr, self._hi)
            if j < 0:
                out.append(None)  # made by the renderer, not in the source
            else:
                out.append(j)
                self._ptr = j + 1
        return out

    # ---- writing ----
    def _char_format(self, colour: str | None = None, bold: bool = False, italic: bool = False) -> QTextCharFormat:
        s = self._style
        fmt = QTextCharFormat()
        if s.code:
            fmt.setFont(self._mono, QTextCharFormat.FontPropertiesInheritanceBehavior.FontPropertiesSpecifiedOnly)
            fmt.setFontFamilies(self._mono.families())
        if s.bold or bold:
            fmt.setFontWeight(QFont.Weight.Bold)
        if s.italic or italic:
            fmt.setFontItalic(True)
        if s.strike:
            fmt.setFontStrikeOut(True)
        if s.scale != 1.0:
            fmt.setFontPointSize(self.point_size * s.scale)
        if s.href:
            fmt.setAnchor(True)
            fmt.setAnchorHref(s.href)
            colour = colour or ("#8ab4f8" if self.dark else "#1a55c0")
        if colour:
            fmt.setForeground(QColor(colour))
        return fmt

    def _emit(self, text: str, offsets: list[int | None], fmt: QTextCharFormat) -> None:
        """Insert `text` in runs that share a token, each run with that token's format merged in."""
        start = 0
        for i in range(1, len(text) + 1):
            owner = self._owner(offsets[start])
            if i < len(text) and self._owner(offsets[i]) == owner:
                continue
            run = QTextCharFormat(fmt)
            if owner is not None:
                run.merge(self.token_format(owner))
            self.cursor.insertText(text[start:i], run)
            start = i
        self._fresh = False

    def _owner(self, offset: int | None) -> int | None:
        return None if offset is None else self.owners[offset]

    def _text(self, text: str, fmt: QTextCharFormat | None = None) -> None:
        if text:
            self._emit(text, self._locate(text), fmt or self._char_format())

    def _block(self, fmt: QTextBlockFormat | None = None) -> None:
        fmt = fmt or QTextBlockFormat()
        fmt.setIndent(self._indent)
        if self._fresh:
            self.cursor.setBlockFormat(fmt)
        else:
            self.cursor.insertBlock(fmt, QTextCharFormat())
        self.cursor.setCharFormat(QTextCharFormat())
        self._fresh = False

    # ---- the token stream ----
    def render(self) -> None:
        tokens = _PARSER.parse(self.source)
        i = 0
        while i < len(tokens):
            i = self._render_one(tokens, i) + 1

    def _render_one(self, tokens, i: int) -> int:
        t = tokens[i]
        kind = t.type
        if t.map:
            self._enter(t)
        if kind == "paragraph_open":
            if self._item_start:
                self._item_start = False
            else:
                self._block()
        elif kind == "heading_open":
            fmt = QTextBlockFormat()
            fmt.setTopMargin(6)
            self._block(fmt)
            self._style = _Style(bold=True, scale=HEADING_SCALE.get(int(t.tag[1]), 1.0))
        elif kind == "heading_close":
            self._style = _Style()
        elif kind == "inline":
            self._inline(t.children or [])
        elif kind in ("bullet_list_open", "ordered_list_open"):
            self._lists.append([kind == "ordered_list_open", int(t.attrs.get("start", 1) or 1)])
            self._indent += 1
        elif kind in ("bullet_list_close", "ordered_list_close"):
            self._lists.pop()
            self._indent -= 1
        elif kind == "list_item_open":
            self._list_item(t)
        elif kind == "blockquote_open":
            self._indent += 1
        elif kind == "blockquote_close":
            self._indent -= 1
        elif kind in ("fence", "code_block"):
            self._code(t)
        elif kind == "hr":
            fmt = QTextBlockFormat()
            fmt.setProperty(
                QTextFormat.Property.BlockTrailingHorizontalRulerWidth,
                QTextLength(QTextLength.Type.PercentageLength, 100),
            )
            self._block(fmt)
        elif kind == "table_open":
            return self._table(tokens, i)
        return i

    def _list_item(self, t) -> None:
        ordered, number = self._lists[-1]
        self._block()
        if ordered:
            self._emit(f"{number}. ", [*self._locate(f"{number}{t.markup}"), None], self._char_format())
            self._lists[-1][1] += 1
        else:  # the bullet is drawn for the marker, and wears the marker's token
            self._emit("• ", [*self._locate(t.markup), None], self._char_format())
        self._item_start = True

    def _inline(self, children) -> None:
        s = self._style
        for c in children:
            kind = c.type
            if kind == "text":
                self._text(c.content)
            elif kind == "code_inline":
                s.code = True
                self._text(c.content)
                s.code = False
            elif kind == "softbreak":
                self._emit(" ", self._locate("\n"), self._char_format())
            elif kind == "hardbreak":
                self._emit("\u2028", self._locate("\n"), self._char_format())
            elif kind in ("strong_open", "strong_close"):
                s.bold = kind == "strong_open" or self._style.scale != 1.0
            elif kind in ("em_open", "em_close"):
                s.italic = kind == "em_open"
            elif kind in ("s_open", "s_close"):
                s.strike = kind == "s_open"
            elif kind == "link_open":
                s.href = str(c.attrs.get("href", ""))
            elif kind == "link_close":
                s.href = ""
            elif kind == "image":
                self._inline(c.children or [])

    def _code(self, t) -> None:
        """A code block: a line with its language and a Copy link, then the code, highlighted."""
        number = len(self.code_blocks)
        self.code_blocks.append(t.content)
        fenced = t.type == "fence"
        head = QTextBlockFormat()
        head.setTopMargin(4)
        self._block(head)
        if fenced and t.info:
            self._hi = self._line(t.map[0] + 1)
            self._text(t.info, self._char_format(colour="#8a8a8a"))
            self.cursor.insertText("  ", QTextCharFormat())
        link = QTextCharFormat()
        link.setAnchor(True)
        link.setAnchorHref(f"{self.key}{number}")
        link.setForeground(QColor("#8ab4f8" if self.dark else "#1a55c0"))
        self.cursor.insertText("Copy", link)
        self._enter(t, skip_lines=1 if fenced else 0)
        line = QTextBlockFormat()
        line.setNonBreakableLines(True)
        line.setBackground(QColor("#1b1b1b" if self.dark else "#f6f6f6"))
        line.setLeftMargin(6)
        self._style.code = True
        self._block(line)
        for piece in highlight(t.content.removesuffix("\n"), t.info, self.dark):
            for n, part in enumerate(piece.text.split("\n")):
                if n:
                    self._locate("\n")
                    self._block(line)
                self._text(part, self._char_format(piece.colour, piece.bold, piece.italic))
        self._style.code = False
        self._locate("\n")

    def _table(self, tokens, i: int) -> int:
        """A table, as a QTextTable; returns the index of its table_close."""
        end, rows, cols, n = i, 0, 0, 0
        while tokens[end].type != "table_close":
            kind = tokens[end].type
            if kind == "tr_open":
                rows, n = rows + 1, 0
            elif kind in ("th_open", "td_open"):
                n += 1
                cols = max(cols, n)
            end += 1
        self._block()
        fmt = QTextTableFormat()
        fmt.setCellPadding(3)
        fmt.setCellSpacing(0)
        fmt.setBorder(0.5)
        fmt.setBorderCollapse(True)
        table = self.cursor.insertTable(max(rows, 1), max(cols, 1), fmt)
        row, col = -1, 0
        for t in tokens[i + 1 : end]:
            if t.map:
                self._enter(t)
            if t.type == "tr_open":
                row, col = row + 1, 0
            elif t.type in ("th_open", "td_open"):
                self.cursor = table.cellAt(row, col).firstCursorPosition()
                self._style = _Style(bold=t.type == "th_open")
                col += 1
            elif t.type == "inline":
                self._inline(t.children or [])
        self._style = _Style()
        self.cursor = table.lastCursorPosition()
        self.cursor.movePosition(QTextCursor.MoveOperation.NextBlock)
        self._fresh = True
        return end
