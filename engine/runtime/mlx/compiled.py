"""A model's short decodes compiled (mx.compile), positions held as arrays, as MTPLX runs its verify.

A decode step of a small model is hundreds of operations, and where the device runs them in
milliseconds (a Mac's GPU, a small model anywhere) the host building them (the model's Python, a
graph node each) and encoding their kernels takes about as long as the device running them. A
compiled step is traced once: later calls replay the graph, and MLX fuses its elementwise runs
(the MLP's gate, the residual adds) into single kernels. A trace is reused only for inputs of the
same shapes, and mlx-lm's KVCache hands each layer a slice as long as the positions filled, a new
shape every token. So the step here takes each attention layer's whole buffer, writes the batch
at the position held as an array (mx.slice_update) and masks what lies past it: one trace serves
every position of a buffer's size. Buffers grow by doubling where the step needs room, so a reply
meets a trace per buffer size and batch length (a handful), not one per token; a buffer never
grows past the context's positions. A recurrent layer (an ArraysCache: a gated delta-net's window
and state) keeps arrays of one shape: they go in and come out as they are. A decode whose layers a
drafter reads (engine.runtime.mlx.hidden) is compiled with them as outputs, a trace set for each
set of layers read.

Where it runs is MlxOptions.compiled_decode's to say: everywhere by default. MLX's CPU backend and
Metal attend behind the mask with MLX's own attention; MLX's CUDA build, whose vector kernel takes no
mask, through engine.runtime.mlx.cuda_attention's kernel, which reads each row's bounds (`attend`: the
traced step's attention calls with a mask a slot made go there). mlx-lm's
plain KVCache and ArraysCache layers take part, and sliding windows (engine.runtime.mlx.window's
WindowCache: the position of its first slot goes in as an array too, each row masked to its
window); a model with any other cache (quantized keys, mlx-lm's own ring) decodes as it always did,
as does a hybrid's batch whose per-step states are being recorded (engine.runtime.mlx.stepstates: its
verify on the CPU). A model whose code will not trace with an array for its position (a Python branch
on it) is found at its first compiled call, which then runs uncompiled, as do all its later calls.
Long batches (a prompt's chunks) are never compiled: a trace for each length would cost more than it
saves. A trace costs about one uncompiled step (20-30 ms for a 28-layer qwen2 on this CPU); the first of a process or machine also
compiles its fused kernels (0.85 s there, once: MLX keeps the CPU's on disk).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.cache import ArraysCache, KVCache

from engine.runtime.mlx.cuda_attention import Attend, Bounds, routed
from engine.runtime.mlx.joined import joining_now
from engine.runtime.mlx.stepstates import recording
from engine.runtime.mlx.window import WindowCache, window_mask

# The longest batch compiled: a verify of a deep draft; a prompt's chunks run as the model's own code.
LONGEST = 16
SMALLEST_BUFFER = 256  # mlx-lm's KVCache.step: the size its own first decode gives a buffer
Body = Callable[[mx.array, list[Any]], tuple[mx.array, ...]]  # what a compiled decode runs on its cache


class _Slot:
    """One attention layer's cache inside the traced step: its whole buffers and the batch's first
    position (an array). A sliding window's (a WindowCache's) also has the position of its first slot
    (`start`, an array) and its window's size."""

    def __init__(
        self,
        keys: mx.array,
        values: mx.array,
        offset: mx.array,
        start: mx.array | None = None,
        window: int = 0,
        bounds: Bounds | None = None,
    ) -> None:
        self.keys, self.values, self.offset, self.start, self.window = keys, values, offset, start, window
        self.bounds = bounds  # where the step attends by bounds, not a mask (engine.runtime.mlx.cuda_attention)

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        at = self.offset if self.start is None else self.offset - self.start
        self.keys = mx.slice_update(self.keys, keys, at, axes=(2,))
        self.values = mx.slice_update(self.values, values, at, axes=(2,))
        return self.keys, self.values

    def make_mask(self, n: int, return_array: bool = False, window_size: int | None = None) -> mx.array:
        """Each of the batch's rows sees the buffer up to its own position, nothing past it; a sliding
        window's row nothing before its window either."""
        if self.start is None:
            if window_size is not None:  # a window asked of a plain KVCache: its model runs as it is
                raise ValueError("a window over a KVCache is not compiled")
            mask = mx.arange(self.keys.shape[2])[None] <= self.offset + mx.arange(n)[:, None]
            return mask if self.bounds is None else self.bounds.note(mask, self.offset, 1 << 30)
        window = min(window_size or self.window, self.window)
        mask = window_mask(self.start, self.keys.shape[2], self.offset, n, window)
        return mask if self.bounds is None else self.bounds.note(mask, self.offset - self.start, window)


def _room(cache: KVCache, n: int, longest: int) -> None:
    """Grow `cache`'s buffers, doubling, until `n` more positions fit; never past `longest` positions
    (the context's), where they fit in that."""
    size = cache.keys.shape[2]
    wanted = cache.offset + n
    if wanted <= size:
        return
    grown = max(size, SMALLEST_BUFFER)
    while grown < wanted:
        grown *= 2
    grown = max(wanted, min(grown, longest))
    pad = [(0, 0), (0, 0), (0, grown - size), (0, 0)]
    cache.keys, cache.values = mx.pad(cache.keys, pad), mx.pad(cache.values, pad)


def _plain_state(c: Any) -> bool:
    """A recurrent layer's cache as a lone sequence leaves it: every array there, no padding, no lengths."""
    return (
        type(c) is ArraysCache and c.left_padding is None and c.lengths is None and all(a is not None for a in c.cache)
    )


class CompiledForward:
    """A model's decode of a short batch, compiled; `__call__` answers None where it does not apply
    (the caller then runs the model itself). `run` compiles another body over the same cache (a decode
    that keeps its hidden states and tapped layers: engine.runtime.mlx.hidden), one trace set a `key`."""

    def __init__(
        self, module: nn.Module, enabled: bool = True, longest: int = 1 << 20, attend: Attend | None = None
    ) -> None:
        """`enabled` False: never compiled (MlxOptions.compiled_decode); `longest`: the context's
        positions, which a buffer grown here never passes; `attend`: the attention the traced step runs in
        place of a masked one (engine.runtime.mlx.cuda_attention's kernel on MLX's CUDA build), None for
        MLX's own behind the mask."""
        self._module, self._longest = module, longest
        self.attend = attend
        self._bounds = Bounds()
        self.enabled = enabled  # turned off for good by a model whose code will not trace
        self._steps: dict[Hashable, Callable[..., Any]] = {}
        # What each layer hands the traced step: 0 a KVCache's keys and values, -w a sliding window's (w
        # its size; the position of its first slot goes in `starts`), n > 0 a recurrent layer's n arrays.
        self._layout: tuple[int, ...] = ()
        self.calls = 0  # decodes that ran compiled
        self.lengths: Counter[int] = Counter()  # and how many of each batch length

    def _slots(self, offset: mx.array, starts: mx.array, arrays: tuple[mx.array, ...]) -> list[Any]:
        """The traced step's cache: each layer's arrays as the model's code reads and writes them."""
        slots: list[Any] = []
        at = windows = 0
        bounds = None if self.attend is None else self._bounds
        for size in self._layout:
            if size == 0:
                slots.append(_Slot(arrays[at], arrays[at + 1], offset, bounds=bounds))
                at += 2
            elif size < 0:
                slots.append(_Slot(arrays[at], arrays[at + 1], offset, starts[windows], -size, bounds))
                at += 2
                windows += 1
            else:
                state = ArraysCache(size)
                state.cache = list(arrays[at : at + size])
                slots.append(state)
                at += size
        return slots

    def _step(self, key: Hashable, body: Body) -> Callable[..., Any]:
        key = (key, self._layout, joining_now())  # a trace reads the layout and projections it was traced with
        step = self._steps.get(key)
        if step is None:

            def traced(inputs: mx.array, offset: mx.array, starts: mx.array, *arrays: mx.array) -> tuple[mx.array, ...]:
                if self.attend is None:
                    slots = self._slots(offset, starts, arrays)
                    return (*body(inputs, slots), *_arrays(slots))
                with routed(self._bounds, self.attend):
                    slots = self._slots(offset, starts, arrays)
                    return (*body(inputs, slots), *_arrays(slots))

            step = self._steps[key] = mx.compile(traced)
        return step

    def applies(self, inputs: mx.array, cache: list[Any]) -> bool:
        """Whether a decode of `inputs` ([1, n]) on `cache` runs compiled: a short batch after the first
        (the buffers exist), every attention layer a KVCache or a WindowCache at one position, every
        recurrent one a plain ArraysCache, and no per-step states being recorded."""
        return self._plan(inputs, cache) is not None

    def _plan(self, inputs: mx.array, cache: list[Any]) -> tuple[int, tuple[int, ...]] | None:
        """Where `applies`: the batch's first position and the layout, in one pass over the layers; else
        None."""
        if not self.enabled or inputs.shape[1] > LONGEST or not cache:
            return None
        offset, layout, states = -1, [], False
        for c in cache:
            if (type(c) is KVCache or type(c) is WindowCache) and c.keys is not None:
                if offset not in (-1, c.offset):
                    return None
                offset = c.offset
                layout.append(0 if type(c) is KVCache else -c.max_size)
            elif _plain_state(c):
                states = True
                layout.append(len(c.cache))
            else:
                return None
        # The recording is the process's: a model without recurrent layers adds nothing to it.
        if states and recording():
            return None
        return max(offset, 0), tuple(layout)

    def __call__(self, inputs: mx.array, cache: list[Any]) -> mx.array | None:
        """The logits of `inputs` ([1, n]) decoded on `cache`, which then holds them; None where this
        model or batch is not compiled (`cache` untouched)."""
        out = self.run(inputs, cache, self._logits, "logits")
        return None if out is None else out[0]

    def _logits(self, inputs: mx.array, slots: list[Any]) -> tuple[mx.array]:
        return (self._module(inputs, cache=slots),)

    def run(self, inputs: mx.array, cache: list[Any], body: Body, key: Hashable) -> tuple[mx.array, ...] | None:
        """`body(inputs, cache)`'s arrays, compiled (one trace set a `key`, which names what the body
        does), `cache` then holding the batch; None where it does not apply (`cache` untouched)."""
        plan = self._plan(inputs, cache)
        if plan is None:
            return None
        offset, self._layout = plan
        n = int(inputs.shape[1])
        starts = []
        for c, size in zip(cache, self._layout, strict=True):
            if size == 0:
                _room(c, n, self._longest)
            elif size < 0:
                c.room(n)
                starts.append(c.start)
        arrays = _arrays(cache)
        position = mx.array(offset, dtype=mx.int32)
        try:
            out = self._step(key, body)(inputs, position, mx.array(starts, dtype=mx.int32), *arrays)
        except Exception:  # its code branches on the position, or more: it runs as it always did
            self.enabled = False
            return None
        at = len(out) - len(arrays)
        results = tuple(out[:at])
        for c in cache:
            if isinstance(c, (KVCache, WindowCache)):
                c.keys, c.values = out[at], out[at + 1]
                c.offset += n
                at += 2
            else:
                c.cache = list(out[at : at + len(c.cache)])
                at += len(c.cache)
        self.calls += 1
        self.lengths[n] += 1
        return results


def _arrays(cache: list[Any]) -> list[mx.array]:
    """Every layer's arrays in order: a KV layer's keys and values, a recurrent layer's state arrays."""
    out: list[mx.array] = []
    for c in cache:
        out.extend((c.keys, c.values) if isinstance(c, (KVCache, WindowCache, _Slot)) else c.cache)
    return out
