"""Small widgets: the message box and the provenance legend."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QWidget

from app import palette


class MessageBox(QPlainTextEdit):
    """Enter sends, Shift+Enter starts a new line, Ctrl/Cmd+Enter also sends."""

    submitted = Signal()

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setPlaceholderText("Message the model… (Enter sends, Shift+Enter for a new line)")
        self.setMaximumHeight(110)

    def keyPressEvent(self, event) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            mods = event.modifiers()
            if mods & Qt.KeyboardModifier.ShiftModifier:
                self.insertPlainText("\n")
                return
            self.submitted.emit()
            return
        super().keyPressEvent(event)


class Legend(QWidget):
    """The four kinds with their colours; always visible above the message box."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 2, 4, 2)
        self.swatches: dict[str, QLabel] = {}
        pal = palette.current()
        for kind in palette.KINDS:
            label = QLabel(f" {palette.LABELS[kind]} ")
            label.setToolTip(palette.EXPLANATIONS[kind])
            label.setStyleSheet(
                f"background:{pal.backgrounds[kind]}; color:{pal.text}; border-radius:3px; padding:1px 4px;"
            )
            self.swatches[kind.value] = label
            layout.addWidget(label)
        layout.addStretch(1)
