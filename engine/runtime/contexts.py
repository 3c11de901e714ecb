"""What works over any context: stopping several at once, and the shared prefix of two token lists."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager


@contextmanager
def stoppable(contexts: Iterable[object], cancelled: Callable[[], bool]) -> Iterator[None]:
    """Context.stoppable on each of `contexts` that is an open Context (the rest, e.g. None, skipped)."""
    with ExitStack() as stack:
        for ctx in contexts:
            if getattr(ctx, "ptr", None) and hasattr(ctx, "stoppable"):
                stack.enter_context(ctx.stoppable(cancelled))
        yield


def common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # the answer is in [lo, hi): halve on slice comparisons, which run in C
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo
