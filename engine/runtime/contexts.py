"""What works over any context: the shared prefix of two token lists."""

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
