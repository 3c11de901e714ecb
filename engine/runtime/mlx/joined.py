"""Each layer's query, key and value projections, and its gate and up projections, as one matmul each.

A decode's cost on a GPU at a small model's shapes is mostly the host's: MLX records each kernel (on
MLX's CUDA build into a CUDA graph, on Metal into a command buffer) one by one, so a step costs about
what its kernel count does. A llama-style layer runs its q, k and v projections as three matmuls of
the same input and its gate and up projections as two; joined, they are one each: three kernels fewer
a layer. On an H100 with MLX's CUDA build, at the default pair's shapes, that took our loop from
0.99-1.06 of mlx-lm's at depths 0-2 to 1.18-1.29, and 1.12-1.26 at depths 3-4 to 1.37-1.50
(docs/benchmarks/mlx_cuda.md).

`join(module)` concatenates each group's weights (and biases, scales, quantization biases) once, at
load, and makes each projection's own weights slices of the joined ones, so the model holds the same
bytes as before and runs as mlx-lm's code wherever it is called plainly: mlx-lm's own loops on the
same module (the ruler's arms) run exactly what they always ran. Inside `joining()` (our contexts'
decodes, engine.runtime.mlx.hidden) each projection hands back its slice of the group's one matmul of
that input instead. Each output element is the same dot product over the same input either way; on
MLX's CPU backend the logits come out equal to the bit (tests/engine/runtime/test_mlx_joined.py, random
weights and SmolLM2's real ones); on a GPU a wider matmul may take another kernel and sum in another
order, so a near-tie can go either way there, as between any two kernels.

The joined weights are the model's from then on: a model's weights are not changed after load
(nothing in the engine does), and one that changed a projection's weights would leave the joined
copy as it was.

Only the model families whose code is read to call the group's projections on one input, in order,
every layer, are joined (FAMILIES); a layer whose projections differ in type, input size or
quantization is left as it is.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import mlx.core as mx
import mlx.nn as nn

# mlx-lm's model files whose attention calls q_proj(x), k_proj(x), v_proj(x) and whose MLP calls
# gate_proj(x) then up_proj(x), on one x, in every layer (mistral and the models mlx-lm maps to
# llama run llama's code).
FAMILIES = frozenset({"mlx_lm.models.llama", "mlx_lm.models.qwen2", "mlx_lm.models.qwen3", "mlx_lm.models.gemma3_text"})
GROUPS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))

_JOINING: ContextVar[bool] = ContextVar("draftlight_joining", default=False)


@contextmanager
def joining(on: bool = True) -> Iterator[None]:
    """Joined projections run as one matmul inside (our decodes), as the model's own code outside."""
    token = _JOINING.set(on)
    try:
        yield
    finally:
        _JOINING.reset(token)


def joining_now() -> bool:
    """Whether joined projections run as one matmul here (a compiled trace's key)."""
    return _JOINING.get()


class _Group:
    """One group's joined matmul, and its latest input's output cut into the group's parts."""

    def __init__(self, layer: nn.Module, cuts: list[int]) -> None:
        self.layer, self.cuts = layer, cuts
        self._held: tuple[mx.array, list[mx.array]] | None = None

    def part(self, i: int, x: mx.array) -> mx.array:
        """Projection i of `x`: the group's matmul runs once for an input, its parts handed out in turn.
        The last part lets the output go (a prompt chunk's is megabytes a layer)."""
        held = self._held
        if held is None or held[0] is not x:
            y = self.layer(x)
            held = (x, [y[..., a:b] for a, b in zip(self.cuts, self.cuts[1:], strict=False)])
            self._held = held
        if i == len(self.cuts) - 2 and self._held is held:
            self._held = None
        return held[1][i]


class _Projection:
    """A projection of a joined group: its slice of the group's matmul inside `joining()`, the layer
    itself (its weights slices of the group's) anywhere else; the layer's attributes read through."""

    def __init__(self, own: nn.Module, group: _Group, i: int) -> None:
        self._own, self._group, self._i = own, group, i

    def __call__(self, x: mx.array) -> mx.array:
        return self._group.part(self._i, x) if _JOINING.get() else self._own(x)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._own, name)


def _joinable(layers: list[Any]) -> bool:
    """Whether a group's layers can be one matmul: all plain (or all quantized alike) Linears of one
    input size, with the same arrays in the same dtypes."""
    first = layers[0]
    if type(first) not in (nn.Linear, nn.QuantizedLinear) or any(type(m) is not type(first) for m in layers):
        return False
    keys = sorted(first.keys())
    if "weight" not in keys or any(sorted(m.keys()) != keys for m in layers):
        return False
    for key in keys:
        if any(not isinstance(m[key], mx.array) or m[key].dtype != first[key].dtype for m in layers):
            return False
        if any(m[key].shape[1:] != first[key].shape[1:] for m in layers):  # one input size
            return False
    settings = ("group_size", "bits", "mode")
    return all(getattr(m, s, None) == getattr(first, s, None) for m in layers for s in settings)


def _join(owner: nn.Module, names: tuple[str, ...]) -> bool:
    if any(n not in owner for n in names):
        return False
    layers: list[nn.Module] = [owner[n] for n in names]
    if not _joinable(layers):
        return False
    rows = [int(m["weight"].shape[0]) for m in layers]
    cuts = [sum(rows[:i]) for i in range(len(rows) + 1)]
    joined = copy.copy(layers[0])  # the same class and settings; its arrays are replaced below
    for key in list(layers[0]):
        joined[key] = mx.concatenate([m[key] for m in layers], axis=0)
    for m, a, b in zip(layers, cuts, cuts[1:], strict=False):
        for key in list(m.keys()):
            m[key] = joined[key][a:b]  # a slice of the joined rows: no second copy of the weights
    mx.eval(joined.parameters(), [m.parameters() for m in layers])  # the separate arrays are let go
    group = _Group(joined, cuts)
    for i, (name, m) in enumerate(zip(names, layers, strict=True)):
        object.__setattr__(owner, name, _Projection(m, group, i))
    return True


def join(module: nn.Module) -> int:
    """Join the projection groups of every attention and MLP block of a model of FAMILIES; how many
    groups were joined (0 for any other model)."""
    joined = 0
    for _, block in module.named_modules():
        if type(block).__module__ not in FAMILIES:
            continue
        for names in GROUPS:
            if all(n in block for n in names) and all(n not in block.__dict__ for n in names):
                joined += _join(block, names)
    if joined:
        mx.clear_cache()  # the separate arrays' buffers, which MLX would otherwise keep for reuse
    return joined
