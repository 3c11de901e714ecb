"""The speedup calculator: the engine's cost model, live, on numbers the user can change.

Acceptance per position and the cost of rows and drafter steps go in; expected tokens,
round cost and predicted speedup per depth come out of engine.predict (the arithmetic
lives in the engine's cost model; this window only shows it). Costs are in plain passes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app import palette
from app.plots import plot_widget
from engine import (
    MAX_DEPTH,
    PRESET_COSTS,
    TYPICAL_ACCEPTANCE,
    TYPICAL_COSTS,
    BoxProfile,
    Costs,
    DepthPrediction,
    TokenKind,
    measured_acceptance,
    predict,
)

DEPTHS = MAX_DEPTH  # depths 0..MAX_DEPTH: a target pass of 1..MAX_DEPTH+1 rows
NO_PROFILE = "No profile yet: run `draftlight tune` or pick Auto once. Showing typical values."


class SpeedupCalculator(QWidget):
    """Inputs on the left; the table and a bar chart of speedup per depth on the right."""

    def __init__(
        self, profile: BoxProfile | Callable[[], BoxProfile | None] | None = None, chart_model=None, parent=None
    ) -> None:
        """`profile` is "this machine": a box profile, or a callable asked each time (the loaded pair's)."""
        super().__init__(parent)
        self.setWindowFlag(Qt.WindowType.Window, True)
        self.setWindowTitle("Speedup calculator")
        self._profile = profile
        self.chart_model = chart_model
        self.best = 0
        self.predictions: list[DepthPrediction] = []
        self._quiet = True  # no recomputing until every box exists

        def spin(low: float, high: float, step: float) -> QDoubleSpinBox:
            box = QDoubleSpinBox()
            box.setRange(low, high)
            box.setDecimals(3)
            box.setSingleStep(step)
            box.valueChanged.connect(self.recompute)
            return box

        accept_group = QGroupBox("Acceptance at each position, given the one before was accepted")
        accept_form = QFormLayout(accept_group)
        self.acceptance = [spin(0.0, 1.0, 0.05) for _ in range(DEPTHS)]
        for i, box in enumerate(self.acceptance, 1):
            accept_form.addRow(f"a{i}", box)
        self.from_conversation = QPushButton("This conversation")
        self.from_conversation.setToolTip("Acceptance measured in the main window's conversation")
        accept_form.addRow(self.from_conversation)

        cost_group = QGroupBox("Costs, in plain target passes")
        cost_form = QFormLayout(cost_group)
        self.rows = [spin(0.01, 100.0, 0.05) for _ in range(DEPTHS + 1)]
        self.rows[0].setValue(1.0)
        self.rows[0].setEnabled(False)  # the unit: one pass of one row
        for i, box in enumerate(self.rows, 1):
            cost_form.addRow(f"target pass of {i} row{'s' if i > 1 else ''}", box)
        self.drafter_step = spin(0.0, 100.0, 0.05)
        self.overhead = spin(0.0, 100.0, 0.01)
        cost_form.addRow("drafter step (of a pass)", self.drafter_step)
        cost_form.addRow("round overhead (of a pass)", self.overhead)

        presets = QHBoxLayout()
        self.this_machine = QPushButton("This machine")
        self.this_machine.clicked.connect(self.use_this_machine)
        presets.addWidget(self.this_machine)
        self.preset_buttons: dict[str, QPushButton] = {}
        for name, costs in PRESET_COSTS.items():
            button = QPushButton(name)
            button.clicked.connect(lambda _=False, c=costs: self.set_costs(c))
            self.preset_buttons[name] = button
            presets.addWidget(button)
        self.note = QLabel()
        self.note.setObjectName("calculator_note")
        self.note.setWordWrap(True)

        left = QVBoxLayout()
        left.addWidget(accept_group)
        left.addWidget(cost_group)
        left.addLayout(presets)
        left.addWidget(self.note)
        left.addStretch(1)

        self.table = QTableWidget(DEPTHS + 1, 5)
        self.table.setHorizontalHeaderLabels(["Depth", "E_k tokens", "C_k passes", "Tokens per pass", "Speedup"])
        self.table.verticalHeader().hide()
        rows_height = self.table.verticalHeader().defaultSectionSize() * (DEPTHS + 1)
        self.table.setMinimumHeight(rows_height + self.table.horizontalHeader().sizeHint().height() + 4)
        self.plot = plot_widget(background="#1e1e1e" if palette.is_dark() else "w")
        self.plot.setTitle("Predicted speedup by depth", size="8pt")
        self.plot.setLabel("bottom", "depth")
        self.plot.setLabel("left", "× speculation off")
        self.plot.getAxis("bottom").setTicks([[(k, str(k)) for k in range(DEPTHS + 1)]])
        self.plot.addLine(y=1.0, pen=pg.mkPen("#8c8c8c", style=Qt.PenStyle.DashLine))
        self.bars = pg.BarGraphItem(x=[], height=[], width=0.6)
        self.plot.addItem(self.bars)
        right = QVBoxLayout()
        right.addWidget(self.table)
        right.addWidget(self.plot, 1)

        layout = QHBoxLayout(self)
        layout.addLayout(left)
        layout.addLayout(right, 1)
        self.from_conversation.clicked.connect(self.use_conversation)

        self._quiet = False
        # Acceptance: the conversation's where measured, else the profile's calibration.
        profile = self.profile()
        self.set_acceptance(list(profile.acceptance_prior if profile else TYPICAL_ACCEPTANCE))
        self.use_this_machine()
        self.use_conversation()
        self.resize(980, 640)

    @classmethod
    def for_window(cls, window) -> SpeedupCalculator:
        """Prefilled from the main window's pair (its box profile) and conversation."""

        def saved() -> BoxProfile | None:
            engine = window.worker.engine
            return engine.saved_profile() if engine is not None else None

        return cls(saved, window.chart_model, window)

    # ---- inputs ----
    def values(self) -> tuple[list[float], Costs]:
        acceptance = [box.value() for box in self.acceptance]
        costs = Costs(tuple(box.value() for box in self.rows), self.drafter_step.value(), self.overhead.value())
        return acceptance, costs

    def set_costs(self, costs: Costs) -> None:
        self._quiet = True
        for box, value in zip(self.rows[1:], costs.rows[1:]):
            box.setValue(value)
        self.drafter_step.setValue(costs.drafter_step)
        self.overhead.setValue(costs.overhead)
        self._quiet = False
        self.recompute()

    def set_acceptance(self, acceptance: list[float | None]) -> None:
        """Set a_1.. where a value is given; None leaves a position as it is."""
        self._quiet = True
        for box, value in zip(self.acceptance, acceptance):
            if value is not None:
                box.setValue(value)
        self._quiet = False
        self.recompute()

    def profile(self) -> BoxProfile | None:
        """This machine's box profile for the pair, if `draftlight tune` or Auto has made one."""
        return self._profile() if callable(self._profile) else self._profile

    def use_this_machine(self) -> None:
        """Costs from this machine's box profile, or typical values where there is none."""
        profile = self.profile()
        if profile is None:
            self.note.setText(NO_PROFILE)
            self.set_costs(TYPICAL_COSTS)
            return
        self.note.setText(f"This machine: {profile.target} + {profile.drafter}, {profile.mode} mode, {profile.machine}")
        self.set_costs(Costs.from_profile(profile))

    def use_conversation(self) -> None:
        """Acceptance measured in the main window's session, where positions were drafted."""
        m = self.chart_model
        if m is not None:
            self.set_acceptance(measured_acceptance(m.session_rounds, DEPTHS))

    # ---- outputs ----
    def recompute(self) -> None:
        if self._quiet:
            return
        acceptance, costs = self.values()
        self.best, self.predictions = predict(acceptance, costs)
        highlight = QBrush(QColor(palette.current().backgrounds[TokenKind.ACCEPTED]))
        bold = QFont()
        bold.setBold(True)
        for p in self.predictions:
            cells = [str(p.depth), f"{p.expected_tokens:.3f}", f"{p.cost:.3f}", f"{p.tokens_per_pass:.3f}"]
            cells.append(f"{p.speedup:.3f}×")
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if p.depth == self.best:
                    item.setBackground(highlight)
                    item.setFont(bold)
                self.table.setItem(p.depth, col, item)
        speedups = [p.speedup for p in self.predictions]
        brushes = [
            palette.STROKES[TokenKind.ACCEPTED if k == self.best else TokenKind.PLAIN] for k in range(len(speedups))
        ]
        self.bars.setOpts(x=np.arange(len(speedups)), height=speedups, brushes=brushes)

    def highlighted_depth(self) -> int | None:
        """The depth whose table row is drawn as the best (what a person sees)."""
        for row in range(self.table.rowCount()):
            item = self.table.item(row, 0)
            if item is not None and item.font().bold():
                return row
        return None
