"""Decode speed of a GGUF's MLX conversion against llama.cpp on the same prompt, interleaved.

    python benchmarks/mlx_convert_bench.py [--model qwen2.5-coder-1.5b] [--mode 4bit] [--tokens 64] [--runs 3]

Each run decodes the same greedy reply (plain decoding, one token a step) on llama.cpp and then
on MLX, after one warm-up of each; medians of tokens per second, and their ratio. Not a test.
"""

from __future__ import annotations

import argparse
import statistics
import time

from engine.models import catalog
from engine.models.mlx_conversions import mlx_folder_for
from engine.runtime.llama.model import Model
from engine.runtime.mlx import MlxModel

PROMPT = "<|im_start|>user\nWrite a bubble sort in C++.<|im_end|>\n<|im_start|>assistant\n"


def decode_rate(model, prompt: list[int], n: int) -> float:
    """Tokens per second of n one-token decodes after the prompt's prefill (not timed)."""
    ctx = model.new_context()
    row = ctx.decode(prompt, all_logits=False)[-1]
    start = time.perf_counter()
    for _ in range(n):
        row = ctx.decode([int(row.argmax())], all_logits=False)[-1]
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=catalog.DEFAULT_TARGET.key)
    parser.add_argument("--mode", default=None)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    path = catalog.resolve(catalog.lookup(args.model) or args.model, download=False)
    started = time.perf_counter()
    folder = mlx_folder_for(path, args.mode, print)
    print(f"MLX folder ready in {time.perf_counter() - started:.1f} s: {folder}")
    cpp, mlx_model = Model(path), MlxModel.load(folder)
    prompt = cpp.tokenize(PROMPT)
    rates: dict[str, list[float]] = {"llama.cpp": [], "mlx": []}
    for run in range(args.runs + 1):
        for name, model in (("llama.cpp", cpp), ("mlx", mlx_model)):
            rate = decode_rate(model, prompt, args.tokens)
            if run:  # the first round warms both up
                rates[name].append(rate)
    medians = {name: statistics.median(r) for name, r in rates.items()}
    for name, rate in medians.items():
        print(f"{name:>10}: {rate:6.1f} tok/s (runs: {', '.join(f'{r:.1f}' for r in rates[name])})")
    print(f"MLX / llama.cpp: {medians['mlx'] / medians['llama.cpp']:.2f}")


if __name__ == "__main__":
    main()
