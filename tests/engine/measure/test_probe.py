"""Speculation is exact only on batch-invariant arithmetic: the probe says whether it is."""

from __future__ import annotations

import pytest

from engine import RuntimeOptions
from engine.measure.probe import ProbeResult, batch_invariance
from engine.runtime import Context


@pytest.fixture(scope="module")
def probe_ctx(engine):
    ctx = Context(engine.target, RuntimeOptions(n_ctx=256), max_rows=5)
    yield ctx
    ctx.close()


def test_exact_mode_is_batch_invariant_here(engine, prompts, probe_ctx):
    assert engine.options.exact and engine.options.mode == "exact"
    result = batch_invariance(probe_ctx, prompts["code"], rows=5)
    assert result.rows == 5
    assert result.rows_compared == 2 + 3 + 4 + 5  # every row of batches of 2 to 5
    assert result.argmax_equal == result.rows_compared
    assert result.max_logit_diff == 0.0
    assert result.invariant
    # the rows are the target's own greedy continuation: "Certainly! Below is a"
    assert result.tokens == (95456, 0, 21193, 374, 264)
    assert result.describe() == (
        "batch-invariant: 5 tokens decoded one by one and in batches of 2 to 5 give identical logits."
    )
    assert probe_ctx.n_past == 0  # the probe leaves the context empty


def test_exact_mode_stays_invariant_past_512_cached_positions(engine, prompts):
    ctx = Context(engine.target, RuntimeOptions(n_ctx=2048), max_rows=7)
    try:
        result = batch_invariance(ctx, prompts["long"], rows=7)  # the KV cache grows past 512 positions
    finally:
        ctx.close()
    assert len(prompts["long"]) > 560
    assert result.invariant, result.describe()


def test_a_variant_result_is_described_as_such():
    result = ProbeResult(5, 13, 14, 0.0123, 4, (1, 2, 3, 4, 5))
    assert not result.invariant
    assert result.describe() == (
        "not batch-invariant: argmax differs in 1 of 14 rows; largest logit difference 0.0123 (batches of 4). "
        "Speculation may change greedy output on this machine."
    )
    rounding_only = ProbeResult(5, 14, 14, 2e-6, 2, (1, 2, 3, 4, 5))
    assert not rounding_only.invariant
    assert rounding_only.describe().startswith("not batch-invariant: argmaxes agree; largest logit difference 2e-06")
