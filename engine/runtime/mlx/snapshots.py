"""Recurrent-state snapshots for an MLX prompt cache: how a hybrid model's verify batch is undone.

A hybrid model's cache (mlx_lm.models.cache) mixes layers that can drop a suffix (KVCache: an
attention layer's keys and values, trimmed) with layers that hold one state for the whole
history (ArraysCache: a gated delta-net's or a state-space layer's convolution window and
recurrent state; a RotatingKVCache once its window has wrapped). MLX arrays are immutable, so
keeping such a layer's state at a position is keeping references to its arrays: a snapshot
costs nothing to take. Every decode takes one before its batch; a rewind to a position inside
that batch puts the snapshot's states back, trims the attention layers to the snapshot's
position, and decodes the kept tokens of the batch again, as one batch.

Better still, where the states at every position of the batch can be had: a gated delta-net
(Qwen 3.5/3.6, Qwen3-Next) on MLX's CPU backend computes them step by step anyway, and
engine.runtime.mlx.stepstates keeps them, so a rewind puts the state at `keep` back and decodes
nothing. Measured on this CPU (benchmarks/mlx_rewind.py, a random-weight model of Qwen3.5-0.8B's
shape): decoding 1-4 kept tokens again costs 0.8-1.8 one-row decodes, the per-step states next
to nothing. Elsewhere (a Mamba block's ssm_step, an RG-LRU, a Metal kernel that hands back the
last state alone) the recurrence runs inside its model file, which hands back the final state
only, and the convolution window at a position needs inputs no cache sees: there the replay,
which works for every layer mlx-lm keeps in an ArraysCache and gives the model's own rows.
`engine.measure`'s rollback_s counts either cost for Auto.

A rewind further back than the snapshot (a follow-up sharing only part of a conversation)
starts the cache again and decodes the kept tokens from the first (the context counts these
in rewinds_replayed).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx.utils import tree_map
from mlx_lm.models.cache import ArraysCache, CacheList, RotatingKVCache

from engine.runtime.mlx.stepstates import StepStates, gated_delta_mixers

# Layers whose whole state a snapshot keeps: their state property is all there is to them.
SNAPSHOT_TYPES = (ArraysCache, RotatingKVCache)


def _layers(cache: list[Any]) -> list[Any]:
    """Each layer's own cache, a CacheList's parts one by one."""
    flat = []
    for c in cache:
        flat.extend(_layers(list(c.caches)) if isinstance(c, CacheList) else [c])
    return flat


def _trims(layer: Any) -> bool:
    """Whether the layer is undone by trimming (a KV cache); a RotatingKVCache is kept whole,
    since a batch that wraps its window cannot be trimmed back."""
    return not isinstance(layer, SNAPSHOT_TYPES) and layer.is_trimmable()


def unsupported_layers(cache: list[Any]) -> list[str]:
    """The kinds of layer cache that can neither trim nor be kept in a snapshot (none: it rewinds)."""
    return sorted({type(c).__name__ for c in _layers(cache) if not _trims(c) and not isinstance(c, SNAPSHOT_TYPES)})


def _fresh(x: Any) -> Any:
    # A new array object on the same data: the cache assigns into its own objects (a
    # RotatingKVCache's keys[..., i] = k rebinds the object), never into these.
    return copy.copy(x) if isinstance(x, mx.array) else x


def _kept(layer: Any) -> Any:
    """A layer's state as a snapshot keeps it: an ArraysCache's arrays one level deep (a list
    comprehension: tree_map's walk cost a plain step 2-3% of its time on a hybrid at depth 0, where
    every guessed step takes one), any other layer's through tree_map."""
    if type(layer) is ArraysCache:
        arrays, padding, lengths = layer.state
        return [_fresh(a) for a in arrays], _fresh(padding), _fresh(lengths)
    return tree_map(_fresh, layer.state)


@dataclass
class Snapshot:
    """The states of a cache's snapshot layers before a batch, at `position`."""

    position: int
    states: list[Any | None]  # per layer, None where the layer trims


class StateSnapshots:
    """The latest snapshot of one prompt cache's recurrent layers, and the rewind it allows."""

    def __init__(self, module: Any, cache: list[Any], max_rows: int) -> None:
        self.latest: Snapshot | None = None
        mixers = gated_delta_mixers(module, cache)
        self.steps = StepStates(mixers) if mixers else None
        self.max_rows = max_rows
        self.from_steps = 0  # rewinds done from the batch's own per-step states, nothing decoded again

    def keep(self, cache: list[Any], position: int, rows: int) -> None:
        """Keep each recurrent layer's state as it is before a batch of `rows` decoded at
        `position`; and, where the layers allow, their states at each of its positions."""
        states = [None if _trims(c) else _kept(c) for c in _layers(cache)]
        self.latest = Snapshot(position, states)
        if self.steps is not None:
            # A long prefill's steps are not kept, nor a lone row's: its rewind is to its start, the snapshot.
            self.steps.arm(position, rows if 1 < rows <= self.max_rows else 0)

    def restore(self, cache: list[Any], n_past: int, keep: int) -> int | None:
        """Put the cache back to the snapshot's position, if it lies at `keep` or before; the
        position it is back at (the tokens from there to `keep` are to be decoded again), or None
        where the snapshot is past `keep` or missing."""
        if self.steps is not None and self.steps.restore(cache, n_past, keep):
            self.from_steps += 1
            return keep
        snap = self.latest
        if snap is None or snap.position > keep or snap.position > n_past:
            return None
        drop = n_past - snap.position
        for layer, state in zip(_layers(cache), snap.states, strict=True):
            if state is None:
                if layer.trim(drop) != drop:
                    return None
            else:
                layer.state = tree_map(_fresh, state)  # fresh objects again: the snapshot stays usable
        return snap.position

    def forget(self) -> None:
        self.latest = None
        if self.steps is not None:
            self.steps.arm(-1, 0)
