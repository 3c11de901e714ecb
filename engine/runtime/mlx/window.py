"""A sliding window's keys and values, kept in position order so that a rejected draft can be taken back.

mlx-lm keeps a sliding-window layer (Gemma 3 and 4, gpt-oss, Ministral, Cohere 2, OLMo 3 and the rest
that make a RotatingKVCache) in a ring once the window is full: a one-row decode writes over the oldest
slot. A ring cannot drop its newest positions (mlx-lm's is_trimmable says so once the window has
filled), so past the window a rejected draft could not be undone: a reply longer than the window stopped
with "could trim 0 of 3 positions". WindowCache holds the positions in order instead, the window's and
`spare` more, the most a rewind takes back (a verify's rows, a draft chain's steps), so trimming is
dropping the newest, as a KVCache's is; the mask hides what lies outside each row's window. Every `step`
positions or so it drops the oldest it no longer needs (one copy of the window). Within the first window
it holds what mlx-lm's cache holds, slot for slot: the same rows. Past it, a row attends to the same
positions as mlx-lm's ring, in position order rather than the ring's.

Its room is planned from its own numbers (`plan`), so the mask a model makes before its layers write
(create_attention_mask) and the buffers they then write agree, and the compiled decode
(engine.runtime.mlx.compiled) makes the same room before it runs. A rewind longer than the spare (a
follow-up that shares only part of a conversation) cannot be a trim: `droppable` says so and the
context decodes the kept tokens again.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import RotatingKVCache

SPARE = 16  # the positions past a window kept for a rewind, at least: the longest verify compiled
STEP = 64  # the free slots a buffer has after dropping its oldest positions: a copy every STEP tokens or so
FIRST = 256  # a buffer's first size, then doubling until it holds the window (mlx-lm's KVCache.step)


class WindowCache(RotatingKVCache):
    """One sliding-window layer's keys and values, positions `start` to `offset` at slots 0 on."""

    def __init__(self, max_size: int, spare: int = SPARE) -> None:
        super().__init__(max_size, keep=0)
        self.keys: Any = None  # [B, heads, size, dim] once written
        self.values: Any = None
        self.offset: int = 0
        self.start = 0  # the position of slot 0
        self.spare = spare

    @property
    def ceiling(self) -> int:
        """The buffer's size once the window is full: the window, the spare and STEP free slots."""
        return self.max_size + self.spare + STEP

    def plan(self, n: int) -> tuple[int, int]:
        """For `n` more positions: how many of the oldest are dropped and the buffer's size then."""
        held = self.offset - self.start
        size = 0 if self.keys is None else self.keys.shape[2]
        if held + n <= size:
            return 0, size
        if held + n <= self.ceiling:  # still filling: doubling, as a KVCache does
            grown = max(size, FIRST)
            while grown < held + n:
                grown *= 2
            return 0, min(grown, self.ceiling)
        drop = max(0, held - (self.max_size - 1 + self.spare))  # the batch's rows still see a window each
        return drop, max(self.ceiling, held - drop + n)

    def room(self, n: int, keys: mx.array | None = None, values: mx.array | None = None) -> None:
        """Make room for `n` more positions; the first time, buffers shaped as `keys` and `values` ([B,
        heads, n, dim] each: a value's size may differ from a key's)."""
        drop, size = self.plan(n)
        if self.keys is not None and drop == 0 and size == self.keys.shape[2]:
            return
        if self.keys is None:
            assert keys is not None and values is not None  # the first write brings them
            self.keys = mx.zeros((*keys.shape[:2], size, keys.shape[3]), keys.dtype)
            self.values = mx.zeros((*values.shape[:2], size, values.shape[3]), values.dtype)
            return
        held = self.offset - self.start
        kept = held - drop

        def moved(v: mx.array) -> mx.array:
            pad = mx.zeros((*v.shape[:2], size - kept, v.shape[3]), v.dtype)
            return mx.concatenate([v[..., drop:held, :], pad], axis=2)

        self.keys, self.values = moved(self.keys), moved(self.values)
        self.start += drop

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        n = keys.shape[2]
        self.room(n, keys, values)
        at = self.offset - self.start
        self.keys[..., at : at + n, :] = keys
        self.values[..., at : at + n, :] = values
        self.offset += n
        return self.keys[..., : at + n, :], self.values[..., : at + n, :]

    def window(self, window_size: int | None) -> int:
        """The positions a row sees, itself among them: the model's window where it names one, never more
        than the cache's."""
        return min(window_size or self.max_size, self.max_size)

    def make_mask(self, N: int, window_size: int | None = None, return_array: bool = False) -> Any:
        """The mask for `N` rows written next: "causal" (or None for one row) while no row sees past its
        window, else each row's window as booleans."""
        window = self.window(window_size)
        drop, _ = self.plan(N)
        start = self.start + drop
        seen = self.offset + N - start
        if seen <= window and not return_array:
            return "causal" if N > 1 else None
        return window_mask(start, seen, self.offset, N, window)

    def _temporal_order(self, v: mx.array) -> mx.array:
        return v[..., : self.offset - self.start, :]

    def keys_and_values(self) -> tuple[mx.array, mx.array]:
        return self._temporal_order(self.keys), self._temporal_order(self.values)

    def trimmable(self) -> int:
        """How many of the newest positions can be dropped: all while the window has not moved, else all
        but the window's last row's sight (max_size - 1 positions before the next)."""
        held = self.offset - self.start
        return self.offset if self.start == 0 else max(0, held - (self.max_size - 1))

    def is_trimmable(self) -> bool:
        return True

    def trim(self, n: int) -> int:
        n = min(n, self.trimmable())
        self.offset -= n
        return n

    @property
    def state(self) -> tuple[Any, ...]:
        return self.keys, self.values, self.offset, self.start

    @state.setter
    def state(self, v: tuple[Any, ...]) -> None:
        self.keys, self.values, self.offset, self.start = v


def window_mask(first: Any, slots: int, last: Any, n: int, window: int) -> mx.array:
    """Which of `slots` buffer slots ([n, slots] booleans) each of `n` rows sees: slot j holds position
    first + j, row i is position last + i and sees its own position and the window - 1 before it.
    `first` and `last` may be ints or arrays (a compiled step's positions)."""
    rows = last + mx.arange(n)[:, None]
    positions = first + mx.arange(slots)[None]
    return (positions <= rows) & (positions > rows - window)


def windowed(cache: list[Any], spare: int) -> list[Any]:
    """mlx-lm's prompt cache with each sliding window (a RotatingKVCache that keeps no first positions)
    a WindowCache, `spare` positions past its window kept for a rewind."""
    return [
        WindowCache(c.max_size, max(spare, SPARE)) if type(c) is RotatingKVCache and c.keep == 0 else c for c in cache
    ]


def droppable(cache: list[Any], n: int) -> bool:
    """Whether every layer can drop its newest `n` positions (a window, only as many as it keeps spare)."""
    return all(c.trimmable() >= n for c in cache if isinstance(c, WindowCache))
