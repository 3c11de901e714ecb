"""Measuring this machine for Auto in the background: replies stream plain meanwhile.

Auto picks each round's depth from a box profile (engine.measure.profile). With none saved, the
first Auto reply used to measure one first, minutes of silence. Here the measurement runs on the
engine thread as steps (Engine.measuring): each step is queued behind whatever the window asked
for before it, so a reply runs between two steps and the measurement waits for it, and nothing is
timed while a reply runs. Until the profile is saved, Auto replies play plain; then Auto takes over.

`BoxMeasurer` lives on the engine thread (a child of the worker); `MeasurePanel` is its face in
the window: what Draftlight is and what is measured (the first time), the steps done of all, an
estimate of what is left, and Stop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from engine import AUTO, DraftlightError, MeasurePlan, MeasureStep

WELCOME = (
    "<p><b>Welcome to Draftlight.</b> A large <b>target</b> model writes each reply while a small "
    "<b>drafter</b> guesses the next few tokens; the target checks a whole guess in one pass, and "
    "every token is coloured by where it came from: accepted, replaced, bonus or plain.</p>"
    "<p>To choose how far ahead to guess (Auto), Draftlight first times this machine: the target's "
    "passes over 1 to {rows} tokens, the drafter's steps, and three short calibration replies. That "
    "usually takes a few minutes on a CPU and less on a GPU; the bar below gives an estimate from its "
    "own steps. Meanwhile replies stream plain, and the measurement pauses while one runs.</p>"
)
STOPPED = "Measuring stopped: Auto replies stream plain until Tools → Measure This Machine."
AGAIN = "<p><b>Measuring this machine again</b> for Auto: replies stream plain until it is done.</p>"


@dataclass(frozen=True)
class MeasureProgress:
    """Where a box measurement stands: steps done of all, what it is doing, seconds left (an estimate)."""

    done: int
    total: int
    label: str
    seconds_left: float | None


def time_left(seconds: float | None) -> str:
    if seconds is None:
        return "estimating the time left"
    if seconds < 90:
        return f"about {max(5, round(seconds / 5) * 5):.0f} s left"
    return f"about {seconds / 60:.0f} min left"


class BoxMeasurer(QObject):
    """Runs Engine.measuring one step per visit of the engine thread's event loop."""

    progressed = Signal(object)  # MeasureProgress
    ended = Signal(str, bool)  # the sentence for the notice line; whether a profile was saved
    _next = Signal()

    def __init__(self, engine_of: Callable, took_over: Callable[[bool], str], parent: QObject) -> None:
        super().__init__(parent)
        self.engine_of = engine_of  # () -> the local Engine, or None (a remote one replies)
        self.took_over = took_over  # (auto) -> what Auto does now that the profile is saved, in a sentence
        self.plan = MeasurePlan()
        self.steps = None
        self.auto = True  # the window was at Auto when it asked: Auto's verdict is applied at the end
        # Auto replies play plain while this is set: measuring, or stopped before the end.
        self.holds_auto = False
        self._cancelled = False
        self._seconds = 0.0  # spent in steps; a reply's time in between is not the measurement's
        self._next.connect(self._step, Qt.ConnectionType.QueuedConnection)

    @property
    def running(self) -> bool:
        return self.steps is not None

    @Slot(bool, bool)
    def start(self, again: bool, auto: bool) -> None:
        """Measure the loaded pair (`again`: even where a profile is saved); steps follow, queued."""
        if self.steps is not None:
            return
        if self._cancelled:  # Stop was pressed before this start reached the engine thread
            self._cancelled, self.holds_auto = False, True
            self.ended.emit(STOPPED, False)
            return
        engine = self.engine_of()
        steps = engine.measuring(self.plan, again) if engine is not None else None
        if steps is None:
            why = "no model is loaded on this machine"
            if engine is not None:
                why = "replies run plain, no drafter loaded" if engine.plain_reason else "no drafter is loaded"
            self.ended.emit(f"Nothing to measure: {why}.", False)
            return
        self.steps, self.auto, self._seconds, self.holds_auto = steps, auto, 0.0, True
        self._next.emit()

    def cancel(self) -> None:
        """From the GUI thread: stop before the next step (only sets a flag)."""
        self._cancelled = True

    def drop(self) -> None:
        """On the engine thread, before its models change or close: the steps end, their contexts freed."""
        if self.steps is not None:
            self.steps.close()
            self.steps = None
        self.holds_auto = False

    @Slot()
    def _step(self) -> None:
        if self.steps is None:
            return
        if self._cancelled:
            self.steps.close()
            self.steps, self._cancelled = None, False  # holds_auto stays: Auto plays plain until one ends
            self.ended.emit(STOPPED, False)
            return
        t0 = time.perf_counter()
        try:
            step: MeasureStep = next(self.steps)
        except StopIteration:
            self.steps, self.holds_auto = None, False
            try:
                said = self.took_over(self.auto)
            except Exception as exc:  # the profile is saved; Auto reads it on its next reply
                said = f"This machine is measured; applying Auto's verdict failed ({exc}): the next Auto reply does."
            self.ended.emit(said, True)
            return
        except DraftlightError as exc:  # a profile refused on a busy machine: Auto runs plain, and says so
            self.steps, self.holds_auto = None, False
            self.ended.emit(f"The measurement was not kept: {exc}", False)
            return
        except Exception as exc:  # said in a sentence; the replies go on plain
            self.steps = None
            self.ended.emit(
                f"Measuring this machine failed ({type(exc).__name__}: {exc}); replies stream plain.", False
            )
            return
        self._seconds += time.perf_counter() - t0
        left = self._seconds / step.done * (step.total - step.done) if step.done else None
        self.progressed.emit(MeasureProgress(step.done, step.total, step.label, left))
        self._next.emit()


class MeasurePanel(QFrame):
    """Above the transcript while this machine is measured: what and why, how far, how long, Stop."""

    stop_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("measure_panel")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.intro = QLabel()
        self.intro.setWordWrap(True)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.status = QLabel("Starting…")
        self.status.setObjectName("measure_status")
        self.status.setWordWrap(True)
        self.stop = QPushButton("Stop measuring")
        self.stop.setToolTip("Auto replies stream plain until Tools → Measure This Machine measures it again.")
        self.stop.clicked.connect(self.stop_requested)
        row = QHBoxLayout()
        row.addWidget(self.bar, 1)
        row.addWidget(self.stop)
        layout = QVBoxLayout(self)
        layout.addWidget(self.intro)
        layout.addLayout(row)
        layout.addWidget(self.status)
        self.latest: MeasureProgress | None = None
        self.paused = False
        self.hide()

    def begin(self, first: bool, max_depth: int) -> None:
        self.intro.setText(WELCOME.format(rows=max_depth + 1) if first else AGAIN)
        self.latest, self.paused = None, False
        self.bar.setValue(0)
        self.status.setText("Starting…")
        self.stop.setEnabled(True)
        self.show()

    def show_progress(self, progress: MeasureProgress) -> None:
        self.latest = progress
        self.bar.setValue(int(1000 * progress.done / max(progress.total, 1)))
        self._say()

    def set_paused(self, paused: bool) -> None:
        """While a reply streams the measurement waits: say so, beside how far it got."""
        if paused != self.paused:
            self.paused = paused
            self._say()

    def _say(self) -> None:
        p = self.latest
        where = f"{p.label[:1].upper()}{p.label[1:]}: step {p.done} of {p.total}" if p else "Starting"
        when = "paused while the reply streams" if self.paused else time_left(p.seconds_left if p else None)
        self.status.setText(f"{where} · {when}")


class MeasureControl(QObject):
    """The window's side: starts a measurement (first run, a reply at Auto, Tools, Preferences),
    shows the panel while it runs, and says in the notice line how it ended."""

    requested = Signal(bool, bool)  # again, auto: to BoxMeasurer.start on the engine thread

    def __init__(self, window, pane: QWidget) -> None:
        super().__init__(window)
        self.window = window
        self.box: BoxMeasurer = window.worker.box
        self.panel = MeasurePanel()
        pane.layout().insertWidget(0, self.panel)
        self.requested.connect(self.box.start)
        self.box.progressed.connect(self.panel.show_progress)
        self.box.ended.connect(self._ended)
        self.panel.stop_requested.connect(self.stop)
        self.measuring = False
        self.stopped = False  # the user stopped it: Auto stays plain until asked again
        # Measure as soon as a pair loads at Auto (the first run). Off where preferences were handed in
        # (tests, the self-test), as the first-run dialog is: there a reply at Auto starts it.
        self.on_load = window.offer_first_run

    def measure(self, again: bool = False, first: bool = False) -> None:
        """Measure this machine for the loaded pair; `again` even where a profile is saved."""
        window = self.window
        if self.measuring:
            window._say("This machine is being measured already: its progress is above the conversation.")
            return
        if window.pair is None or window.pair.remote is not None:
            window._say("Nothing to measure: no model is loaded on this machine.")
            return
        self.measuring, self.stopped = True, False
        self.panel.begin(first, self.box.plan.max_depth)
        self.requested.emit(again, window.side.chosen_depth() == AUTO)

    def loaded(self, info) -> None:
        """A pair loaded (the worker dropped any measurement): measure it first where Auto needs it."""
        if self.measuring:
            self.measuring = False
            self.panel.hide()
        auto = self.window.side.chosen_depth() == AUTO
        if self.on_load and info.unmeasured and info.remote is None and auto and not self.stopped:
            self.measure(first=True)

    def before_reply(self, depth) -> None:
        """A reply at Auto with no profile: measure in the background; the reply plays plain meanwhile."""
        pair = self.window.pair
        if depth == AUTO and pair is not None and pair.unmeasured and not self.measuring and not self.stopped:
            self.measure(first=True)

    def stop(self) -> None:
        self.box.cancel()
        self.stopped = True
        self.panel.stop.setEnabled(False)
        self.panel.status.setText("Stopping after this step…")

    def _ended(self, sentence: str, measured: bool) -> None:
        self.measuring = False
        self.panel.hide()
        self.window._say(sentence)
