"""How an MLX model runs: its options (a RunOptions), and the accelerations they resolve to."""

from __future__ import annotations

from dataclasses import dataclass

from engine.runtime.protocol import Acceleration


@dataclass(frozen=True)
class MlxOptions:
    """How an MLX model runs (a RunOptions): its context's size, and the prompt's chunks."""

    n_ctx: int = 4096  # positions a context holds at most (the model's own limit, if smaller)
    prefill_chunk: int = 512  # tokens a decode runs at once; a cancelled prefill stops between chunks

    def acceleration(self) -> Acceleration:
        """None yet. Each switch is a llama.cpp seam: the device's argmax and softmax parts are a
        sampler in llama.cpp's graph, kept rows its output buffers, overlap a decode launched and read
        later. On MLX each is a lazy graph evaluated later (mx.async_eval), to be built and measured
        on Apple silicon, where the rows' copy to the host and the launch gaps are what they save."""
        return Acceleration()
