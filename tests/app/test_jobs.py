"""The one worker pattern: a Job runs work on its own thread and says how it ended, in signals."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import QObject, Slot

from app import jobs
from app.jobs import Job, ProgressReport, end_thread, own_thread
from engine import Cancelled, DraftlightError, ModelNotAvailable

WAIT_MS = 10_000


class Seen(QObject):
    """What a job's signals delivered, in order, and on which thread (the GUI's, for a window)."""

    def __init__(self, job: Job) -> None:
        super().__init__()
        self.events: list[tuple[str, object]] = []
        self.threads: set[int] = set()
        job.yielded.connect(self.yielded)
        job.returned.connect(self.returned)
        job.errored.connect(self.errored)
        job.aborted.connect(self.aborted)
        job.finished.connect(self.finished)

    def _saw(self, name: str, value: object = None) -> None:
        self.events.append((name, value))
        self.threads.add(threading.get_ident())

    @Slot(object)
    def yielded(self, value: object) -> None:
        self._saw("yielded", value)

    @Slot(object)
    def returned(self, value: object) -> None:
        self._saw("returned", value)

    @Slot(str)
    def errored(self, sentence: str) -> None:
        self._saw("errored", sentence)

    @Slot()
    def aborted(self) -> None:
        self._saw("aborted")

    @Slot()
    def finished(self) -> None:
        self._saw("finished")

    def ended(self, times: int = 1) -> bool:
        return [name for name, _ in self.events].count("finished") >= times


@pytest.fixture
def threaded(qtbot):
    """make(failure, **options): a Job on a thread of its own, and what its signals delivered."""
    owner = QObject()
    made: list[tuple[Job, object]] = []

    def make(failure: str = "The test job failed", **options) -> tuple[Job, Seen]:
        job = Job(failure, **options)
        seen = Seen(job)
        made.append((job, own_thread(job, owner, "test job")))
        return job, seen

    yield make
    for job, thread in made:
        assert end_thread(job, thread, WAIT_MS), "a test job's thread did not end"


def test_each_yielded_value_then_the_return_value_reach_the_gui_thread_in_order(qtbot, threaded):
    job, seen = threaded()
    ran_on = []

    def count(n: int):
        ran_on.append(threading.get_ident())
        yield from range(n)
        return f"counted to {n}"

    job.start(count, 3)
    qtbot.waitUntil(seen.ended, timeout=WAIT_MS)
    assert seen.events == [
        ("yielded", 0),
        ("yielded", 1),
        ("yielded", 2),
        ("returned", "counted to 3"),
        ("finished", None),
    ]
    assert ran_on != [threading.get_ident()] and len(ran_on) == 1  # the work ran off the GUI thread
    assert seen.threads == {threading.get_ident()}  # and its results were delivered on it


def test_a_draftlight_error_is_shown_as_its_own_sentence(qtbot, threaded):
    job, seen = threaded()

    def fails():
        yield "a first value"
        raise DraftlightError("No drafter is loaded: choose one in the side panel, or run depth 0 only.")

    job.start(fails)
    qtbot.waitUntil(seen.ended, timeout=WAIT_MS)
    assert seen.events == [
        ("yielded", "a first value"),
        ("errored", "No drafter is loaded: choose one in the side panel, or run depth 0 only."),
        ("finished", None),
    ]


def test_an_unexpected_exception_is_a_sentence_naming_it_and_the_job_runs_again(qtbot, threaded, capsys):
    job, seen = threaded("The lab failed")
    job.start(lambda settings: settings["depth"], {})
    qtbot.waitUntil(seen.ended, timeout=WAIT_MS)
    assert seen.events == [("errored", "The lab failed (KeyError: 'depth')."), ("finished", None)]
    assert "Traceback" in capsys.readouterr().err  # the details, for a bug report

    job.start(lambda: 1 / 0)
    qtbot.waitUntil(lambda: seen.ended(2), timeout=WAIT_MS)
    assert seen.events[2] == ("errored", "The lab failed (ZeroDivisionError: division by zero).")

    job.start(lambda a, b: a + b, 2, 3)  # nothing was lost: the next job runs as ever
    qtbot.waitUntil(lambda: seen.ended(3), timeout=WAIT_MS)
    assert seen.events[4:] == [("returned", 5), ("finished", None)]


def test_a_cancel_stops_the_work_at_its_next_yield(qtbot, threaded):
    job, seen = threaded()
    gate = threading.Event()
    made, closed = [], []

    def endless():
        try:
            i = 0
            while True:
                made.append(i)
                yield i
                gate.wait(WAIT_MS / 1000)
                i += 1
        finally:
            closed.append(True)  # a generator cut off still runs its own clean-up

    job.start(endless)
    qtbot.waitUntil(lambda: seen.events == [("yielded", 0)], timeout=WAIT_MS)
    job.cancel()  # from the GUI thread, while the work is between yields
    gate.set()
    qtbot.waitUntil(seen.ended, timeout=WAIT_MS)
    assert seen.events == [("yielded", 0), ("yielded", 1), ("aborted", None), ("finished", None)]
    assert made == [0, 1] and closed == [True]


def test_a_job_queues_behind_the_one_running_and_a_cancel_meanwhile_stops_it_before_it_begins(qtbot, threaded):
    job, seen = threaded()
    gate = threading.Event()
    began = []

    def first() -> str:
        began.append("first")
        gate.wait(WAIT_MS / 1000)
        return "first done"

    def second() -> str:
        began.append("second")
        return "second done"

    job.start(first)
    qtbot.waitUntil(lambda: began == ["first"], timeout=WAIT_MS)
    job.start(second)  # queued behind the first on the job's one thread, never beside it
    qtbot.wait(100)
    assert began == ["first"]
    job.cancel()
    gate.set()
    qtbot.waitUntil(lambda: seen.ended(2), timeout=WAIT_MS)
    assert began == ["first"]  # the first had no yield to stop at; the second never began
    assert seen.events == [("returned", "first done"), ("finished", None), ("aborted", None), ("finished", None)]


def test_progress_from_a_callback_is_reported_and_a_cancel_stops_the_work_there(qtbot, threaded):
    job, seen = threaded()
    gate = threading.Event()

    def download(progress) -> str:
        progress(0, 100, "downloading target.gguf")
        gate.wait(WAIT_MS / 1000)
        try:
            progress(50, 100, "downloading target.gguf")
        except Cancelled as exc:  # the hub wraps what the callback raised in an error of its own
            raise ModelNotAvailable(f"The hub failed ({type(exc).__name__}).") from exc
        return "never"

    job.start(download, job.progress)
    qtbot.waitUntil(lambda: bool(seen.events), timeout=WAIT_MS)
    job.cancel()
    gate.set()
    qtbot.waitUntil(seen.ended, timeout=WAIT_MS)
    assert seen.events == [
        ("yielded", ProgressReport(0, 100, "downloading target.gguf")),
        ("aborted", None),  # a failure after a cancel is the cancel's doing
        ("finished", None),
    ]


def test_progress_is_throttled_but_keeps_each_labels_first_report_and_the_last(qtbot, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(jobs, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    job = Job("The test job failed")  # run here, on the GUI thread: its signals arrive at once
    seen = Seen(job)

    def work(progress) -> None:
        for done, seconds, label in [
            (0, 0.0, "checking a.gguf"),
            (10, 0.05, "checking a.gguf"),  # too soon: dropped
            (20, 0.11, "checking a.gguf"),
            (30, 0.01, "checking b.gguf"),  # a new label: kept
            (40, 0.01, "checking b.gguf"),  # too soon: dropped
            (100, 0.01, "checking b.gguf"),  # the last: kept
        ]:
            clock[0] += seconds
            progress(done, 100, label)

    job.run(work, job.progress)
    assert [value for name, value in seen.events if name == "yielded"] == [
        ProgressReport(0, 100, "checking a.gguf"),
        ProgressReport(20, 100, "checking a.gguf"),
        ProgressReport(30, 100, "checking b.gguf"),
        ProgressReport(100, 100, "checking b.gguf"),
    ]


def test_a_job_that_stops_itself_is_never_cut_off_and_has_the_last_word(qtbot, threaded):
    job, seen = threaded(stops_itself=True)
    gate = threading.Event()

    def reply(cancelled):
        for i in range(10):
            yield i
            gate.wait(WAIT_MS / 1000)
            if cancelled():
                return f"stopped after {i + 1} rounds"  # a stopped reply ends with its stats
        return "all 10 rounds"

    job.start(reply, job.cancelled)
    qtbot.waitUntil(lambda: seen.events == [("yielded", 0)], timeout=WAIT_MS)
    job.cancel()
    gate.set()
    qtbot.waitUntil(seen.ended, timeout=WAIT_MS)
    assert seen.events == [("yielded", 0), ("returned", "stopped after 1 rounds"), ("finished", None)]


def test_the_engines_cancelled_is_an_abort_not_a_failure(qtbot):
    job = Job("The engine failed", stops_itself=True)
    seen = Seen(job)

    def render():
        raise Cancelled("Stopped before the reply began.")
        yield  # a generator

    job.run(render)
    assert seen.events == [("aborted", None), ("finished", None)]
