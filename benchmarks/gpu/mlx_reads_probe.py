"""How long the host takes to read small results a GPU just wrote: three arrays read one by one, or one packed.

On MLX's CUDA build, in the kit's site (benchmarks/gpu/mlx_cuda_run.sh's setup):
    PYTHONPATH=/tmp/mlxsite python3 benchmarks/gpu/mlx_reads_probe.py
"""

import statistics
import time

import mlx.core as mx

V = 151936
w = mx.random.normal((1536, V)).astype(mx.bfloat16)
h = mx.random.normal((1, 1536)).astype(mx.bfloat16)
ban = mx.zeros((V,))
mx.eval(w, h, ban)


def rows():
    out = (h @ w).astype(mx.float32) + ban
    top = mx.argmax(out, axis=-1)
    largest = mx.max(out, axis=-1, keepdims=True)
    norm = mx.sum(mx.exp(out - largest), axis=-1)
    return out, top, largest, norm


res = {k: [] for k in ("three reads", "one packed read", "one read (argmax only)", "eval only")}
for i in range(400):
    out, top, largest, norm = rows()
    packed = mx.concatenate([top.astype(mx.float32)[:, None], largest, norm[:, None]], axis=-1)
    mx.eval(out, top, largest, norm, packed)
    mode = list(res)[i % 4]
    t = time.perf_counter()
    if mode == "three reads":
        a, b, c = top.tolist(), largest.tolist(), norm.tolist()
    elif mode == "one packed read":
        p = packed.tolist()
    elif mode == "one read (argmax only)":
        a = top.tolist()
    res[mode].append(time.perf_counter() - t)
for k, v in res.items():
    print(
        f"{k:24} median {1e6 * statistics.median(v[10:]):7.1f} us  (p90 {1e6 * sorted(v[10:])[int(0.9 * len(v[10:]))]:.1f})"
    )
