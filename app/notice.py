"""The line under the transcript: a sentence the user needs now, briefly, with the rest on request.

A standing notice such as why replies run plain is long arithmetic; the line shows its first
sentence, the key figure, and a "why?" link that opens the whole of it. A sentence said about
something just done (a failed load, an edit under way) is shown whole.
"""

from __future__ import annotations

import re

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QMessageBox, QWidget

# The end of the first sentence: a full stop (or ! ?) followed by a space and a capital or a
# parenthesis, so that "qwen2.5-coder.gguf" or "e.g. this" do not end it.
_SENTENCE_END = re.compile(r"[.!?](?=\s+[A-Z(])")


def split_first_sentence(text: str) -> tuple[str, str]:
    """The text's first sentence and the rest ("" where it is one sentence)."""
    match = _SENTENCE_END.search(text)
    if match is None:
        return text, ""
    return text[: match.end()], text[match.end() :].strip()


class NoticeLine(QWidget):
    """A one-line notice with an optional "why?" that shows the details in a message box."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.line = QLabel()
        self.line.setObjectName("notice")
        self.line.setWordWrap(True)
        self.line.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.why = QLabel('<a href="why">why?</a>')
        self.why.setObjectName("notice_why")
        self.why.setTextInteractionFlags(
            Qt.TextInteractionFlag.LinksAccessibleByMouse | Qt.TextInteractionFlag.LinksAccessibleByKeyboard
        )
        self.why.setToolTip("The whole reasoning, in this machine's figures")
        self.why.linkActivated.connect(lambda _href: self.show_details())
        self.why.hide()
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.line, 1)
        layout.addWidget(self.why, 0, Qt.AlignmentFlag.AlignTop)
        self._full = ""
        self.details: QMessageBox | None = None

    def say(self, text: str) -> None:
        """A sentence shown whole."""
        self._show(text, text, "")

    def say_briefly(self, text: str) -> None:
        """Its first sentence on the line, all of it behind "why?"."""
        first, rest = split_first_sentence(text)
        self._show(text, first, text if rest else "")

    def _show(self, full: str, shown: str, details: str) -> None:
        self._full = full
        self.line.setText(shown)
        self.line.setToolTip(details)
        self.why.setVisible(bool(details))
        self._details_text = details

    def text(self) -> str:
        """The whole notice, shown part and details alike."""
        return self._full

    def shown(self) -> str:
        """What the line itself shows."""
        return self.line.text()

    def show_details(self) -> QMessageBox:
        """The whole notice in a window-modal box that does not block the window."""
        box = self.details
        if box is None:
            box = self.details = QMessageBox(QMessageBox.Icon.Information, "Why", "", parent=self.window())
            box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        box.setText(self._details_text or self._full)
        box.open()
        return box
