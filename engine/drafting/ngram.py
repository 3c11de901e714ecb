"""Prompt lookup: the n-gram drafter, no model at all."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from engine.depth import MAX_DEPTH
from engine.drafting import kindnames
from engine.drafting.base import Draft, OwnPace, VerifyBatch
from engine.runtime.side import SideWork
from engine.sampling import Sampler


class NgramDrafter(OwnPace):
    """Prompt lookup: no model; continue the longest recent n-gram match.

    The last n tokens of the history are looked up earlier in prompt + output; the tokens
    that followed their most recent earlier occurrence are proposed, longest n first. It
    drafts for free, so it pays wherever text repeats (code edits, quoting the prompt).
    An index of every n-gram's latest position grows with the history, so a round costs a
    few dictionary look-ups however long the conversation.
    """

    kind = kindnames.NGRAM
    name = "n-gram"
    has_distribution = False
    needs_hidden_states = False
    max_depth = MAX_DEPTH
    ctx = None  # it decodes nothing

    def __init__(self, max_ngram: int = 4, min_ngram: int = 1) -> None:
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self._latest: dict[tuple[int, ...], int] = {}
        self._indexed = 0
        self._seen: list[int] = []

    def prefill(self, history: list[int]) -> None:
        if self._indexed > len(history) or self._seen[: self._indexed] != history[: self._indexed]:
            self.reset()

    def draft(
        self,
        history: list[int],
        k: int,
        sampler: Sampler,
        p_min: float = 0.0,
        banned: tuple[int, ...] = (),
        side: SideWork | None = None,
    ) -> Draft:
        if k <= 0:
            return Draft()
        self._extend(history)
        n_hist = len(history)
        for n in range(min(self.max_ngram, n_hist - 1), self.min_ngram - 1, -1):
            start = self._latest.get(tuple(history[n_hist - n :]))
            if start is not None:
                follow = history[start + n : start + n + k]
                if banned:  # stop before a banned token: the target could never accept it
                    follow = list(itertools.takewhile(lambda t: t not in banned, follow))
                return Draft(follow)
        return Draft()

    def _extend(self, history: list[int]) -> None:
        # An n-gram is indexed once a token follows it, so the tail never matches itself.
        latest = self._latest
        for end in range(self._indexed + 1, len(history)):
            for n in range(self.min_ngram, self.max_ngram + 1):
                if end - n >= 0:
                    latest[tuple(history[end - n : end])] = end - n
        self._indexed = max(self._indexed, len(history) - 1)
        self._seen = history

    def verified(self, batch: VerifyBatch) -> None:
        """Nothing to learn: the index grows from the history at the next draft."""

    def rewind(self, keep: int) -> None:
        # Rounds only rewind drafts the index never saw; an edited history rebuilds it.
        if keep < self._indexed:
            self.reset()

    def reset(self) -> None:
        self._latest = {}
        self._indexed = 0
        self._seen = []

    def close(self) -> None:
        """Nothing to free."""


@dataclass(frozen=True)
class NgramMatch:
    """Where prompt lookup found its drafts: history's last n tokens (`ngram`) seen before at `start`."""

    start: int
    ngram: tuple[int, ...]
    follow: tuple[int, ...]  # the up to k tokens that followed them there


def match(history: list[int], k: int, max_ngram: int = 4, min_ngram: int = 1) -> NgramMatch | None:
    """The latest earlier match of history's longest last n-gram that has one, and the k tokens after it.

    The plain scan the drafter's index must agree with; tests compare the two.
    """
    n_hist = len(history)
    for n in range(min(max_ngram, n_hist - 1), min_ngram - 1, -1):
        tail = history[n_hist - n :]
        for start in range(n_hist - n - 1, -1, -1):
            if history[start : start + n] == tail:
                return NgramMatch(start, tuple(tail), tuple(history[start + n : start + n + k]))
    return None


def lookup(history: list[int], k: int, max_ngram: int = 4, min_ngram: int = 1) -> list[int]:
    """The k tokens that followed the latest earlier match of history's last n-gram (engine.drafting.ngram.match)."""
    found = match(history, k, max_ngram, min_ngram)
    return list(found.follow) if found else []
