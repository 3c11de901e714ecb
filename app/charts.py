"""Live charts: the figures (ChartModel, plain Python) and their drawing (ChartsPanel).

The model takes every event as it arrives; the panel redraws from it on a timer at
5 Hz at most, never per token, keeping its curve objects and calling setData.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QTimer
from PySide6.QtWidgets import QGridLayout, QLabel, QWidget

from app import palette
from engine import (
    RANK_BUCKETS,
    PositionTally,
    RejectionAnatomy,
    RoundEvent,
    RunStats,
    ThermalReading,
    ThermalState,
    TokenEvent,
    TokenKind,
    rank_bucket,
    rejection_anatomy,
)

REFRESH_MS = 200
STATE_LEVELS = (ThermalState.NOMINAL, ThermalState.FAIR, ThermalState.SERIOUS, ThermalState.CRITICAL)
RECENT_ROUNDS = 60


@dataclass
class ChartModel:
    """Figures the charts draw, recomputable from the events alone.

    x is decode time in seconds, summed over the session's rounds. Decode tokens/s at a
    point is the current message's tokens over its round time so far.
    """

    decode_time: float = 0.0
    tps: list[tuple[float, float]] = field(default_factory=list)
    mean_length: list[tuple[float, float]] = field(default_factory=list)
    message_positions: PositionTally = field(default_factory=PositionTally)
    session_positions: PositionTally = field(default_factory=PositionTally)
    session_rounds: list[tuple[int, int]] = field(default_factory=list)  # (drafted, accepted) per round
    rounds: deque = field(default_factory=lambda: deque(maxlen=RECENT_ROUNDS))  # (draft, verify, commit, host) ms
    kinds: dict[TokenKind, int] = field(default_factory=lambda: dict.fromkeys(TokenKind, 0))
    thermal: list[ThermalReading] = field(default_factory=list)
    last_stats: RunStats | None = None
    # Rejection anatomy: where the target's token stood among the drafter's choices, per rank
    # bucket (this message, the session), and this message's events for the p_min what-if.
    message_ranks: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RANK_BUCKETS, 0))
    session_ranks: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RANK_BUCKETS, 0))
    message_replaced: list[TokenEvent] = field(default_factory=list)
    message_rounds: list[RoundEvent] = field(default_factory=list)
    plain_pass_s: float | None = None  # this target alone on this box, for the what-if's prices
    _message_tokens: int = 0
    _message_time: float = 0.0
    _message_rounds: int = 0
    _pending_tokens: int = 0
    rounds_version: int = 0  # bumped when the round-driven plots change
    thermal_version: int = 0  # bumped with each thermal reading
    totals_only: bool = False  # a server that reports a reply's draft totals alone: acceptance is one bar

    def clear_thermal(self) -> None:
        """Another box's readings from now on."""
        self.thermal = []
        self.thermal_version += 1

    def begin_message(self) -> None:
        self.message_positions = PositionTally()
        self.message_ranks = dict.fromkeys(RANK_BUCKETS, 0)
        self.message_replaced, self.message_rounds = [], []
        self._message_tokens = self._message_rounds = self._pending_tokens = 0
        self._message_time = 0.0
        self.rounds_version += 1

    def add(self, events: list) -> None:
        for event in events:
            if isinstance(event, TokenEvent):
                self._pending_tokens += 1
                self.kinds[event.kind] += 1
                if event.draft_rank is not None:
                    bucket = rank_bucket(event.draft_rank)
                    self.message_ranks[bucket] += 1
                    self.session_ranks[bucket] += 1
                    self.message_replaced.append(event)
            elif isinstance(event, RoundEvent):
                self._add_round(event)
            elif isinstance(event, RunStats):
                self.last_stats = event
                if not self.message_rounds:  # a remote server's reply: its totals, no rounds
                    self._add_totals(event)

    def _add_round(self, r: RoundEvent) -> None:
        self.rounds_version += 1
        self.message_rounds.append(r)
        if r.from_prefill:  # the prompt's pass wrote this token: no decode round, no decode time
            self._pending_tokens = 0
            return
        seconds = r.total_ms / 1e3
        self.decode_time += seconds
        self._message_time += seconds
        self._message_rounds += 1
        self._message_tokens += self._pending_tokens
        self._pending_tokens = 0
        self.message_positions.add(r.drafted, r.accepted)
        self.session_positions.add(r.drafted, r.accepted)
        self.session_rounds.append((r.drafted, r.accepted))
        if self._message_time > 0:
            self.tps.append((self.decode_time, self._message_tokens / self._message_time))
        self.mean_length.append((self.decode_time, self._message_tokens / self._message_rounds))
        # host: the loop's own work outside the round's three parts (its events, the text, the next depth)
        self.rounds.append((r.draft_ms, r.verify_ms, r.commit_ms, max(0.0, r.round_ms - r.total_ms)))

    def _add_totals(self, stats: RunStats) -> None:
        """What llama-server (draft totals) and vLLM (per position) report of a reply."""
        self.rounds_version += 1
        self._pending_tokens = 0
        if stats.decode_s <= 0:
            return
        self.decode_time += stats.decode_s
        self.tps.append((self.decode_time, stats.decode_tps))
        if stats.rounds:
            self.mean_length.append((self.decode_time, stats.mean_accepted_length))
        if stats.drafted_per_position:
            drafted, accepted = stats.drafted_per_position, stats.accepted_per_position
        elif stats.drafted:
            drafted, accepted = (stats.drafted,), (stats.accepted,)
            self.totals_only = True  # one bar for every position together
        else:
            return
        self.message_positions.extend(drafted, accepted)
        self.session_positions.extend(drafted, accepted)

    def add_thermal(self, reading: ThermalReading) -> None:
        self.thermal.append(reading)
        del self.thermal[:-600]
        self.thermal_version += 1

    def anatomy(self) -> RejectionAnatomy:
        """This message's rejections and its p_min what-ifs."""
        return rejection_anatomy(self.message_replaced, self.message_rounds, self.plain_pass_s)

    def best_what_if(self) -> str:
        """The cutoff that would have helped this message most, in a sentence (or why none would)."""
        a = self.anatomy()
        measured = self.tps[-1][1] if self.tps else None
        useful = [w for w in a.what_ifs if w.skipped and w.tps is not None]
        if not useful:
            return "" if not a.rejections else "No confidence cutoff would have skipped a draft in this message."
        best = max(useful, key=lambda w: w.tps)
        return best.sentence(measured).capitalize() + "."

    def message_acceptance(self) -> list[float]:
        return list(self.message_positions.acceptance)

    def session_acceptance(self) -> list[float]:
        return list(self.session_positions.acceptance)


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
        layout = QGridLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)

        self.tps_plot = self._plot("Decode tok/s", "decode time (s)", "tok/s")
        self.tps_curve = self.tps_plot.plot(pen=pg.mkPen(palette.STROKES[TokenKind.ACCEPTED], width=2))

        message_color, session_color = palette.STROKES[TokenKind.ACCEPTED], palette.STROKES[TokenKind.BONUS]
        self.accept_plot = self._plot(
            f"Acceptance <span style='color:{message_color}'>■msg</span> "
            f"<span style='color:{session_color}'>■session</span>",
            "draft position",
            "accepted",
        )
        self._positions_ticked: tuple[int, bool] | None = None
        self.accept_message = pg.BarGraphItem(x=[], height=[], width=0.38, brush=message_color)
        self.accept_session = pg.BarGraphItem(x=[], height=[], width=0.38, brush=session_color)
        self.accept_plot.addItem(self.accept_message)
        self.accept_plot.addItem(self.accept_session)

        self.length_plot = self._plot("Mean accepted length", "decode time (s)", "tokens/round")
        self.length_curve = self.length_plot.plot(pen=pg.mkPen(palette.STROKES[TokenKind.BONUS], width=2))

        parts = " ".join(f"<span style='color:{c}'>■{n}</span>" for n, c in palette.ROUND_PARTS.items())
        self.split_plot = self._plot(f"Round {parts}", f"last {RECENT_ROUNDS} rounds", "ms")
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
            f"Rejections by rank <span style='color:{message_color}'>■msg</span> "
            f"<span style='color:{session_color}'>■session</span>",
            "the target's token in the drafter's choices",
            "share",
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
        self.what_if = QLabel()  # the p_min what-if for this message, in a sentence
        self.what_if.setWordWrap(True)
        self.what_if.setObjectName("what_if")

        layout.addWidget(self.tps_plot, 0, 0)
        layout.addWidget(self.accept_plot, 0, 1)
        layout.addWidget(self.length_plot, 1, 0)
        layout.addWidget(self.split_plot, 1, 1)
        layout.addWidget(self.thermal_plot, 2, 0)
        layout.addWidget(self.ranks_plot, 2, 1)
        layout.addWidget(self.what_if, 3, 0, 1, 2)

        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self.refresh)
        self.timer.start()

    def _plot(self, title: str, xlabel: str, ylabel: str) -> pg.PlotWidget:
        plot = pg.PlotWidget()
        plot.setTitle(title, size="8pt")
        self.titles[plot] = title
        plot.setLabel("bottom", xlabel)
        plot.setLabel("left", ylabel)
        # No grid: pyqtgraph draws it with the axes, so every new point would repaint both axes.
        plot.setMinimumHeight(120)
        plot.setMinimumWidth(180)
        plot.setMenuEnabled(False)
        for side in ("left", "bottom"):  # a unit prefix would re-lay the label out on every range change
            plot.getAxis(side).enableAutoSIPrefix(False)
        # The last tick's label (60 of 60 rounds) sits on the plot's right edge: let it draw past
        # the axis into a margin kept for it, rather than be dropped.
        plot.getAxis("bottom").setStyle(hideOverlappingLabels=False)
        plot.getPlotItem().setContentsMargins(2, 2, 12, 2)
        return plot

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
        for plot, curve, points, y_min in (
            (self.tps_plot, self.tps_curve, m.tps, 0.0),
            (self.length_plot, self.length_curve, m.mean_length, 1.0),
        ):
            xs, ys = zip(*points) if points else ((), ())
            curve.setData(xs, ys)
            self._fit(
                plot, (0.0, nice_ceiling(max(xs, default=0.0))), (y_min, nice_ceiling(max(ys, default=1.0) * 1.05))
            )
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
        if m.thermal:
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
