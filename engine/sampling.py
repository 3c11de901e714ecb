"""Turning a row of logits into a token, and into the probabilities the events report.

Greedy decoding needs only an argmax; the probabilities it reports are the model's own
softmax at temperature 1. Sampling applies temperature, top-k and top-p, and every
probability it reports is of that transformed distribution: the one the rejection rule
uses.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SamplingConfig:
    temperature: float = 0.0  # 0: greedy
    top_k: int = 0  # 0: off
    top_p: float = 1.0  # 1: off
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


class Sampler:
    """Distributions and choices for one run, with its own random generator."""

    def __init__(self, config: SamplingConfig, n_vocab: int) -> None:
        self.config = config
        self.greedy = config.greedy
        self.rng = np.random.default_rng(config.seed)
        self.n_vocab = n_vocab

    def distribution(self, row: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """The probabilities a token is drawn from, as a new array (or into `out`)."""
        cfg = self.config
        scale = 1.0 if self.greedy else 1.0 / cfg.temperature
        probs = np.multiply(row, np.float32(scale), out=out)
        k = cfg.top_k if 0 < cfg.top_k < self.n_vocab else 0
        if not self.greedy and k:
            cutoff = np.partition(probs, -k)[-k]
            probs[probs < cutoff] = -np.inf
        probs -= probs.max()
        np.exp(probs, out=probs)
        probs /= probs.sum()
        if not self.greedy and cfg.top_p < 1.0:
            _apply_top_p(probs, cfg.top_p)
        return probs

    def choose(self, row: np.ndarray, probs: np.ndarray | None) -> int:
        """The next token: the argmax when greedy, else a draw from `probs`."""
        if self.greedy:
            return int(row.argmax())
        if probs is None:
            raise ValueError("a draw needs the row's probabilities: pass probs unless sampling is greedy")
        return self.draw(probs)

    def draw(self, probs: np.ndarray) -> int:
        cdf = np.cumsum(probs, dtype=np.float64)
        index = int(np.searchsorted(cdf, self.rng.random() * cdf[-1], side="right"))
        index = min(index, len(probs) - 1)
        while probs[index] == 0 and index > 0:  # a draw at a boundary lands on a zero
            index -= 1
        return index

    def uniform(self) -> float:
        return float(self.rng.random())


def _apply_top_p(probs: np.ndarray, top_p: float) -> None:
    """Keep the smallest set of most likely tokens whose mass reaches top_p."""
    n = min(len(probs), 2048)
    candidates = np.argpartition(probs, -n)[-n:]
    order = candidates[np.argsort(probs[candidates])[::-1]]
    mass = np.cumsum(probs[order], dtype=np.float64)
    if mass[-1] < top_p:  # the mass is spread thin: sort everything
        order = np.argsort(probs)[::-1]
        mass = np.cumsum(probs[order], dtype=np.float64)
    keep = int(np.searchsorted(mass, top_p, side="left")) + 1
    mask = np.zeros(len(probs), dtype=bool)
    mask[order[:keep]] = True
    probs[~mask] = 0.0
    probs /= probs.sum()


def residual(p: np.ndarray, q: np.ndarray | None, rejected: int) -> np.ndarray:
    """The distribution to draw from after a rejection: normalised max(0, p - q).

    A drafter without a distribution proposed its token with certainty, so q is one-hot.
    """
    if q is None:
        out = p.copy()
        out[rejected] = 0.0
    else:
        out = np.maximum(p - q, 0.0)
    total = out.sum()
    if total <= 0.0:  # p == q to the last bit: any draw from p is exact
        return p
    out /= total
    return out


def top_candidates(probs: np.ndarray, n: int) -> list[tuple[int, float]]:
    """The n most likely tokens with their probabilities, most likely first."""
    idx = np.argpartition(probs, -n)[-n:]
    idx = idx[np.argsort(probs[idx])[::-1]]
    return [(int(i), float(probs[i])) for i in idx]


_scratch = threading.local()  # one row-sized buffer per thread: no 600 KB allocation per softmax


def softmax_parts(row: np.ndarray) -> tuple[float, float]:
    """The row's largest logit and its softmax's normaliser, sum(exp(row - largest)): the whole
    cost of a probability; any token's is then exp(row[token] - largest) / normaliser."""
    top = row.max()
    buf = getattr(_scratch, "row", None)
    if buf is None or buf.shape != row.shape or buf.dtype != row.dtype:
        buf = _scratch.row = np.empty_like(row)
    np.subtract(row, top, out=buf)
    return float(top), float(np.exp(buf, out=buf).sum())


def parts_from_top(
    row: np.ndarray, top: int, normaliser: float, banned: tuple[int, ...] = ()
) -> tuple[float, float] | None:
    """softmax_parts of `row` from its argmax `top` and the normaliser there, sum(exp(row -
    row[top])) (the device's, of the row as it came), with `banned` tokens then given no
    probability: their terms taken out. None where that is no number of at least 1 (the top's own
    term), a NaN in the row for one."""
    largest = float(row[top])
    for b in banned:  # a few end-of-turn ids: a loop costs less than numpy's fancy indexing
        normaliser -= math.exp(float(row[b]) - largest)
    return (largest, normaliser) if normaliser >= 1.0 else None


def softmax_at(row: np.ndarray, token: int, parts: tuple[float, float] | None = None) -> float:
    """p(token) under the row's softmax at temperature 1."""
    top, total = parts or softmax_parts(row)
    return math.exp(float(row[token]) - top) / total
