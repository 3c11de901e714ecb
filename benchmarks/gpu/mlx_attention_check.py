"""The compiled decode's CUDA attention kernel against the same attention in MLX's own operations.

engine.runtime.mlx.cuda_attention.kernel (row i attends to slots last + i - window + 1 .. last + i) and
its `reference` (MLX's scaled_dot_product_attention behind a bool mask of those bounds, in float32 on
MLX's CPU backend: the GPU's float32 matmuls round as TF32, 1e-3 off) on random
queries, keys and values: head sizes 64-512, 1-16 rows, grouped and plain heads, three dtypes, bounds at
the buffer's start, middle and end, a window and none. Prints the largest difference of each case and
exits 1 if any is past its dtype's tolerance. Runs only on MLX's CUDA build (CI has no GPU: the CPU's
tests run `reference` in the kernel's place).

    PYTHONPATH=. python benchmarks/gpu/mlx_attention_check.py
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import mlx.core as mx

from engine.runtime.mlx.cuda_attention import kernel, reference

TOLERANCE = {mx.float32: 2e-4, mx.float16: 4e-3, mx.bfloat16: 3e-2}


def main() -> int:
    mx.random.seed(0)
    worst, bad = 0.0, 0
    for dim, rows, (heads, kv), dtype, slots in itertools.product(
        (64, 128, 256, 512), (1, 4, 16), ((12, 2), (8, 8)), (mx.bfloat16, mx.float16, mx.float32), (256, 1024)
    ):
        q = mx.random.normal((1, heads, rows, dim)).astype(dtype)
        k = mx.random.normal((1, kv, slots, dim)).astype(dtype)
        v = mx.random.normal((1, kv, slots, dim)).astype(dtype)
        for last, window in ((0, 1 << 30), (100, 1 << 30), (slots - rows, 1 << 30), (slots - rows, 64)):
            at = mx.array(last, dtype=mx.int32)
            ours = kernel(q, k, v, dim**-0.5, at, window)
            assert ours is not None
            with mx.stream(mx.cpu):  # float32 on the host: the GPU's float32 matmuls round as TF32
                theirs = reference(*(x.astype(mx.float32) for x in (q, k, v)), dim**-0.5, at, window)
                mx.eval(theirs)
            diff = float(mx.abs(ours.astype(mx.float32) - theirs).max())
            worst = max(worst, diff / TOLERANCE[dtype])
            if diff > TOLERANCE[dtype]:
                bad += 1
                print(f"PAST TOLERANCE: dim {dim} rows {rows} heads {heads}/{kv} {dtype} slots {slots} last {last} "
                      f"window {window}: {diff:.5f}")  # fmt: skip
    print(f"{'every case within tolerance' if not bad else f'{bad} cases past tolerance'}; "
          f"worst difference {worst:.2f} of its tolerance")  # fmt: skip
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
