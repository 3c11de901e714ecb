"""Attention for the compiled decode on MLX's CUDA build: a kernel that reads each row's last position.

The compiled decode (engine.runtime.mlx.compiled) attends over a layer's whole KV buffer and hides what
lies past each row's position (and before its window) behind a mask. MLX 0.32's CUDA vector kernel takes
no mask (and one row at most), so there the mask sends every layer's attention to a fallback of several
kernels over the whole buffer: the compiled step ran 0.82-0.94 of mlx-lm on an H100. This kernel takes
the bounds instead (row i sees slots `last + i - window + 1` to `last + i`, `last` an array, so one trace
serves every position) and reads only those slots: one block per head and row, eight warps over the
keys with an online softmax each, merged at the end (MLX's own one-pass vector kernel's scheme), float32
inside. Grouped queries read their group's keys. `reference` is the same attention in MLX's own
operations: what the kernel is checked against (benchmarks/gpu/mlx_attention_check.py) and what the
CPU's tests run in its place.

While a compiled decode is traced, `routed` hands MLX's `scaled_dot_product_attention` calls whose mask
is one a compiled slot made to `attend`, and every other call to MLX as before; the trace then replays
the kernel with no Python in between.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import mlx.core as mx

from engine.runtime.mlx.window import window_mask

# Row i of queries attends to slots last + i - window + 1 .. last + i: (queries, keys, values, scale, last,
# window) -> the attention's output, or None where it does not take these arrays (MLX's own then runs).
Attend = Callable[[mx.array, mx.array, mx.array, float, mx.array, int], "mx.array | None"]

SOURCE = r"""
    constexpr int WARPS = 8;
    constexpr int PER = D / 32;
    const int n = q_shape[2];
    const int H = q_shape[1];
    const int Hkv = k_shape[1];
    const int cap = k_shape[2];
    const int bid = blockIdx.x;
    const int h = bid / n;
    const int i = bid - h * n;
    const int hk = h / (H / Hkv);
    const int hi = min(last[0] + i, cap - 1);
    const int lo = max(0, last[0] + i - window[0] + 1);
    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    const float sc = scale[0];
    float qv[PER], acc[PER];
    const T* qh = q + ((size_t)h * n + i) * D + lane * PER;
    for (int p = 0; p < PER; ++p) { qv[p] = static_cast<float>(qh[p]) * sc; acc[p] = 0.f; }
    float m = -1e30f, l = 0.f;
    const T* kh = k + (size_t)hk * cap * D + lane * PER;
    const T* vh = v + (size_t)hk * cap * D + lane * PER;
    for (int j = lo + warp; j <= hi; j += WARPS) {
        float s = 0.f;
        for (int p = 0; p < PER; ++p) s += qv[p] * static_cast<float>(kh[(size_t)j * D + p]);
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
        const float mn = fmaxf(m, s);
        const float c = __expf(m - mn);
        const float e = __expf(s - mn);
        l = l * c + e;
        for (int p = 0; p < PER; ++p) acc[p] = acc[p] * c + e * static_cast<float>(vh[(size_t)j * D + p]);
        m = mn;
    }
    __shared__ float sm[WARPS];
    __shared__ float sl[WARPS];
    __shared__ float so[WARPS][D];
    if (lane == 0) { sm[warp] = m; sl[warp] = l; }
    for (int p = 0; p < PER; ++p) so[warp][lane * PER + p] = acc[p];
    __syncthreads();
    if (warp == 0) {
        float M = -1e30f;
        for (int w = 0; w < WARPS; ++w) M = fmaxf(M, sm[w]);
        float L = 0.f, o[PER];
        for (int p = 0; p < PER; ++p) o[p] = 0.f;
        for (int w = 0; w < WARPS; ++w) {
            const float c = sm[w] <= -1e29f ? 0.f : __expf(sm[w] - M);
            L += sl[w] * c;
            for (int p = 0; p < PER; ++p) o[p] += so[w][lane * PER + p] * c;
        }
        T* oh = out + ((size_t)h * n + i) * D + lane * PER;
        for (int p = 0; p < PER; ++p) oh[p] = static_cast<T>(o[p] / L);
    }
"""


def fits(queries: mx.array, keys: mx.array, values: mx.array) -> bool:
    """Whether the kernel takes these: one sequence, a head size of 32 to 512 in steps of 32 (the same for
    keys and values), whole query groups, one dtype."""
    b, heads, _, dim = queries.shape
    return (
        b == 1
        and dim % 32 == 0
        and 32 <= dim <= 512
        and keys.shape[-1] == dim == values.shape[-1]
        and heads % keys.shape[1] == 0
        and queries.dtype == keys.dtype == values.dtype
        and queries.dtype in (mx.float16, mx.bfloat16, mx.float32)
    )


@functools.cache
def _kernel() -> Any:
    return mx.fast.cuda_kernel(
        name="draftlight_attend_upto",
        input_names=["q", "k", "v", "last", "window", "scale"],
        output_names=["out"],
        source=SOURCE,
    )


def kernel(
    queries: mx.array, keys: mx.array, values: mx.array, scale: float, last: mx.array, window: int
) -> mx.array | None:
    """Row i of `queries` ([1, heads, n, dim]) attends to slots last + i - window + 1 .. last + i of `keys`
    and `values` ([1, kv heads, slots, dim]), on MLX's CUDA build; None where the kernel does not fit."""
    if not fits(queries, keys, values):
        return None
    _, heads, n, dim = queries.shape
    bounds = [last.reshape(1).astype(mx.int32), mx.array([window], dtype=mx.int32), mx.array([scale], mx.float32)]
    return _kernel()(
        inputs=[queries, keys, values, *bounds],
        template=[("T", queries.dtype), ("D", dim)],
        grid=(256 * heads * n, 1, 1),
        threadgroup=(256, 1, 1),
        output_shapes=[queries.shape],
        output_dtypes=[queries.dtype],
    )[0]


def reference(
    queries: mx.array, keys: mx.array, values: mx.array, scale: float, last: mx.array, window: int
) -> mx.array:
    """`kernel`'s attention in MLX's own operations (a bool mask of the same bounds)."""
    mask = window_mask(0, keys.shape[2], last, queries.shape[2], window)
    return mx.fast.scaled_dot_product_attention(queries, keys, values, scale=scale, mask=mask)


_ROUTING = threading.RLock()  # one trace routes at a time: each puts back the function it found


class Bounds:
    """The masks compiled slots made while a decode is traced, each with the bounds it stands for."""

    def __init__(self) -> None:
        self.made: dict[int, tuple[mx.array, mx.array, int]] = {}  # id(mask) -> (mask, last, window)

    def note(self, mask: mx.array, last: mx.array, window: int) -> mx.array:
        self.made[id(mask)] = (mask, last, window)
        return mask


@contextmanager
def routed(bounds: Bounds, attend: Attend) -> Iterator[None]:
    """For the duration, an attention call whose mask is one of `bounds` runs `attend`; any other runs MLX's
    own (the model's other masks, another thread's calls). Two contexts tracing at once (two replies on
    `draftlight serve`) take turns, so each puts back MLX's own function."""
    _ROUTING.acquire()
    own = mx.fast.scaled_dot_product_attention

    def attention(queries: mx.array, keys: mx.array, values: mx.array, *, scale: float, mask: Any = None,
                  **rest: Any) -> mx.array:  # fmt: skip
        noted = bounds.made.get(id(mask)) if isinstance(mask, mx.array) else None
        if noted is not None and noted[0] is mask and rest.get("sinks") is None:
            out = attend(queries, keys, values, scale, noted[1], noted[2])
            if out is not None:
                return out
        return own(queries, keys, values, scale=scale, mask=mask, **rest)

    mx.fast.scaled_dot_product_attention = attention  # type: ignore[assignment]
    try:
        yield
    finally:
        mx.fast.scaled_dot_product_attention = own
        bounds.made.clear()
        _ROUTING.release()
