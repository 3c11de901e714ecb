"""Work the engine does while an accelerator computes.

llama_decode returns once a GPU has the batch; the logits are waited for only when read.
Work queued here runs in that gap (after the launch, before the read): the probabilities the
events report, which greedy decoding itself never needs. On a CPU a decode finishes before
it returns, and the same work simply runs after it. Work that may wait is put off to a later
gap once the device is expected to be done: past that, the host would make the round wait.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

# On a GPU, a wait for logits longer than this means the device was still computing: the
# side work done before it was hidden under the decode. (On a CPU the decode has finished
# when it returns, and reading its logits alone takes tens of microseconds.)
DEVICE_BUSY_S = 50e-6
# The share of a decode's expected device time that side work which may wait is started in:
# the rest is the margin for the job under way when it runs out.
SIDE_WORK_SHARE = 0.75


class Job:
    """One piece of queued work; its result is computed once, in the gap or when first asked for."""

    def __init__(self, fn: Callable[[], Any], reads: object = None, may_wait: bool = False, last: bool = False) -> None:
        self._fn: Callable[[], Any] | None = fn
        self._value: Any = None
        self.reads = reads  # a context whose logits the job reads in place: it runs before that one decodes
        self.may_wait = may_wait  # may go to a later gap when this one is spent (SideWork.run's budget)
        # Waits for a device itself (a draft model's guess, which decodes once its last decode is
        # done): runs when the rest of its gap's work is done or put off, and is never put off: it
        # is dropped where its gap's decode is expected to be done by then.
        self.last = last

    def run(self) -> bool:
        """Do the work, unless it was done; whether it was done now."""
        if self._fn is None:
            return False
        fn, self._fn = self._fn, None
        self._value = fn()
        return True

    def result(self) -> Any:
        self.run()
        return self._value


class SideWork:
    """A queue of jobs that a context runs between launching a decode and reading its logits."""

    def __init__(self) -> None:
        self._jobs: deque[Job] = deque()
        # Time inside llama.cpp in the jobs' own decodes (a draft model's, Context.feed), which
        # their context counts: the decode whose gap ran them leaves it out of its own.
        self.llama_s = 0.0
        self.running = False  # inside run(): a job's own read of a decode runs no side work
        # Inside run(): when its gap's decode is expected done (perf_counter), or None for no limit.
        self.ends_at: float | None = None

    def add(self, fn: Callable[[], Any], reads: object = None, may_wait: bool = False, last: bool = False) -> Job:
        job = Job(fn, reads, may_wait, last)
        self._jobs.append(job)
        return job

    def run(self, budget_s: float | None = None) -> bool:
        """Run the queued jobs: first, in order, those that cannot wait (a draft model's decode to
        go out beside the verify, the copy it must not overwrite); then, in order, those that may,
        each started only within `budget_s` of the call (the time the device is expected to stay
        busy; None: no limit), the rest staying queued for a later gap; then those that wait for a
        device themselves (`last`), unless the device is expected to be done by then (the budget
        over SIDE_WORK_SHARE): then they are dropped, since they would keep the host waiting.
        Whether any job ran."""
        if not self._jobs:
            return False
        t0 = time.perf_counter()
        ran = spent = False
        self.running = True
        self.ends_at = None if budget_s is None else t0 + budget_s / SIDE_WORK_SHARE
        try:
            for job in sorted(self._jobs, key=lambda j: 2 * j.last + j.may_wait):  # stable: in order within each
                if job not in self._jobs:  # run meanwhile, by a decode's run_reading
                    continue
                if job.may_wait and (spent or (budget_s is not None and time.perf_counter() - t0 >= budget_s)):
                    spent = True  # what is left may wait
                    continue
                self._jobs.remove(job)
                if job.last and self.ends_at is not None and time.perf_counter() >= self.ends_at:
                    continue  # past the decode's expected end: dropped
                ran = job.run() or ran  # a job asked for early (Job.result) has nothing left to do
        finally:
            self.running = False
            self.ends_at = None
        return ran

    def run_reading(self, ctx: object) -> None:
        """Run the jobs that read `ctx`'s logits in place: it is about to decode over them."""
        if any(job.reads is ctx for job in self._jobs):
            for job in [j for j in self._jobs if j.reads is ctx]:
                self._jobs.remove(job)
                job.run()


class BusyTimes:
    """How long one context's device computes after a decode's launch, per batch size: a running
    mean of the decodes whose logits were waited for. Side work that may wait gets a share of it."""

    def __init__(self) -> None:
        self._s: dict[int, float] = {}

    def budget(self, rows: int) -> float | None:
        """The time side work that may wait is started in, in a decode of `rows`; None: not known yet."""
        seen = self._s.get(rows)
        return None if seen is None else SIDE_WORK_SHARE * seen

    def saw(self, rows: int, after_launch: float, waited: float) -> bool:
        """A decode of `rows` whose logits were in hand `after_launch` seconds after its launch, the
        last `waited` of them spent waiting for them. Whether the device was still busy when the
        wait began (then the side work before it cost nothing)."""
        if waited > DEVICE_BUSY_S:
            old = self._s.get(rows)
            self._s[rows] = after_launch if old is None else 0.75 * old + 0.25 * after_launch
            return True
        if rows in self._s:  # done before the side work was: it computed for less than that
            self._s[rows] = min(self._s[rows], after_launch - waited)
        return False
