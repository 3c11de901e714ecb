"""What works over any context: the shared prefix of two token lists, the device's greedy choices."""

from __future__ import annotations


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


def device_choices(argmax: list[int] | None, banned: tuple[int, ...]) -> list[int | None] | None:
    """A decode's greedy token per row as the device took them (`argmax`; None where it took none):
    None for a row whose token is banned, which the caller scans with the ban (RuntimeContext.device_choices)."""
    if argmax is None:
        return None
    if not banned or all(t not in banned for t in argmax):
        return list[int | None](argmax)  # a list of its own: invariance keeps list[int] out
    return [None if t in banned else t for t in argmax]
