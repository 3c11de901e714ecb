"""One target pass of n rows on MLX, timed at a new key length each step and at a repeated one.

A speculative round's verify is an n-row pass whose key length is new every round (the cache grows);
this times such passes for n = 1..4 on the Qwen2.5 1.5B shape (random bfloat16 weights), each step
either moving on to a new length (trim n-1: one token kept, as a round that accepts nothing) or
coming back to the same one (trim n). Run it with MLX_CUDA_USE_CUDNN_SDPA set each way.

    python benchmarks/gpu/mlx_rows_probe.py [--steps 20] [--prompt 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def main() -> None:
    import mlx.core as mx
    from mlx_lm.models import qwen2
    from mlx_lm.models.cache import make_prompt_cache

    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--prompt", type=int, default=200)
    args = parser.parse_args()
    cfg = qwen2.ModelArgs(
        model_type="qwen2", hidden_size=1536, num_hidden_layers=28, intermediate_size=8960,
        num_attention_heads=12, rms_norm_eps=1e-6, vocab_size=151936, num_key_value_heads=2,
        max_position_embeddings=32768, rope_theta=1e6, tie_word_embeddings=True,
    )  # fmt: skip
    mx.random.seed(0)
    model = qwen2.Model(cfg)
    model.set_dtype(mx.bfloat16)
    mx.eval(model.parameters())
    env = os.environ.get("MLX_CUDA_USE_CUDNN_SDPA", "unset")
    print(f"MLX_CUDA_USE_CUDNN_SDPA={env}; {mx.default_device()}; ms per pass, median of {args.steps} (first, max)")
    for rows in (1, 2, 3, 4):
        for mode in ("new length", "same length"):
            cache = make_prompt_cache(model)
            mx.eval(model(mx.arange(args.prompt)[None] % 1000, cache=cache))
            times = []
            for _ in range(args.steps):
                t = time.perf_counter()
                mx.eval(model(mx.arange(rows)[None] + 7, cache=cache)[:, -1].argmax())
                times.append((time.perf_counter() - t) * 1e3)
                for c in cache:
                    c.trim(rows - 1 if mode == "new length" else rows)
            print(f"rows {rows} {mode:11}: {statistics.median(times):7.2f} ({times[0]:.1f}, {max(times):.1f})")


if __name__ == "__main__":
    main()
