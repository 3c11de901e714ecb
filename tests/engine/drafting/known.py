"""What a known-by-construction pair must do: token ids and acceptance per position, from its tables alone.

The target writes F[x] after x. `drafts(before, last, k)` is the drafter's rule: the tokens
it drafts in a round whose committed text ends ..., before, last (at most k of them).
"""

from __future__ import annotations

from collections.abc import Callable

Drafts = Callable[[int, int, int], list[int]]


def predicted(F: list[int], drafts: Drafts, prompt: list[int], depth: int, n_tokens: int):
    """(token ids, drafted per position, accepted per position) of a greedy reply after `prompt`."""
    generated, drafted, accepted = [F[prompt[-1]]], [0] * depth, [0] * depth  # the first token: the prompt's pass
    while len(generated) < n_tokens:
        before, last = (prompt + generated)[-2:]
        k = min(depth, n_tokens - len(generated) - 1)
        proposed = drafts(before, last, k)[:k]
        kept, prev = 0, last
        while kept < len(proposed) and proposed[kept] == F[prev]:
            prev, kept = proposed[kept], kept + 1
        for i in range(len(proposed)):
            drafted[i] += 1
        for i in range(kept):
            accepted[i] += 1
        generated += [*proposed[:kept], F[prev]]
    used = max((i + 1 for i in range(depth) if drafted[i]), default=0)
    return generated, drafted[:used], accepted[:used]


def chain(*tables: list[int]) -> Drafts:
    """Drafts that follow tables from the last token: t0[last], t1[t0[last]], ... (one table repeats)."""

    def drafts(before: int, last: int, k: int) -> list[int]:
        out, y = [], last
        for i in range(k):
            y = tables[min(i, len(tables) - 1)][y]
            out.append(y)
        return out

    return drafts
