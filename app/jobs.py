"""One pattern for every background job: superqt's generator worker, as one small class.

A Job is a QObject living on the thread that does the work. Tools that use the engine move
theirs to the window's one engine thread, so their work queues behind the chat, never beside
it (the engine is single-threaded: no thread pool). Work is a function: where it is a
generator, each value it yields leaves as `yielded` and a cancel stops it at the next yield;
its return value leaves as `returned`. A failure leaves as `errored`, always a sentence; a
cancel as `aborted`; `finished` comes last, however the work ended. Nothing here touches a
widget: the window connects to the signals, and Qt queues them to the GUI thread.
"""

from __future__ import annotations

import inspect
import threading
import time
import traceback
from collections.abc import Callable, Generator
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, Qt, QThread, Signal, Slot

from engine import Cancelled, DraftlightError

REPORT_EVERY_S = 0.1  # a callback's progress reaches the GUI at most 10 times a second


@dataclass(frozen=True)
class ProgressReport:
    """How far a job has got: `done` of `total` (runs, prompts, bytes), and what runs now."""

    done: int
    total: int
    label: str


class Job(QObject):
    """Runs work on this object's thread, one call at a time; its results leave as signals.

    `failure` begins the sentence for an exception nobody foresaw ("The lab failed").
    `stops_itself`: the work ends itself on a cancel, with a last word (a stopped reply ends
    with its stats, a cancelled probe with its report): the job never cuts it off.
    """

    yielded = Signal(object)  # each value a generator yields, or a callback reports
    returned = Signal(object)  # the work's return value
    errored = Signal(str)  # what went wrong, in a sentence
    aborted = Signal()  # cancelled: by cancel(), or by the engine's Cancelled
    finished = Signal()  # last, however the work ended
    _queued = Signal(object)  # (work, args), from start(): run on this object's thread

    def __init__(self, failure: str, stops_itself: bool = False, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.failure = failure
        self.stops_itself = stops_itself
        self._cancel = threading.Event()
        self._last_report = (0.0, "")
        # Queued even from this object's own thread: a job waits for the work before it.
        self._queued.connect(self._begin, Qt.ConnectionType.QueuedConnection)

    def start(self, work: Callable[..., Any], *args: Any) -> None:
        """Queue `work(*args)` on this object's thread; a cancel from now on stops it, even before it begins."""
        self._cancel.clear()
        self._queued.emit((work, args))

    def run(self, work: Callable[..., Any], *args: Any) -> None:
        """Run `work(*args)` now, on the calling thread (this object's): a cancel from before is forgotten."""
        self._cancel.clear()
        self._run(work, args)

    def cancel(self) -> None:
        """From any thread: the work stops at its next yield or report, or wherever it polls `cancelled`."""
        self._cancel.set()

    def cancelled(self) -> bool:
        """Whether a cancel was asked for: hand this to engine calls that poll (engine.stream)."""
        return self._cancel.is_set()

    def progress(self, done: int, total: int, label: str) -> None:
        """An engine progress callback: a ProgressReport leaves as `yielded` (at most 10 a second, but always
        a label's first and the last), and a cancel stops the work here, as at a yield."""
        self._cut_off()
        now = time.monotonic()
        last, last_label = self._last_report
        if done >= total or label != last_label or now - last > REPORT_EVERY_S:
            self._last_report = (now, label)
            self.yielded.emit(ProgressReport(done, total, label))

    @Slot(object)
    def _begin(self, call: tuple[Callable[..., Any], tuple]) -> None:
        work, args = call
        self._run(work, args)

    def _run(self, work: Callable[..., Any], args: tuple) -> None:
        self._last_report = (0.0, "")
        try:
            self._cut_off()  # cancelled while it waited its turn
            result = work(*args)
            if inspect.isgenerator(result):
                result = self._drain(result)
            self.returned.emit(result)
        except Exception as exc:  # the app must survive anything a job does
            self._ended_by(exc)
        finally:
            self.finished.emit()

    def _drain(self, values: Generator[Any, None, Any]) -> Any:
        with closing(values):  # a generator cut off runs its own `finally` blocks now
            while True:
                try:
                    value = next(values)
                except StopIteration as end:
                    return end.value
                self.yielded.emit(value)
                self._cut_off()

    def _cut_off(self) -> None:
        if self._cancel.is_set() and not self.stops_itself:
            raise Cancelled("Cancelled.")

    def _ended_by(self, exc: Exception) -> None:
        # Where the job cuts the work off, any failure after a cancel is the cancel's doing: code
        # the Cancelled passes through (the hub's download) may wrap it in an error of its own.
        if isinstance(exc, Cancelled) or (self._cancel.is_set() and not self.stops_itself):
            self.aborted.emit()
        elif isinstance(exc, DraftlightError):
            self.errored.emit(str(exc))
        else:
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            self.errored.emit(f"{self.failure} ({detail}).")
            traceback.print_exc()


def own_thread(job: Job, parent: QObject, name: str) -> QThread:
    """A thread for a job that loads models of its own (the pairing check, a download), started.

    The job is deleted with the thread's end; whoever owns the thread ends it with `end_thread`.
    """
    thread = QThread(parent)
    thread.setObjectName(name)
    job.moveToThread(thread)
    thread.finished.connect(job.deleteLater)
    thread.start()
    return thread


def end_thread(job: Job, thread: QThread, wait_ms: int = -1) -> bool:
    """Cancel the job, end its thread once the work stops; whether it ended within `wait_ms` (-1: no limit)."""
    job.cancel()
    thread.quit()
    return thread.wait() if wait_ms < 0 else thread.wait(wait_ms)
