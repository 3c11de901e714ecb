"""Small widgets: the message box, the provenance legend, the list of conversations."""

from __future__ import annotations

import sys

from PySide6.QtCore import QEvent, QSize, Qt, Signal
from PySide6.QtWidgets import (
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app import palette
from app.notice import NoticeLine

SEND_CHORD = "⌘Return" if sys.platform == "darwin" else "Ctrl+Return"


class MessageBox(QPlainTextEdit):
    """The message box. With send_key "return": Return (or Ctrl/Cmd+Return) sends, Shift+Return starts
    a new line. With "cmd-return": Ctrl+Return (Cmd+Return on a Mac) sends, Return starts a new line."""

    submitted = Signal()

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setMaximumHeight(110)
        self.set_send_key("return")

    def set_send_key(self, send_key: str) -> None:
        self.send_key = send_key
        new_line = "Return" if send_key == "cmd-return" else "Shift+Return"
        self.setPlaceholderText(f"Message the model… ({self.send_chord()} sends, {new_line} for a new line)")

    def send_chord(self) -> str:
        """The keys that send, in words."""
        return SEND_CHORD if self.send_key == "cmd-return" else "Return"

    def keyPressEvent(self, event) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            mods = event.modifiers()
            chord = bool(mods & Qt.KeyboardModifier.ControlModifier)  # Cmd on a Mac
            sends = chord if self.send_key == "cmd-return" else not mods & Qt.KeyboardModifier.ShiftModifier
            if sends:
                self.submitted.emit()
            else:
                self.insertPlainText("\n")
            return
        super().keyPressEvent(event)


class Legend(QWidget):
    """The four kinds with their colours; always visible above the message box."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.grid = QGridLayout(self)
        self.grid.setContentsMargins(4, 2, 4, 2)
        self.grid.setHorizontalSpacing(6)
        self.grid.setVerticalSpacing(2)
        self.swatches: dict[str, QLabel] = {}
        for kind in palette.KINDS:
            cue = palette.CUES[kind][1]  # the non-colour cue, named beside the colour
            label = QLabel(f" {palette.LABELS[kind]} · {cue} ")
            label.setToolTip(f"{palette.EXPLANATIONS[kind]}; in the text: {cue} under the token")
            self.swatches[kind.value] = label
        self.dark: bool | None = None
        self._colour(palette.is_dark())
        self.raw = QToolButton()  # replies as the model wrote them, Markdown unrendered
        self.raw.setText("Raw text")
        self.raw.setCheckable(True)
        self.raw.setToolTip("Show replies as raw text instead of rendered Markdown")
        labels = [w.sizeHint().width() for w in self.swatches.values()]
        margins = 8 + self.raw.sizeHint().width() + 6
        self.one_row_width = sum(labels) + 6 * len(labels) + margins
        self.two_rows_width = max(a + b for a, b in zip(labels[::2], labels[1::2], strict=False)) + 6 * 2 + margins
        self.columns = 0
        self._arrange(len(labels))

    def _arrange(self, columns: int) -> None:
        """The swatches in one row, or two where the column is narrow: never cut."""
        if columns == self.columns:
            return
        self.columns = columns
        for i, label in enumerate(self.swatches.values()):
            self.grid.addWidget(label, i // columns, i % columns)
        self.grid.addWidget(self.raw, 0, columns + 1)
        for c in range(len(self.swatches) + 2):
            self.grid.setColumnStretch(c, 1 if c == columns else 0)

    def minimumSizeHint(self) -> QSize:
        return QSize(self.two_rows_width, super().minimumSizeHint().height())

    def resizeEvent(self, event) -> None:
        self._arrange(len(self.swatches) if event.size().width() >= self.one_row_width else 2)
        super().resizeEvent(event)

    def _colour(self, dark: bool) -> None:
        if dark == self.dark:
            return
        self.dark, pal = dark, palette.current(dark)
        for kind in palette.KINDS:
            self.swatches[kind.value].setStyleSheet(
                f"background:{pal.backgrounds[kind]}; color:{pal.text}; border-radius:3px; padding:1px 4px;"
            )

    def changeEvent(self, event) -> None:
        if event.type() == QEvent.Type.PaletteChange:  # light and dark switched: the swatches follow
            self._colour(palette.is_dark())
        super().changeEvent(event)


class ConversationList(QWidget):
    """The saved conversations, newest first, and the button for a new one."""

    chosen = Signal(int)  # a conversation's id, picked by the user
    new_requested = Signal()

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        self.new_button = QPushButton("New conversation")
        self.items = QListWidget()
        # A long title ends in "…" (the whole of it in the tooltip): no sideways scrolling in a narrow column.
        self.items.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.items.setTextElideMode(Qt.TextElideMode.ElideRight)
        layout.addWidget(self.new_button)
        layout.addWidget(self.items)
        self.new_button.clicked.connect(self.new_requested)
        self.items.currentItemChanged.connect(self._picked)

    def fill(self, conversations, current_id: int) -> None:
        """Show these conversations (id, title), the current one selected, without signalling a choice."""
        self.items.blockSignals(True)
        self.items.clear()
        for c in conversations:
            item = QListWidgetItem(c.title)
            item.setToolTip(c.title)
            item.setData(Qt.ItemDataRole.UserRole, c.id)
            self.items.addItem(item)
            if c.id == current_id:
                self.items.setCurrentItem(item)
        self.items.blockSignals(False)

    def _picked(self, item: QListWidgetItem | None) -> None:
        if item is not None:
            self.chosen.emit(int(item.data(Qt.ItemDataRole.UserRole)))


class ChatPane(QWidget):
    """The conversation's column: the coloured transcript, the legend, a notice line, the message box."""

    def __init__(self, transcript: QWidget, parent=None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        self.transcript = transcript
        self.legend = Legend()
        self.input = MessageBox()
        self.send_button = QPushButton("Send")
        self.send_button.setDefault(True)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setEnabled(False)
        self.notice = NoticeLine()
        # Where speculation cannot pay and replies run plain: the way to watch it anyway.
        self.speculate_anyway = QPushButton("Speculate anyway, to watch it")
        self.speculate_anyway.setObjectName("speculate_anyway")
        self.speculate_anyway.setToolTip(
            "Load the drafter and draft 2 tokens a round, in exact mode: slower here than plain decoding, "
            "but every draft, acceptance and rejection is there to see."
        )
        self.speculate_anyway.hide()
        # A remote engine lost mid-reply: ask again (the partial reply stays above).
        self.retry = QPushButton("Retry")
        self.retry.setObjectName("retry")
        self.retry.setToolTip("Ask for this reply again; the part that arrived stays in the conversation.")
        self.retry.hide()
        # Any failed reply: take it out of the conversation (Edit → Undo brings it back).
        self.remove_failed = QPushButton("Remove")
        self.remove_failed.setObjectName("remove_failed")
        self.remove_failed.setToolTip("Remove the failed reply from the conversation; Undo brings it back.")
        self.remove_failed.hide()
        notice_row = QHBoxLayout()
        notice_row.addWidget(self.notice, 1)
        notice_row.addWidget(self.speculate_anyway, 0, Qt.AlignmentFlag.AlignTop)
        notice_row.addWidget(self.retry, 0, Qt.AlignmentFlag.AlignTop)
        notice_row.addWidget(self.remove_failed, 0, Qt.AlignmentFlag.AlignTop)
        row = QHBoxLayout()
        row.addWidget(self.input, 1)
        buttons = QVBoxLayout()
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        row.addLayout(buttons)
        layout.addWidget(self.transcript, 1)
        layout.addWidget(self.legend)
        layout.addLayout(notice_row)
        layout.addLayout(row)
