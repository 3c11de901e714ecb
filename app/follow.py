"""Keeping a streaming reply in view: the transcript follows the end of the conversation
unless the reader scrolled away; then new text waits below and a button jumps back to it."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QAbstractScrollArea, QPushButton

NEAR_END_PX = 4  # a scroll bar this close to its end counts as at the end


class Follower(QObject):
    """The view follows its end while `following`; a scroll away from the end stops that, and a
    scroll back to it (or the "Jump to latest" button) starts it again."""

    def __init__(self, view: QAbstractScrollArea) -> None:
        super().__init__(view)
        self.view = view
        self.following = True
        self._moving = False  # our own scroll, not the reader's
        self.jump = QPushButton("Jump to latest ↓", view)
        self.jump.setObjectName("jump_to_latest")
        self.jump.setToolTip("Scroll to the end of the conversation and follow the reply as it streams.")
        self.jump.clicked.connect(self.follow)
        self.jump.hide()
        bar = view.verticalScrollBar()
        bar.valueChanged.connect(self._scrolled)
        bar.rangeChanged.connect(self._grown)
        view.installEventFilter(self)

    def at_end(self) -> bool:
        bar = self.view.verticalScrollBar()
        return bar.value() >= bar.maximum() - NEAR_END_PX

    def follow(self) -> None:
        """Scroll to the end and keep there as text arrives."""
        self.following = True
        self.jump.hide()
        self._to_end()

    def _to_end(self) -> None:
        bar = self.view.verticalScrollBar()
        self._moving = True
        try:
            bar.setValue(bar.maximum())
        finally:
            self._moving = False

    def _scrolled(self, _value: int) -> None:
        if self._moving:
            return
        self.following = self.at_end()
        if self.following:
            self.jump.hide()

    def _grown(self, _minimum: int, _maximum: int) -> None:
        if self.following:
            self._to_end()
        elif not self.at_end():  # new text below, out of view
            self._place()
            self.jump.show()
            self.jump.raise_()

    def _place(self) -> None:
        self.jump.adjustSize()
        port = self.view.viewport().geometry()
        self.jump.move(port.right() - self.jump.width() - 12, port.bottom() - self.jump.height() - 8)

    def eventFilter(self, obj, event) -> bool:
        if obj is self.view and event.type() == QEvent.Type.Resize:
            self._place()
        return False
