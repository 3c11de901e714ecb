"""Work the engine does while an accelerator computes.

llama_decode returns once a GPU has the batch; the logits are waited for only when read.
Work queued here runs in that gap (after the launch, before the read): the probabilities the
events report, which greedy decoding itself never needs. On a CPU a decode finishes before
it returns, and the same work simply runs after it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any


class Job:
    """One piece of queued work; its result is computed once, in the gap or when first asked for."""

    def __init__(self, fn: Callable[[], Any], reads: object = None) -> None:
        self._fn: Callable[[], Any] | None = fn
        self._value: Any = None
        self.reads = reads  # a context whose logits the job reads in place: it runs before that one decodes

    def run(self) -> None:
        if self._fn is not None:
            fn, self._fn = self._fn, None
            self._value = fn()

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

    def add(self, fn: Callable[[], Any], reads: object = None) -> Job:
        job = Job(fn, reads)
        self._jobs.append(job)
        return job

    def run(self) -> bool:
        """Run every queued job; whether there was any."""
        ran = bool(self._jobs)
        while self._jobs:
            self._jobs.popleft().run()
        return ran

    def run_reading(self, ctx: object) -> None:
        """Run the jobs that read `ctx`'s logits in place: it is about to decode over them."""
        if any(job.reads is ctx for job in self._jobs):
            for job in [j for j in self._jobs if j.reads is ctx]:
                self._jobs.remove(job)
                job.run()
