"""Hidden states out of an MLX decode, for drafters that read the target (MTP heads, EAGLE-3, DFlash).

mlx-lm's model classes hand back logits alone. Most are `lm_head(model(tokens))`, `model` being the
decoder stack with its final norm, so a decode that wants hidden states runs that stack itself,
keeps its output (the last layer's, normed: what an MTP head reads) and applies the head (and the
model's final softcap, Gemma 2's and 4's, where it has one). A layer
a drafter asks for (EAGLE-3's and DFlash's chosen layers) is tapped: its instance's class becomes
a subclass that records what the layer returns, so the model's own loop, masks and caches are
untouched and its parameters keep their names. Layer i's tap holds the output of layer i, as
mlx-vlm's `capture_layer_ids` does.

`BatchTaps` is what an MlxContext keeps: its observers (RuntimeContext.observe_batches), told
every batch it decodes as llama.cpp's are (engine.runtime.llama.observers).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from engine.errors import RuntimeFailure
from engine.runtime.mlx import audit
from engine.runtime.mlx.compiled import CompiledForward
from engine.runtime.mlx.cuda_attention import Attend
from engine.runtime.mlx.joined import joining
from engine.runtime.protocol import BatchObserver

# A model's logits against lm_head(model(x)) on one token, relative to their size: the same
# computation comes out equal; a model whose logits do more (Gemma 2's softcap, a scale) does not.
SAME_LOGITS = 1e-6
_TAPPED: dict[type, type] = {}  # a layer class -> its recording subclass
_RECORDING: dict[int, tuple[BatchTaps, int]] = {}  # id(layer) -> whose tap it is, and the layer's index


def _tapped(cls: type) -> type:
    """`cls` with a __call__ that hands the layer's output to the BatchTaps recording it."""
    sub = _TAPPED.get(cls)
    if sub is None:

        def __call__(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
            out = cls.__call__(self, *args, **kwargs)
            owner = _RECORDING.get(id(self))
            if owner is not None and owner[0].recording:  # a Gemma 4 layer returns (output, its memory, offset)
                owner[0].layer_out[owner[1]] = out[0] if isinstance(out, tuple) else out
            return out

        sub = _TAPPED[cls] = type(cls.__name__, (cls,), {"__call__": __call__, "__module__": cls.__module__})
    return sub


class Parts:
    """A loaded mlx-lm model's parts a hidden-state decode runs: the decoder stack and the head."""

    def __init__(self, module: nn.Module, name: str) -> None:
        lm = module.language_model if "language_model" in module else module
        inner = lm.model if "model" in lm else None
        if inner is None or "layers" not in inner:
            raise RuntimeFailure(
                f"the MLX runtime cannot find {name}'s decoder layers, so it cannot hand its hidden states "
                "to a drafter: choose a draft model or n-grams."
            )
        self.module, self.lm, self.inner, self.name = module, lm, inner, name
        head: Callable[[mx.array], mx.array] = lm.lm_head if "lm_head" in lm else inner.embed_tokens.as_linear
        cap = getattr(lm, "final_logit_softcapping", None)
        self.head = head if not cap else lambda h: mx.tanh(head(h) / cap) * cap
        self.layers: list[nn.Module] = inner.layers
        self.width = int(inner.embed_tokens.weight.shape[-1])

    def check(self) -> None:
        """Refuse, in a sentence, a model whose logits are not lm_head(model(x)) (checked on one token)."""
        x = mx.array([[0]], dtype=mx.uint32)
        theirs = self.module(x)
        ours = self.head(self.inner(x))
        audit.wait(theirs, ours)
        size = max(1.0, float(mx.abs(theirs).max()))
        if theirs.shape != ours.shape or float(mx.abs(theirs - ours).max()) > SAME_LOGITS * size:
            raise RuntimeFailure(
                f"{self.name}'s logits are more than its head over its last layer, so the MLX runtime "
                "cannot hand its hidden states to a drafter: choose a draft model or n-grams."
            )


class BatchTaps:
    """One MLX context's observers, the layers they asked for, and the decode that feeds them."""

    def __init__(
        self,
        module: nn.Module,
        name: str,
        compiled: bool = True,
        longest: int = 1 << 20,
        attend: Attend | None = None,
    ) -> None:
        self._module, self._name = module, name
        self._parts: Parts | None = None
        self.entries: list[tuple[BatchObserver, bool]] = []  # and whether each wants hidden states
        self._paused = 0
        self._layers: dict[int, int] = {}  # a tapped layer -> how many asked for it
        self.recording = False
        self.layer_out: dict[int, mx.array] = {}  # the latest batch's tapped layers, [1, n, width] each
        self.hidden: mx.array | None = None  # the latest batch's last layer, normed, [1, n, width]
        self._waited = False  # the decode's own wait took the batch's arrays in (batch_arrays)
        self.compiled = CompiledForward(module, compiled, longest, attend)  # a short batch's decode
        self.joined = False  # its model's joined projections run as one matmul each (engine.runtime.mlx.joined)
        self.head_apart = False  # its model's head may run on a batch's last row alone (MlxModel.head_apart)

    @property
    def parts(self) -> Parts:
        if self._parts is None:
            parts = Parts(self._module, self._name)
            if not self.head_apart:  # else its model checked it before this context was made
                parts.check()
            self._parts = parts
        return self._parts

    @property
    def listening(self) -> bool:
        """Whether a decoded batch is to be handed on."""
        return bool(self.entries) and not self._paused

    def add(self, observer: BatchObserver, hidden_states: bool) -> Callable[[], None]:
        """Tell `observer` of every batch decoded from now on; returns the way to stop."""
        if hidden_states:
            _ = self.parts  # refuse a model it cannot read before anything is decoded
        entry = (observer, hidden_states)
        self.entries.append(entry)

        def stop() -> None:
            if entry in self.entries:
                self.entries.remove(entry)

        return stop

    def tap_layers(self, layers: list[int]) -> Callable[[], None]:
        """Record the output of each layer in `layers` (0-based) in every batch; returns the way to stop."""
        parts = self.parts
        n = len(parts.layers)
        if any(not 0 <= i < n for i in layers):
            raise RuntimeFailure(f"{self._name} has {n} layers, and a drafter asked for layers {sorted(layers)}.")
        for i in layers:
            layer = parts.layers[i]
            if self._layers.get(i, 0) == 0:
                layer.__class__ = _tapped(type(layer))
                _RECORDING[id(layer)] = (self, i)
            self._layers[i] = self._layers.get(i, 0) + 1
        asked = list(layers)

        def stop() -> None:
            for i in asked:
                self._layers[i] -= 1
                if self._layers[i] == 0:
                    layer = parts.layers[i]
                    _RECORDING.pop(id(layer), None)
                    layer.__class__ = type(layer).__mro__[1]
                    del self._layers[i]
            asked.clear()

        return stop

    @contextmanager
    def paused(self) -> Iterator[None]:
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    def forward(self, inputs: mx.array, cache: list[Any], last: bool = False) -> mx.array:
        """The model's logits for `inputs` ([1, n]), or with `last` at least the last row's ([1, 1]
        where the head can run apart: a prompt's chunk or a draft step of two tokens skips the
        head's matmul over rows nobody reads, as mlx-lm's prefill does); with observers, the
        batch's hidden states kept too."""
        last = last and int(inputs.shape[1]) > 1 and self.head_apart
        if not self.joined:  # a model with nothing joined (or a run asked without): its own code
            return self._forward(inputs, cache, last)
        with joining():
            return self._forward(inputs, cache, last)

    def _forward(self, inputs: mx.array, cache: list[Any], last: bool) -> mx.array:
        if not self.listening and not last:  # nothing reads the layers: the model's logits alone
            logits = self.compiled(inputs, cache)
            return self._module(inputs, cache=cache) if logits is None else logits
        parts = self.parts
        if not self.listening:  # the last row's logits alone

            def head_last(x: mx.array, slots: list[Any]) -> tuple[mx.array, ...]:
                return (parts.head(parts.inner(x, cache=slots)[:, -1:]),)

            out = self.compiled.run(inputs, cache, head_last, "last")
            return head_last(inputs, cache)[0] if out is None else out[0]
        layers = sorted(self._layers)
        rows = slice(-1, None) if last else slice(None)

        def body(x: mx.array, slots: list[Any]) -> tuple[mx.array, ...]:
            hidden, tapped = self._inner(parts, x, slots)
            return (parts.head(hidden[:, rows]), hidden, *(tapped[i] for i in layers))

        # Compiled too where it applies: one trace set for each set of tapped layers.
        out = self.compiled.run(inputs, cache, body, ("hidden", tuple(layers), last))
        if out is None:
            hidden, self.layer_out = self._inner(parts, inputs, cache)
            logits = parts.head(hidden[:, rows])
        else:
            logits, hidden, *tapped = out
            self.layer_out = dict(zip(layers, tapped, strict=True))
        self.hidden = hidden
        self._waited = False
        return logits

    def _inner(self, parts: Parts, inputs: mx.array, cache: list[Any]) -> tuple[mx.array, dict[int, mx.array]]:
        """The decoder stack's last layer (normed) for `inputs`, and what each tapped layer returned."""
        self.layer_out = {}
        self.recording = True
        try:
            hidden = parts.inner(inputs, cache=cache)
        finally:
            self.recording = False
        return hidden, self.layer_out

    def batch_arrays(self) -> list[mx.array]:
        """What the observers will read of the batch just run, for the decode's own wait to take in
        (`tell` then reads them without waiting again); the tapped layers' outputs as float32."""
        if not self.listening or self.hidden is None:
            return []
        self.layer_out = {i: out.astype(mx.float32) for i, out in self.layer_out.items()}
        self._waited = True
        return [self.hidden, *self.layer_out.values()]

    def tell(self, tokens: list[int], start: int) -> None:
        """Hand the batch just decoded to every observer, with its hidden states where asked."""
        if not self.listening or self.hidden is None:
            return
        if not self._waited:
            audit.wait(*self.batch_arrays())
        wanted = any(hidden for _, hidden in self.entries)
        rows = np.array(self.hidden[0].astype(mx.float32), copy=True) if wanted else None
        for observer, wants in list(self.entries):
            observer(tokens, start, rows if wants else None)
