"""Drafters: whatever proposes the tokens the target then verifies.

A drafter is one small protocol: draft up to k tokens after the committed history, and
forget positions when the round rewinds. A draft model and an n-gram table implement it.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from engine.runtime import Context, Model, RuntimeOptions
from engine.sampling import Sampler


@dataclass
class Draft:
    """Proposed tokens with what the drafter knew when it proposed them."""

    tokens: list[int] = field(default_factory=list)
    # The drafter's logits row at each position (copies), or None for a drafter with no
    # distribution. Probabilities are computed from them only when something asks.
    rows: np.ndarray | None = None
    sampler: Sampler | None = None
    _dists: dict[int, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.tokens)

    def distribution(self, i: int) -> np.ndarray | None:
        """The drafter's distribution at position i (what its token was drawn from)."""
        if self.rows is None or self.sampler is None:
            return None
        dist = self._dists.get(i)
        if dist is None:
            dist = self.sampler.distribution(self.rows[i])
            self._dists[i] = dist
        return dist

    def prob(self, i: int, token: int) -> float | None:
        """The drafter's probability of `token` at position i."""
        if self.rows is None or self.sampler is None:
            return None
        if i in self._dists or not self.sampler.greedy:
            return float(self.distribution(i)[token])
        row = self.rows[i]
        top = row.max()
        return math.exp(float(row[token] - top)) / float(np.exp(row - top).sum())


class Drafter(Protocol):
    """What the round needs from a drafter."""

    name: str
    has_distribution: bool

    def prefill(self, history: list[int]) -> None:
        """Make the cache hold every committed token but the last, reusing what matches."""

    def draft(
        self, history: list[int], k: int, sampler: Sampler, p_min: float = 0.0, banned: tuple[int, ...] = ()
    ) -> Draft:
        """Propose up to k tokens to follow history (every committed token), never a banned one."""

    def rewind(self, keep: int) -> None:
        """Forget positions from `keep` on."""

    def reset(self) -> None:
        """Forget everything (a new conversation)."""


class ModelDrafter:
    """A small model of the target's family proposes tokens one at a time."""

    has_distribution = True

    def __init__(self, model: Model, options: RuntimeOptions | None = None, max_depth: int = 8) -> None:
        self.model = model
        self.name = model.name
        self.ctx = Context(model, options, max_rows=1)
        self.max_depth = max_depth
        self._rows = np.empty((max_depth, model.n_vocab), dtype=np.float32)

    def prefill(self, history: list[int]) -> None:
        self.ctx.sync(history[:-1])

    def draft(
        self, history: list[int], k: int, sampler: Sampler, p_min: float = 0.0, banned: tuple[int, ...] = ()
    ) -> Draft:
        k = min(k, self.max_depth, self.ctx.n_ctx - len(history))
        if k <= 0:
            return Draft()
        ctx = self.ctx
        # The cache holds a prefix of history (the round rewound it); feed the rest, the
        # last committed token at least.
        if ctx.n_past >= len(history):
            ctx.rewind(len(history) - 1)
        logits = ctx.decode(history[ctx.n_past :], all_logits=False)
        rows = self._rows
        tokens: list[int] = []
        for i in range(k):
            row = rows[i]
            np.copyto(row, logits[-1])
            if banned:
                row[list(banned)] = -np.inf
            token = int(row.argmax()) if sampler.greedy else sampler.draw(sampler.distribution(row))
            if p_min > 0.0 and _top_prob(row) < p_min:
                break
            tokens.append(token)
            if i + 1 < k:
                logits = ctx.decode([token], all_logits=False)
        return Draft(tokens, rows[: len(tokens)], sampler)

    def rewind(self, keep: int) -> None:
        self.ctx.rewind(keep)

    def reset(self) -> None:
        self.ctx.clear()

    def close(self) -> None:
        self.ctx.close()


def _top_prob(row: np.ndarray) -> float:
    return 1.0 / float(np.exp(row - row.max()).sum())


class NgramDrafter:
    """Prompt lookup: no model; continue the longest recent n-gram match.

    The last n tokens of the history are looked up earlier in prompt + output; the tokens
    that followed their most recent earlier occurrence are proposed, longest n first. It
    drafts for free, so it pays wherever text repeats (code edits, quoting the prompt).
    An index of every n-gram's latest position grows with the history, so a round costs a
    few dictionary look-ups however long the conversation.
    """

    has_distribution = False
    name = "n-gram"

    def __init__(self, max_ngram: int = 4, min_ngram: int = 1) -> None:
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self.reset()

    def prefill(self, history: list[int]) -> None:
        if self._indexed > len(history) or self._seen[: self._indexed] != history[: self._indexed]:
            self.reset()

    def draft(
        self, history: list[int], k: int, sampler: Sampler, p_min: float = 0.0, banned: tuple[int, ...] = ()
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

    def rewind(self, keep: int) -> None:
        # Rounds only rewind drafts the index never saw; an edited history rebuilds it.
        if keep < self._indexed:
            self.reset()

    def reset(self) -> None:
        self._latest: dict[tuple[int, ...], int] = {}
        self._indexed = 0
        self._seen: list[int] = []


def lookup(history: list[int], k: int, max_ngram: int = 4, min_ngram: int = 1) -> list[int]:
    """The k tokens that followed the latest earlier match of history's last n-gram.

    The plain scan the index must agree with; tests compare the two.
    """
    n_hist = len(history)
    for n in range(min(max_ngram, n_hist - 1), min_ngram - 1, -1):
        tail = history[n_hist - n :]
        for start in range(n_hist - n - 1, -1, -1):
            if history[start : start + n] == tail:
                return history[start + n : start + n + k]
    return []
