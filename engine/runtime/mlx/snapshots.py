"""Recurrent-state snapshots for an MLX prompt cache: how a hybrid model's verify batch is undone.

A hybrid model's cache (mlx_lm.models.cache) mixes layers that can drop a suffix (KVCache: an
attention layer's keys and values, trimmed) with layers that hold one state for the whole
history (ArraysCache: a gated delta-net's or a state-space layer's convolution window and
recurrent state; a RotatingKVCache once its window has wrapped). MLX arrays are immutable, so
keeping such a layer's state at a position is keeping references to its arrays: a snapshot
costs nothing to take. Every decode takes one before its batch; a rewind to a position inside
that batch puts the snapshot's states back, trims the attention layers to the snapshot's
position, and decodes the kept tokens of the batch again, as one batch.

Why replay and not per-step states: the recurrence of each kind of layer runs inside its own
model file (gated_delta_update, a Mamba block's ssm_step, an RG-LRU...), which hands back the
final state alone, and the convolution window at a position needs the layer's projected inputs,
which no cache sees. Getting per-position states means patching each architecture's code; the
replay works for every layer mlx-lm keeps in an ArraysCache, and its rows are the model's own.
Its cost is one pass over the kept tokens (`engine.measure`'s rollback_s counts it for Auto).

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


@dataclass
class Snapshot:
    """The states of a cache's snapshot layers before a batch, at `position`."""

    position: int
    states: list[Any | None]  # per layer, None where the layer trims


class StateSnapshots:
    """The latest snapshot of one prompt cache's recurrent layers, and the rewind it allows."""

    def __init__(self) -> None:
        self.latest: Snapshot | None = None

    def keep(self, cache: list[Any], position: int) -> None:
        """Keep each recurrent layer's state as it is before a batch decoded at `position`."""
        states = [None if _trims(c) else tree_map(_fresh, c.state) for c in _layers(cache)]
        self.latest = Snapshot(position, states)

    def restore(self, cache: list[Any], n_past: int, keep: int) -> int | None:
        """Put the cache back to the snapshot's position, if it lies at `keep` or before; the
        position it is back at (the tokens from there to `keep` are to be decoded again), or None
        where the snapshot is past `keep` or missing."""
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
