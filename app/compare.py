"""Off and on, side by side: the same prompt with speculation off, then on.

Greedy decoding, so the two panes must hold the same text in different colours. Where
they differ, the first differing token is marked and the batch-invariance probe says why.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QGridLayout, QHBoxLayout, QLabel, QLineEdit, QPushButton, QSpinBox, QVBoxLayout, QWidget

from app.jobs import Job
from app.transcript import TranscriptView
from app.worker import EngineWorker
from engine import MAX_DEPTH, DraftlightError, GenerationConfig, Message, RunStats, TokenEvent

COMPARE_TOKENS = 96


@dataclass(frozen=True)
class Side:
    tokens: list[TokenEvent]
    stats: RunStats
    wall_s: float


@dataclass(frozen=True)
class Comparison:
    off: Side
    on: Side
    first_difference: int | None  # token index, None when the texts agree
    explanation: str


def first_difference(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def compare_sides(chat_worker: EngineWorker, prompt: str, depth: int) -> Comparison:
    """The prompt with speculation off, then at `depth`: a job on the chat's engine thread."""
    engine = chat_worker.engine
    if engine is None:
        raise DraftlightError(chat_worker.missing())
    ids = engine.prompt_ids([Message("user", prompt)])
    sides = []
    for d in (0, depth):
        engine.forget()  # each side prefills the whole prompt: like with like
        t0 = time.perf_counter()
        events = list(engine.stream(ids, GenerationConfig(max_tokens=COMPARE_TOKENS, depth=d)))
        sides.append(Side([e for e in events if isinstance(e, TokenEvent)], events[-1], time.perf_counter() - t0))
    diff = first_difference([t.token_id for t in sides[0].tokens], [t.token_id for t in sides[1].tokens])
    explanation = "The two texts are identical, token for token: speculation changed the speed, not the words."
    if diff is not None:
        probe = engine.probe_batch_invariance(ids)
        explanation = f"The texts part at token {diff + 1}. Batch-invariance probe on this machine: {probe.describe()}"
        if probe.invariant:
            explanation += " The kernels are invariant, so this difference is a bug: please report it."
    return Comparison(sides[0], sides[1], diff, explanation)


class ComparePanel(QWidget):
    def __init__(self, main_window=None, parent=None) -> None:
        super().__init__(parent)
        self.main_window = main_window
        self.result: Comparison | None = None
        layout = QVBoxLayout(self)
        top = QHBoxLayout()
        self.prompt = QLineEdit("Explain what a hash map is in three sentences.")
        self.depth = QSpinBox()
        self.depth.setRange(1, MAX_DEPTH)
        self.depth.setValue(2)
        self.depth.setPrefix("on: depth ")
        self.run_button = QPushButton("Run off, then on")
        top.addWidget(self.prompt, 1)
        top.addWidget(self.depth)
        top.addWidget(self.run_button)
        layout.addLayout(top)
        grid = QGridLayout()
        self.off_label, self.on_label = QLabel("Speculation off"), QLabel("Speculation on")
        self.off_view, self.on_view = TranscriptView(), TranscriptView()
        grid.addWidget(self.off_label, 0, 0)
        grid.addWidget(self.on_label, 0, 1)
        grid.addWidget(self.off_view, 1, 0)
        grid.addWidget(self.on_view, 1, 1)
        layout.addLayout(grid, 1)
        self.verdict = QLabel()
        self.verdict.setWordWrap(True)
        layout.addWidget(self.verdict)
        self.run_button.clicked.connect(self.run)
        self.job = Job("The comparison failed")
        if main_window is not None:
            self.job.moveToThread(main_window.thread)  # queued behind the chat, never beside it
        self.job.returned.connect(self.show_result)
        self.job.errored.connect(self.verdict.setText)
        self.job.finished.connect(self._ended)

    def run(self) -> None:
        if self.main_window is None:
            self.verdict.setText("Comparing needs the models: open teaching mode from the chat window.")
            return
        if self.main_window.streaming:
            self.verdict.setText("The chat is streaming a reply; compare once it has finished.")
            return
        self.run_button.setEnabled(False)
        self.verdict.setText("Running with speculation off, then on…")
        self.job.start(compare_sides, self.main_window.worker, self.prompt.text(), self.depth.value())

    def _ended(self) -> None:
        self.run_button.setEnabled(True)  # after a failure too: the prompt can be changed and run again

    def show_result(self, result: Comparison) -> None:
        self.result = result
        for view, label, side, name in (
            (self.off_view, self.off_label, result.off, "Speculation off"),
            (self.on_view, self.on_label, result.on, f"Speculation on (depth {result.on.stats.depth})"),
        ):
            view.clear_conversation()
            view.show_reply(side.tokens, side.stats, False)
            s = side.stats
            label.setText(
                f"<b>{name}</b>: {side.wall_s:.2f} s, {s.decode_tps:.1f} tok/s decode"
                + (f", acceptance {s.acceptance:.0%}" if s.drafted else "")
            )
        if result.first_difference is not None:
            for view in (self.off_view, self.on_view):
                self._mark(view, result.first_difference)
        speed = result.on.stats.decode_tps / result.off.stats.decode_tps if result.off.stats.decode_tps else 0
        self.verdict.setText(f"{result.explanation} Speculation on ran at {speed:.2f}x the speed of off.")

    @staticmethod
    def _mark(view: TranscriptView, index: int) -> None:
        """A red wavy underline under the first token that differs."""
        for span in view.spans():
            if span.token_index == index:
                cursor = QTextCursor(view.document())
                cursor.setPosition(span.start)
                cursor.setPosition(span.end, QTextCursor.MoveMode.KeepAnchor)
                fmt = QTextCharFormat()
                fmt.setUnderlineStyle(QTextCharFormat.UnderlineStyle.WaveUnderline)
                fmt.setUnderlineColor(QColor("#d62728"))
                fmt.setToolTip("the first token where the two panes differ")
                cursor.mergeCharFormat(fmt)
                return


__all__ = ["ComparePanel", "Comparison", "Qt", "first_difference"]
