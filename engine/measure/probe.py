"""Is this machine's arithmetic batch-invariant? Speculation is exact only if it is.

A verify pass computes several rows at once; if the kernels for a batch of rows round
differently from the single-row kernels, the target's argmax can flip and speculation
changes the text. The probe decodes tokens one at a time, then the same tokens as one
batch of every size a verify pass can have, and compares every row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.runtime.protocol import RuntimeContext


@dataclass(frozen=True)
class ProbeResult:
    rows: int  # the largest batch tried
    argmax_equal: int  # rows, over every batch size, whose argmax agrees with the single-row pass
    rows_compared: int
    max_logit_diff: float  # largest absolute difference over every logit of every row
    worst_batch: int  # the batch size with the largest difference (0 when none differs)
    tokens: tuple[int, ...]

    @property
    def invariant(self) -> bool:
        return self.argmax_equal == self.rows_compared and self.max_logit_diff == 0.0

    def describe(self) -> str:
        if self.invariant:
            return (
                f"batch-invariant: {self.rows} tokens decoded one by one and in batches of 2 to {self.rows} "
                "give identical logits."
            )
        differ = self.rows_compared - self.argmax_equal
        verdict = "argmaxes agree" if not differ else f"argmax differs in {differ} of {self.rows_compared} rows"
        return (
            f"not batch-invariant: {verdict}; largest logit difference {self.max_logit_diff:.3g} "
            f"(batches of {self.worst_batch}). Speculation may change greedy output on this machine."
        )


def batch_invariance(ctx: RuntimeContext, prompt: list[int], rows: int = 5) -> ProbeResult:
    """Decode `rows` greedy tokens singly after the prompt, then verify them in batches of 2..rows."""
    rows = min(rows, ctx.max_rows)
    ctx.clear()
    ctx.decode(prompt[:-1], all_logits=False)
    base = ctx.n_past
    tokens = [prompt[-1]]
    single = []
    for _ in range(rows):
        logits = ctx.decode([tokens[-1]], all_logits=True)
        single.append(logits[0].copy())
        tokens.append(int(logits[0].argmax()))
    single_arr = np.stack(single)
    agree = compared = worst_batch = 0
    worst = 0.0
    for size in range(2, rows + 1):
        ctx.rewind(base)
        batch = ctx.decode(tokens[:size], all_logits=True).copy()
        agree += int((single_arr[:size].argmax(axis=1) == batch.argmax(axis=1)).sum())
        compared += size
        diff = float(np.abs(single_arr[:size] - batch).max())
        if diff > worst:
            worst, worst_batch = diff, size
    ctx.clear()
    return ProbeResult(rows, agree, compared, worst, worst_batch, tuple(tokens[1:]))
