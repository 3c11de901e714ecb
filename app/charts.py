"""Live charts: the figures (ChartModel, plain Python) and their drawing (ChartsPanel).

The model takes every event as it arrives; the panel redraws from it on a timer at
5 Hz at most, never per token, keeping its curve objects and calling setData.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt, QTimer
from PySide6.QtWidgets import QGridLayout, QLabel, QWidget

from app import palette
from app.chartmodel import RECENT_ROUNDS, ChartModel
from app.plots import plot_widget
from engine import RANK_BUCKETS, ThermalState, TokenKind

__all__ = ["ChartModel", "ChartsPanel", "nice_ceiling"]

REFRESH_MS = 200
NO_THERMAL = "No thermal chart: this machine reports no thermal state."
COLUMN_WIDTH = 250  # the narrowest a chart of two columns may be: its title and its ticks whole
STATE_LEVELS = (ThermalState.NOMINAL, ThermalState.FAIR, ThermalState.SERIOUS, ThermalState.CRITICAL)


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 1.5, 2, 3, 4, 5, 6, 8 x 10^k at or above value: limits that change rarely."""
    if value <= 0:
        return 1.0
    scale = 10.0 ** math.floor(math.log10(value))
    return next(m * scale for m in (1, 1.5, 2, 3, 4, 5, 6, 8, 10) if m * scale >= value * (1 - 1e-12))


def _colours(dark: bool) -> tuple[str, str]:
    """A plot's background and its axes' and titles' colour."""
    return ("#1e1e1e", "#d0d0d0") if dark else ("#ffffff", "#333333")


class ChartsPanel(QWidget):
    """Five small plots in a grid; redrawn from a ChartModel at 5 Hz at most."""

    def __init__(self, model: ChartModel, parent=None) -> None:
        super().__init__(parent)
        self.model = model
        # Painting a plot (its axes above all) is the GUI's main cost while a reply streams:
        # each plot is touched only when its own data changed.
        self._drawn_rounds = self._drawn_thermal = -1
        self._thermal_title = ""
        self._ranges: dict[int, tuple] = {}  # plot -> the (x, y) limits last set
        self.dark = palette.is_dark()
        self.titles: dict[pg.PlotWidget, str] = {}
        background, foreground = _colours(self.dark)
        pg.setConfigOptions(antialias=True, background=background, foreground=foreground)
        self.grid = QGridLayout(self)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.columns = 0  # two side by side where there is room, else one: never a sideways scroll
        # Which reply the figures are, and what "all" means: one line above the charts.
        self.showing = QLabel()
        self.showing.setObjectName("charts_showing")
        self.showing.setWordWrap(True)

        message_color, session_color = palette.STROKES[TokenKind.ACCEPTED], palette.STROKES[TokenKind.BONUS]
        both = f"<span style='color:{message_color}'>■reply</span> <span style='color:{session_color}'>■all</span>"
        self.tps_plot = self._plot(f"Decode tok/s {both}", "decode time (s)", "tok/s")
        self.tps_curve = self.tps_plot.plot(pen=pg.mkPen(message_color, width=2))
        dashed = pg.mkPen(session_color, width=2, style=Qt.PenStyle.DashLine)
        self.tps_session = pg.InfiniteLine(angle=0, pen=dashed)  # every reply of the conversation
        self.tps_plot.addItem(self.tps_session)

        self.accept_plot = self._plot(f"Acceptance {both}", "draft position", "accepted")
        self._positions_ticked: tuple[int, bool] | None = None
        self.accept_message = pg.BarGraphItem(x=[], height=[], width=0.38, brush=message_color)
        self.accept_session = pg.BarGraphItem(x=[], height=[], width=0.38, brush=session_color)
        self.accept_plot.addItem(self.accept_message)
        self.accept_plot.addItem(self.accept_session)

        self.length_plot = self._plot(f"Accepted length {both}", "decode time (s)", "tokens/round")
        self.length_plot.setToolTip(
            "Mean accepted length: the tokens a decode round wrote, drafts and the target's own"
        )
        self.length_curve = self.length_plot.plot(pen=pg.mkPen(message_color, width=2))
        self.length_session = pg.InfiniteLine(angle=0, pen=dashed)
        self.length_plot.addItem(self.length_session)

        parts = " ".join(f"<span style='color:{c}'>■{n}</span>" for n, c in palette.ROUND_PARTS.items())
        self.split_plot = self._plot(parts, f"last {RECENT_ROUNDS} rounds", "ms a round")
        self.split_bars = {
            name: pg.BarGraphItem(x=[], height=[], y0=[], width=0.8, brush=color)
            for name, color in palette.ROUND_PARTS.items()
        }
        for bars in self.split_bars.values():
            self.split_plot.addItem(bars)

        self.thermal_plot = self._plot("Thermal state", "time (s)", "state")
        axis = self.thermal_plot.getAxis("left")
        axis.setTicks([[(i, s.value) for i, s in enumerate(STATE_LEVELS)]])
        self._fit(self.thermal_plot, (0.0, 60.0), (-0.4, 3.4))
        self.thermal_plot.setMaximumHeight(170)
        self.thermal_state = self.thermal_plot.plot(pen=pg.mkPen("#ff7f0e", width=2))

        # Rejection anatomy: a miss whose token was the drafter's 2nd or 3rd choice is one a
        # draft tree of that width would have caught.
        self.ranks_plot = self._plot(
            f"Rejections by rank {both}", "the target's token in the drafter's choices", "share"
        )
        self.ranks_plot.setMaximumHeight(170)
        # The bottom row is shorter than the others: the what-if sentence under it must fit a laptop screen.
        self.ranks_plot.setMinimumHeight(100)
        self.thermal_plot.setMinimumHeight(100)
        self.ranks_plot.getAxis("bottom").setTicks([[(i, b) for i, b in enumerate(RANK_BUCKETS)]])
        self._fit(self.ranks_plot, (-0.6, len(RANK_BUCKETS) - 0.4), (0.0, 1.05))
        self.ranks_message = pg.BarGraphItem(x=[], height=[], width=0.38, brush=message_color)
        self.ranks_session = pg.BarGraphItem(x=[], height=[], width=0.38, brush=session_color)
        self.ranks_plot.addItem(self.ranks_message)
        self.ranks_plot.addItem(self.ranks_session)
        self.what_if = QLabel()  # the p_min what-if for this reply, in a sentence
        self.what_if.setWordWrap(True)
        self.what_if.setObjectName("what_if")
        # A machine with no thermal state to read: no empty chart, a line saying why.
        self.thermal_note = QLabel()
        self.thermal_note.setWordWrap(True)
        self.thermal_note.setObjectName("thermal_note")
        self.thermal_note.hide()
        self.thermal_unknown = False
        self.setMinimumWidth(self.tps_plot.minimumWidth())  # the column reflows rather than scroll sideways
        self._place()

        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self.refresh)
        self.timer.start()

    def _plot(self, title: str, xlabel: str, ylabel: str) -> pg.PlotWidget:
        plot = plot_widget()
        plot.setTitle(title, size="8pt")
        self.titles[plot] = title
        plot.setLabel("bottom", xlabel)
        plot.setLabel("left", ylabel)
        # No grid: pyqtgraph draws it with the axes, so every new point would repaint both axes.
        plot.setMinimumHeight(120)
        plot.setMinimumWidth(180)
        for side in ("left", "bottom"):  # a unit prefix would re-lay the label out on every range change
            plot.getAxis(side).enableAutoSIPrefix(False)
        # The last tick's label (60 of 60 rounds) sits on the plot's right edge: let it draw past
        # the axis into a margin kept for it, rather than be dropped.
        plot.getAxis("bottom").setStyle(hideOverlappingLabels=False)
        plot.getPlotItem().setContentsMargins(2, 2, 16, 2)
        return plot

    def plots(self) -> list[pg.PlotWidget]:
        """The charts shown, in reading order."""
        shown = [self.tps_plot, self.accept_plot, self.length_plot, self.split_plot, self.thermal_plot, self.ranks_plot]
        return [p for p in shown if p is not self.thermal_plot or not self.thermal_unknown]

    def _place(self) -> None:
        """The charts in two columns where two fit side by side, else in one."""
        columns = self._columns_that_fit()
        plots = self.plots()
        for widget in (self.showing, *plots, self.thermal_plot, self.thermal_note, self.what_if):
            self.grid.removeWidget(widget)
        self.grid.addWidget(self.showing, 0, 0, 1, 2)
        for i, plot in enumerate(plots):
            row, column = divmod(i, columns)
            last_alone = columns == 2 and i == len(plots) - 1 and column == 0
            self.grid.addWidget(plot, row + 1, column, 1, 2 if columns == 1 or last_alone else 1)
        rows = (len(plots) + columns - 1) // columns + 1
        self.grid.addWidget(self.thermal_note, rows, 0, 1, 2)
        self.grid.addWidget(self.what_if, rows + 1, 0, 1, 2)
        self.columns = columns

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self._columns_that_fit() != self.columns:
            self._place()

    def _columns_that_fit(self) -> int:
        """Two where each chart gets room for its title and its axis' labels, else one."""
        return 2 if self.width() >= 2 * COLUMN_WIDTH + max(self.grid.horizontalSpacing(), 0) else 1

    def changeEvent(self, event) -> None:
        if event.type() == QEvent.Type.PaletteChange and palette.is_dark() != self.dark:
            self.dark = palette.is_dark()  # light and dark switched: every plot follows
            background, foreground = _colours(self.dark)
            for plot, title in self.titles.items():
                plot.setBackground(background)
                plot.setTitle(title, size="8pt", color=foreground)
                for side in ("left", "bottom"):
                    plot.getAxis(side).setPen(foreground)
                    plot.getAxis(side).setTextPen(foreground)
        super().changeEvent(event)

    def refresh(self) -> None:
        m = self.model
        if m.rounds_version != self._drawn_rounds:
            self._drawn_rounds = m.rounds_version
            self._draw_rounds(m)
        if m.thermal_version != self._drawn_thermal:
            self._drawn_thermal = m.thermal_version
            self._draw_thermal(m)

    def _fit(self, plot: pg.PlotWidget, x: tuple[float, float], y: tuple[float, float]) -> None:
        """Set a plot's range only when its rounded limits change: a new range redraws the axes."""
        if self._ranges.get(id(plot)) != (x, y):
            self._ranges[id(plot)] = (x, y)
            plot.setRange(xRange=x, yRange=y, padding=0)

    def _draw_rounds(self, m: ChartModel) -> None:
        showing = m.shown or "the reply streaming now"
        all_replies = f"<span style='color:{palette.STROKES[TokenKind.BONUS]}'>■all</span>"
        line = f"Charts: {showing} ({all_replies}: every reply of this conversation)."
        self.showing.setText(line if m.shown or m.tps else "")
        for plot, curve, points, line, whole, y_min in (
            (self.tps_plot, self.tps_curve, m.tps, self.tps_session, m.session_tps(), 0.0),
            (self.length_plot, self.length_curve, m.mean_length, self.length_session, m.session_mean_length(), 1.0),
        ):
            xs, ys = zip(*points) if points else ((), ())
            curve.setData(xs, ys)
            line.setVisible(whole is not None)
            line.setPos(whole or 0.0)
            top = max(max(ys, default=1.0), whole or 0.0)
            self._fit(plot, (0.0, nice_ceiling(max(xs, default=0.0))), (y_min, nice_ceiling(top * 1.05)))
        message, session = m.message_acceptance(), m.session_acceptance()
        self.accept_message.setOpts(x=np.arange(1, len(message) + 1) - 0.2, height=message)
        self.accept_session.setOpts(x=np.arange(1, len(session) + 1) + 0.2, height=session)
        positions = max(len(message), len(session))
        if (positions, m.totals_only) != self._positions_ticked:  # draft positions are whole numbers
            self._positions_ticked = (positions, m.totals_only)
            ticks = [(1, "all")] if m.totals_only else [(i, str(i)) for i in range(1, positions + 1)]
            self.accept_plot.getAxis("bottom").setTicks([ticks])
            self._fit(self.accept_plot, (0.4, max(positions, 1) + 0.6), (0.0, 1.05))
        rounds = np.array(m.rounds, dtype=float).reshape(-1, len(self.split_bars))
        x = np.arange(len(rounds))
        base = np.zeros(len(rounds))
        for i, bars in enumerate(self.split_bars.values()):
            bars.setOpts(x=x, height=rounds[:, i], y0=base.copy())
            base += rounds[:, i]
        self._fit(self.split_plot, (-1.0, float(RECENT_ROUNDS)), (0.0, nice_ceiling(max(base, default=1.0) * 1.05)))
        self._draw_ranks(m)

    def _draw_ranks(self, m: ChartModel) -> None:
        x = np.arange(len(RANK_BUCKETS), dtype=float)
        for bars, counts, shift in (
            (self.ranks_message, m.message_ranks, -0.2),
            (self.ranks_session, m.session_ranks, 0.2),
        ):
            total = sum(counts.values())
            bars.setOpts(x=x + shift, height=[counts[b] / total if total else 0.0 for b in RANK_BUCKETS])
        a = m.anatomy()
        self.ranks_plot.setToolTip(
            a.summary()
            + "\n"
            + ", ".join(f"{b}: {m.message_ranks[b]} (session {m.session_ranks[b]})" for b in RANK_BUCKETS)
        )
        text = m.best_what_if()
        if text != self.what_if.text():
            self.what_if.setText(text)
            self.what_if.setToolTip("\n".join(w.sentence() for w in a.what_ifs))

    def _draw_thermal(self, m: ChartModel) -> None:
        unknown = bool(m.thermal) and m.thermal[-1].state not in STATE_LEVELS
        if unknown != self.thermal_unknown:  # no state to chart: its room goes to the others
            self.thermal_unknown = unknown
            self.thermal_plot.setVisible(not unknown)
            self.thermal_note.setVisible(unknown)
            self._place()
        if unknown:
            self.thermal_note.setText(NO_THERMAL)
            self.thermal_note.setToolTip(m.thermal[-1].describe())  # what was looked for, in full
        if m.thermal and not unknown:
            t0 = m.thermal[0].timestamp
            known = [r for r in m.thermal if r.state in STATE_LEVELS]
            if known:
                self.thermal_state.setData(
                    [r.timestamp - t0 for r in known], [STATE_LEVELS.index(r.state) for r in known]
                )
            span = max(60.0, nice_ceiling(m.thermal[-1].timestamp - t0))
            self._fit(self.thermal_plot, (0.0, span), (-0.4, 3.4))
            latest = m.thermal[-1].describe()
            short = latest if len(latest) <= 60 else latest[:57] + "…"
            if short != self._thermal_title:  # a new title lays the plot out again
                self._thermal_title = short
                self.titles[self.thermal_plot] = f"Thermal: {short}"
                self.thermal_plot.setTitle(f"Thermal: {short}", size="8pt", color=_colours(self.dark)[1])
                self.thermal_plot.setToolTip(latest)
