"""How often the default pair's 4-bit MLX conversions pick llama.cpp's own greedy token.

For each model of the default pair and three prompts, llama.cpp (the Q4_K_M GGUF) decodes 64
greedy tokens; the MLX conversion (`make mlx-models`) then reads prompt + reply in one batch and
its top-1 pick at each of the 64 positions is compared with llama.cpp's (teacher-forced). The
bound in tests/engine/runtime/test_mlx_convert.py comes from this.

    PYTHONPATH=. python benchmarks/mlx_agreement.py
"""

from __future__ import annotations

import time

import numpy as np

from engine.models import catalog
from engine.models.mlx_conversions import mlx_folder_for
from engine.runtime.llama import Model
from engine.runtime.mlx.model import MlxModel
from tests.engine.runtime.test_mlx_convert import CHAT, POSITIONS, REAL_TEXTS, greedy

TEXTS = [CHAT.format(REAL_TEXTS[0]), CHAT.format(REAL_TEXTS[4]), CHAT.format("Write a JSON object describing a cat.")]


def main() -> None:
    target = catalog.resolve("default", download=False)
    drafter = catalog.resolve(catalog.DEFAULT_DRAFTER, download=False)
    for name, gguf in (("drafter", drafter), ("target", target)):
        folder = mlx_folder_for(gguf)
        mlx_model, cpp = MlxModel.load(folder), Model(gguf)
        for text in TEXTS:
            start = time.perf_counter()
            prompt = cpp.tokenize(text)
            reply = greedy(cpp.new_context(), prompt, POSITIONS)
            seq = [*prompt, *reply]
            rows = mlx_model.new_context(max_rows=len(seq)).decode(seq, all_logits=True)[len(prompt) - 1 : -1]
            agree = rows.argmax(axis=1) == np.array(reply)
            first = int(np.argmin(agree)) if not agree.all() else POSITIONS
            print(
                f"{name} {folder.name}: {agree.mean():.3f} ({agree.sum()}/{POSITIONS}), "
                f"first miss at {first}, {time.perf_counter() - start:.0f} s",
                flush=True,
            )


if __name__ == "__main__":
    main()
