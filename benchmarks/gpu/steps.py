"""A one-row step taken apart: what each layer of the engine adds to llama.cpp's own decode.

  PYTHONPATH=.:.gpu-kit/py python3 benchmarks/gpu/steps.py [MODEL ...]     (run.sh's "steps" phase)

Each model decodes one token again and again at the same position (the cache cut back after
each), as a draft model's step or a plain pass does, five ways in turn, median per step:
llama_decode and llama_synchronize through the binding alone (what llama-bench times), the same
with the device's greedy sampler in the graph, the engine's Context.decode with the host's
argmax or the device's, and that with the row copied out, as a draft keeps it.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import llama_cpp.llama_cpp as llama  # before the engine, as a program that binds llama.cpp first does
import numpy as np

MODELS = Path(os.environ.get("MODELS", "/tmp/models"))
STEPS, BLOCKS = 50, 7


def time_steps(path: Path) -> list[float]:
    """Seconds per step of each way, in the table's order."""
    from engine.runtime import Model, RuntimeOptions
    from engine.runtime.llama.context import Context

    model = Model(path, RuntimeOptions(n_ctx=1024))
    host = Context(model, RuntimeOptions(n_ctx=1024, argmax_on_device=False))
    device = Context(model, RuntimeOptions(n_ctx=1024, argmax_on_device=True))
    prompt = [1 + (i * 37) % 1000 for i in range(256)]  # llama-bench's depth 256
    for ctx in (host, device):
        ctx.decode(prompt, all_logits=False)
    row = np.empty(model.n_vocab, dtype=np.float32)

    def raw(ctx: Context) -> None:  # the batch as Context.decode leaves it: one token, its row wanted
        ctx._tokens[0], ctx._pos[0], ctx._want[0], ctx._batch.n_tokens = 7, len(prompt), 1, 1
        llama.llama_decode(ctx.ptr, ctx._batch)
        llama.llama_synchronize(ctx.ptr)
        if ctx.device_argmax:
            llama.llama_get_sampled_token_ith(ctx.ptr, 0)
        llama.llama_memory_seq_rm(ctx.memory, 0, len(prompt), -1)

    def engine_step(ctx: Context, copy: bool = False) -> None:
        logits = ctx.decode([7], all_logits=False)
        top = ctx.argmax[-1] if ctx.argmax is not None else int(logits[-1].argmax())
        if copy:
            np.copyto(row, logits[-1])
        assert top >= 0
        ctx.rewind(len(prompt))

    arms = [
        lambda: raw(host),
        lambda: raw(device),
        lambda: engine_step(host),
        lambda: engine_step(device),
        lambda: engine_step(device, copy=True),
    ]
    samples: list[list[float]] = [[] for _ in arms]
    for block in range(BLOCKS + 1):  # the first block warms every shape up
        for arm, step in enumerate(arms):
            t0 = time.perf_counter()
            for _ in range(STEPS):
                step()
            if block:
                samples[arm].append((time.perf_counter() - t0) / STEPS)
    host.close()
    device.close()
    model.close()
    return [statistics.median(s) for s in samples]


def main() -> int:
    names = sys.argv[1:] or ["drafter.gguf", "target.gguf", "target7b.gguf"]
    print("| model | raw decode + sync | + device sampler | Context.decode, host argmax "
          "| Context.decode, device argmax | + the row's copy (ms a step) |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|")
    for name in names:
        cells = " | ".join(f"{s * 1e3:.3f}" for s in time_steps(MODELS / name))
        print(f"| {name} | {cells} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
