"""Per-step states of a gated delta-net's verify batch: a hybrid's rewind without decoding again.

Qwen 3.5/3.6's and Qwen3-Next's linear-attention layers (mlx-lm's qwen3_5 GatedDeltaNet and
qwen3_next Qwen3NextGatedDeltaNet) keep two arrays: the convolution's window (the last
kernel - 1 projected inputs) and the gated delta rule's state. On MLX's CPU backend mlx-lm runs
the rule one step at a time (gated_delta_ops calling _gated_delta_step_ops), so the state after
every position of a batch is computed anyway and only the last is kept. Two hooks keep them
all while a context has armed a recording: _gated_delta_step_ops wrapped in mlx-lm's
gated_delta module, and each such layer's conv1d given a class that notes its input (the window
at position j is that input's rows j .. j + kernel - 2). Unarmed, both do exactly what they did.

A rewind to a position inside the batch then puts each layer's state at that position back and
trims the attention layers: the very arrays the batch computed, nothing decoded again. Where
the records do not fit the batch (a GPU, whose Metal kernel hands back the last state alone;
any other architecture) engine.runtime.mlx.snapshots decodes the kept tokens again instead.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models import gated_delta

# The recording a context armed before its latest batch: ("conv", layer, input) and ("step", state).
_recording: ContextVar[list[tuple] | None] = ContextVar("gated_delta_recording", default=None)
_original_step = gated_delta._gated_delta_step_ops


def recording() -> bool:
    """Whether a batch's per-step states are being recorded (a decode must then run the model's own code)."""
    return _recording.get() is not None


def _recording_step(*args: Any, **kwargs: Any) -> tuple[mx.array, mx.array]:
    y, state = _original_step(*args, **kwargs)
    record = _recording.get()
    if record is not None:
        record.append(("step", state))
    return y, state


class _NotedConv1d(nn.Conv1d):
    """An nn.Conv1d that notes its input into the armed recording."""

    def __call__(self, x: mx.array) -> mx.array:
        record = _recording.get()
        if record is not None:
            record.append(("conv", self, x))
        return super().__call__(x)


def _mixer_types() -> tuple[type[nn.Module], ...]:
    from mlx_lm.models import qwen3_5, qwen3_next

    return (qwen3_5.GatedDeltaNet, qwen3_next.Qwen3NextGatedDeltaNet)


def gated_delta_mixers(module: nn.Module, cache: list[Any]) -> list[nn.Module] | None:
    """Each recurrent cache layer's gated delta-net, in cache order, hooked; None where any
    recurrent layer is of another kind, or off the CPU (a Metal kernel keeps the last state alone)."""
    from mlx_lm.models.cache import ArraysCache, KVCache

    layers = getattr(module, "layers", None)
    if mx.default_device() != mx.cpu or layers is None or len(layers) != len(cache):
        return None
    mixers: list[nn.Module] = []
    for layer, c in zip(layers, cache, strict=True):
        if isinstance(c, ArraysCache):
            mixer = getattr(layer, "linear_attn", None)
            if not isinstance(mixer, _mixer_types()) or type(mixer.conv1d) not in (nn.Conv1d, _NotedConv1d):
                return None
            mixers.append(mixer)
        elif type(c) is not KVCache:
            return None
    if mixers:
        gated_delta._gated_delta_step_ops = _recording_step
    for mixer in mixers:
        mixer.conv1d.__class__ = _NotedConv1d
    return mixers


class StepStates:
    """The recording of one context's latest batch, and the states it gives at each position."""

    def __init__(self, mixers: list[nn.Module]) -> None:
        self.mixers = mixers
        self.record: list[tuple] = []
        self.position = -1
        self.rows = 0

    def arm(self, position: int, rows: int) -> None:
        """Record the batch of `rows` about to be decoded at `position` (nothing past `rows`)."""
        self.record = []
        self.position, self.rows = position, rows
        _recording.set(self.record if rows else None)

    def restore(self, cache: list[Any], n_past: int, keep: int) -> bool:
        """Put each layer back at `keep` from the latest batch's own states; False where the
        recording does not hold that batch whole (the caller decodes again)."""
        j = keep - self.position
        if not (0 < j < self.rows) or n_past != self.position + self.rows:
            return False
        layers = self._layers()
        if layers is None:
            return False
        from mlx_lm.models.cache import ArraysCache

        drop = n_past - keep
        recurrent = [c for c in cache if isinstance(c, ArraysCache)]
        for c in cache:
            if not isinstance(c, ArraysCache) and c.trim(drop) != drop:
                return False
        for c, (mixer, conv_input, states) in zip(recurrent, layers, strict=True):
            c[0] = mx.contiguous(conv_input[:, j : j + mixer.conv_kernel_size - 1, :])
            c[1] = states[j - 1]
        self.record = []
        return True

    def _layers(self) -> list[tuple[nn.Module, mx.array, list[mx.array]]] | None:
        """(mixer, its conv input, its state per step) for each layer, if the record is this batch's."""
        groups: list[tuple[nn.Module, mx.array, list[mx.array]]] = []
        for entry in self.record:
            if entry[0] == "conv":
                groups.append((entry[1], entry[2], []))
            elif groups:
                groups[-1][2].append(entry[1])
            else:
                return None
        if len(groups) != len(self.mixers):
            return None
        for (conv, conv_input, states), mixer in zip(groups, self.mixers, strict=True):
            if conv is not mixer.conv1d or len(states) != self.rows:
                return None
            if conv_input.shape[1] != self.rows + mixer.conv_kernel_size - 1:
                return None
        return [(mixer, x, states) for mixer, (_, x, states) in zip(self.mixers, groups, strict=True)]
