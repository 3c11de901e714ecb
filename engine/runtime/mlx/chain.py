"""A draft model's greedy steps on MLX as one lazy chain: each step's argmax on the device feeds the next.

The step-by-step draft (ModelDrafter.draft) evaluates every step and copies its row to the host to
choose the next token there: one host sync a step. Here step i+1's graph takes step i's argmax as it
stands, unevaluated, and mx.async_eval starts each step while the host builds the next; the rows and
tokens come back together at the end, one sync a draft, as mlx-lm's own speculative loop drafts.
The same tokens come out: the argmax over the same logits with the same ban.
"""

from __future__ import annotations

import time
from typing import Any

import mlx.core as mx
import numpy as np

from engine.runtime.mlx import audit

MlxContext = Any  # engine.runtime.mlx.context.MlxContext, which imports this module: no import back

_masks: dict[tuple[int, tuple[int, ...]], mx.array] = {}  # (vocab, banned) -> the additive ban


def _ban(n_vocab: int, banned: tuple[int, ...]) -> mx.array | None:
    """A row to add to logits: -inf at the banned ids (kept: the ban is the same all reply long)."""
    if not banned:
        return None
    key = (n_vocab, banned)
    if key not in _masks:
        mask = mx.zeros((n_vocab,), dtype=mx.float32)
        mask[mx.array(banned)] = -mx.inf
        _masks[key] = mask
    return _masks[key]


def can_chain(ctx: MlxContext) -> bool:
    """Whether a draft may run as a chain here: nothing watches the batches (a drafter reading the
    model's hidden states sees each one) and the cache trims (no recurrent state to snapshot)."""
    return not ctx.has_state and not ctx.observers.listening


def greedy_chain(ctx: MlxContext, tokens: list[int], k: int, banned: tuple[int, ...]) -> tuple[list[int], np.ndarray]:
    """Decode `tokens`, then k - 1 steps each on the last one's argmax: the k greedy tokens and
    their rows (float32, banned ids at -inf). The cache ends holding `tokens` and the first k - 1."""
    cache = ctx._open_cache()
    if ctx.n_past + len(tokens) + k - 1 > ctx.n_ctx:
        raise ValueError("the draft runs past the context")
    t0 = time.perf_counter()
    ban = _ban(ctx.model.n_vocab, banned)
    y = mx.array(tokens, dtype=mx.uint32)[None]
    rows, chosen = [], []
    for _ in range(k):
        logits = ctx.observers.forward(y, cache)[0, -1]
        if ban is not None:
            logits = logits + ban
        token = mx.argmax(logits, axis=-1)
        mx.async_eval(token)  # computes while the next step's graph is built
        rows.append(logits)
        chosen.append(token)
        y = token.astype(mx.uint32).reshape(1, 1)
    stacked, picked = mx.stack(rows), mx.stack(chosen)
    audit.wait(stacked, picked)
    host = np.array(stacked.astype(mx.float32), copy=True)
    drafted = [int(t) for t in picked.tolist()]
    ctx.decode_s += time.perf_counter() - t0
    ctx.tokens.extend(tokens + drafted[:-1])
    return drafted, host
