"""Is this machine's arithmetic batch-invariant? Speculation is exact only if it is.

A verify pass computes several rows at once; if the kernels for a batch of rows round
differently from the single-row kernels, the target's argmax can flip and speculation
changes the text. The probe decodes tokens one at a time, then the same tokens as one
batch, and compares.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.runtime import Context


@dataclass(frozen=True)
class ProbeResult:
    rows: int
    argmax_equal: int  # rows whose argmax agrees
    max_logit_diff: float  # largest absolute difference over every logit of every row
    tokens: tuple[int, ...]

    @property
    def invariant(self) -> bool:
        return self.argmax_equal == self.rows and self.max_logit_diff == 0.0

    def describe(self) -> str:
        if self.invariant:
            return f"batch-invariant: {self.rows} rows decoded one by one and as one batch give identical logits."
        verdict = (
            "argmaxes agree"
            if self.argmax_equal == self.rows
            else (f"argmax differs in {self.rows - self.argmax_equal} of {self.rows} rows")
        )
        return (
            f"not batch-invariant: {verdict}; largest logit difference {self.max_logit_diff:.3g}. "
            "Speculation may change greedy output on this machine."
        )


def batch_invariance(ctx: Context, prompt: list[int], rows: int = 5) -> ProbeResult:
    """Decode `rows` greedy tokens singly after the prompt, then verify them as one batch."""
    ctx.clear()
    ctx.decode(prompt[:-1], all_logits=False)
    base = ctx.n_past
    tokens = [prompt[-1]]
    single = []
    for _ in range(rows):
        logits = ctx.decode([tokens[-1]], all_logits=True)
        single.append(logits[0].copy())
        tokens.append(int(logits[0].argmax()))
    ctx.rewind(base)
    batch = ctx.decode(tokens[:rows], all_logits=True).copy()
    ctx.clear()
    single_arr = np.stack(single)
    agree = int((single_arr.argmax(axis=1) == batch.argmax(axis=1)).sum())
    diff = float(np.abs(single_arr - batch).max())
    return ProbeResult(rows, agree, diff, tuple(tokens[1:]))
