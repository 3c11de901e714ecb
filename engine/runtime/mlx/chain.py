"""Greedy drafts on MLX chosen on the device, as lazy chains: each step's argmax feeds the next.

The step-by-step draft (ModelDrafter.draft) evaluates every step and copies its row to the host to
choose the next token there: one host sync a step. Here step i+1's graph takes step i's argmax as it
stands, unevaluated, and mx.async_eval starts each step while the host builds the next. Nothing is
waited for: the target's verify takes the draft's ids in as they stand and its one wait brings back
its own rows and the draft's tokens and rows together (MlxContext.decode_unread), one host sync a
round, as mlx-lm's own speculative loop runs. The same tokens come out: the argmax over the same
logits with the same ban. A draft model's chain is `launch_chain`; the drafters that draft for
themselves (MTP heads, EAGLE-3, DFlash, DSpark, Gemma 4's assistant) choose their tokens with
`pick` and hand them over as `UnreadIds`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, cast

import mlx.core as mx
import numpy as np

from engine.runtime.mlx import audit
from engine.runtime.mlx.hostrows import UnreadRows

MlxContext = Any  # engine.runtime.mlx.context.MlxContext, which imports this module: no import back

_masks: dict[tuple[int, tuple[int, ...]], mx.array] = {}  # (vocab, banned) -> the additive ban


def ban_row(n_vocab: int, banned: tuple[int, ...]) -> mx.array | None:
    """A row to add to logits: -inf at the banned ids (kept: the ban is the same all reply long)."""
    if not banned:
        return None
    key = (n_vocab, banned)
    if key not in _masks:
        mask = mx.zeros((n_vocab,), dtype=mx.float32)
        mask[mx.array(banned)] = -mx.inf
        _masks[key] = mask
    return _masks[key]


def pick(logits: mx.array, ban: mx.array | None) -> tuple[mx.array, mx.array]:
    """A greedy step on the device: the row (float32, the ban written in) and its argmax, launched
    (mx.async_eval) and not waited for."""
    row = logits.astype(mx.float32)
    if ban is not None:
        row = row + ban
    token = mx.argmax(row, axis=-1)
    mx.async_eval(token)  # computes while the next step's graph is built
    return row, token


def parts_on_device() -> bool:
    """Whether a draft's softmax parts are taken on the device: on a GPU, as its argmax is
    (MlxOptions.argmax_on_device); on MLX's CPU backend numpy's pass over the shared row is cheaper."""
    return mx.default_device() == mx.gpu


def can_chain(ctx: MlxContext) -> bool:
    """Whether a draft may run as a chain here: nothing watches the batches (a drafter reading the
    model's hidden states sees each one) and the cache trims (no recurrent state to snapshot)."""
    return not ctx.has_state and not ctx.observers.listening


class UnreadIds:
    """A greedy draft launched and not waited for (a DeviceDraft): its ids and rows still on the device.
    `caught_up` tells the drafter the ids once they are read, for the entries its cache took them in."""

    def __init__(self, ids: mx.array, rows: mx.array, caught_up: Callable[[list[int]], None]) -> None:
        """`ids` [n] and `rows` [n, vocab] (float32), as the device will compute them. On a GPU each
        row's softmax parts (its largest logit and sum(exp(row - largest))) are taken there too, in
        the same wait (`parts`): the host then never passes over a draft's row for a probability."""
        self.n, self.ids, self.rows = int(ids.shape[0]), ids.astype(mx.uint32), rows
        self.parts: mx.array | None = None  # [n, 2], where the device takes them
        if parts_on_device():
            largest = mx.max(rows, axis=-1, keepdims=True)
            self.parts = mx.concatenate([largest, mx.sum(mx.exp(rows - largest), axis=-1, keepdims=True)], axis=-1)
        self.row_parts: list[tuple[float, float]] | None = None  # `parts` once read
        mx.async_eval(*self.arrays())
        self._caught_up = caught_up
        self._read: tuple[list[int], np.ndarray] | None = None

    def arrays(self) -> list[mx.array]:
        """What a wait for the draft takes in: its ids, rows and, where taken, their parts."""
        return [self.ids, self.rows] if self.parts is None else [self.ids, self.rows, self.parts]

    def read(self, waited: bool = False) -> tuple[list[int], np.ndarray]:
        """The ids and rows (float32, the ban written in, over the evaluated rows' own memory); a wait
        for them unless `waited` says the device has them already (the verify's wait took them)."""
        if self._read is None:
            if not waited:
                audit.wait(*self.arrays())
            drafted = [int(t) for t in cast(list[int], self.ids.tolist())]
            if self.parts is not None:
                self.row_parts = [(top, total) for top, total in cast(list[list[float]], self.parts.tolist())]
            # On a GPU the parts answer a greedy draft's own probabilities: its rows stay there until read.
            rows = np.asarray(self.rows) if self.parts is None else cast(np.ndarray, UnreadRows(self.rows))
            self._read = drafted, rows
            self._caught_up(drafted)
        return self._read


def launch_chain(ctx: MlxContext, tokens: list[int], k: int, banned: tuple[int, ...]) -> UnreadIds:
    """Decode `tokens`, then k - 1 steps each on the last one's argmax, every step launched
    (mx.async_eval) and none waited for: the k greedy tokens and their rows, still on the device.
    The cache holds `tokens` and the first k - 1 once it runs; the context's `tokens` catch up
    when the chain is read."""
    cache = ctx._open_cache()
    if ctx.n_past + len(tokens) + k - 1 > ctx.n_ctx:
        raise ValueError("the draft runs past the context")
    t0 = time.perf_counter()
    ban = ban_row(ctx.model.n_vocab, banned)
    y = mx.array(tokens, dtype=mx.uint32)[None]
    rows, chosen = [], []
    for _ in range(k):
        row, token = pick(ctx.observers.forward(y, cache, last=True)[0, -1], ban)
        rows.append(row)
        chosen.append(token)
        y = token.astype(mx.uint32).reshape(1, 1)
    fed = list(tokens)

    def caught_up(drafted: list[int]) -> None:
        ctx.tokens.extend(fed + drafted[:-1])
        ctx.launched = None

    launched = UnreadIds(mx.stack(chosen), mx.stack(rows), caught_up)
    ctx.decode_s += time.perf_counter() - t0
    ctx.launched = launched
    return launched
