"""Hybrid targets (recurrent + attention layers): rejected drafts are undone from state snapshots.

The model is a tiny random-weight qwen35 (layer 0 a gated delta-net, layer 1 attention),
written by tests/engine/synthetic.py: no such model can be downloaded here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from engine import Engine, GenerationConfig, Model, RoundEvent, RuntimeOptions, TokenKind
from engine.drafting import NgramDrafter
from engine.runtime import Context

pytest.importorskip("gguf")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from synthetic import hybrid_qwen35, mamba

OPTIONS = RuntimeOptions(n_ctx=256, n_batch=64)
# Text the n-gram drafter can echo: a repeated phrase, so drafts are proposed and some are refused.
PROMPT_TEXT = "the mill on the river turned; the mill on the river stood; the mill on the river"


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory) -> Model:
    path = hybrid_qwen35(tmp_path_factory.mktemp("models") / "hybrid-qwen35.gguf")
    model = Model(path, OPTIONS)
    yield model
    model.close()


@pytest.fixture(scope="module")
def prompt(hybrid) -> list[int]:
    return hybrid.tokenize(PROMPT_TEXT, add_special=False)


def test_a_hybrid_target_keeps_a_snapshot_per_draft(hybrid):
    ctx = Context(hybrid, OPTIONS, max_rows=4)
    assert ctx.has_state and ctx.rollback_depth == 3 and ctx.can_rewind
    assert "snapshots (up to 3 tokens)" in ctx.describe_rollback()
    ctx.close()


def _next_row(ctx: Context, tokens: list[int]) -> np.ndarray:
    return ctx.decode(tokens, all_logits=False)[-1].copy()


def test_after_a_rollback_the_next_logits_are_a_fresh_runs(hybrid, prompt):
    """Verify [t, d1, d2, d3], keep t, decode u: the logits of prompt, t, u decoded without drafts.

    Equal up to float32 rounding, not bit for bit: on this CPU the recurrent layer computes
    a token inside a 4-row batch a few ulps away from the same token alone (`row0_gap`
    measures it), so the rollback can be no closer than that. Without the rollback the
    rejected drafts would stay in the state and the logits would be far off.
    """
    drafted, fresh, kept = (Context(hybrid, OPTIONS, max_rows=4) for _ in range(3))
    t, u = 5, 77
    for ctx in (drafted, fresh, kept):
        ctx.decode(prompt, all_logits=False)
    batch_row0 = drafted.decode([t, 9, 10, 11], all_logits=True)[0].copy()
    kept.decode([t, 9, 10, 11], all_logits=True)  # the same verify pass, never rolled back
    drafted.rewind(len(prompt) + 1)
    assert drafted.n_past == len(prompt) + 1 and drafted.rewinds_replayed == 0  # from the snapshots
    single_row = fresh.decode([t], all_logits=False)[-1].copy()
    row0_gap = np.abs(batch_row0 - single_row).max()
    after, expected, not_undone = (_next_row(c, [u]) for c in (drafted, fresh, kept))
    assert np.abs(after - expected).max() <= max(4 * row0_gap, 1e-5)
    assert np.abs(not_undone - expected).max() > 0.1
    assert int(after.argmax()) == int(expected.argmax())
    for ctx in (drafted, fresh, kept):
        ctx.close()


def test_a_rewind_past_the_snapshots_replays_the_kept_tokens(hybrid, prompt):
    """A follow-up that keeps only part of the conversation: the state starts again from it."""
    ctx = Context(hybrid, OPTIONS, max_rows=4)
    fresh = Context(hybrid, OPTIONS, max_rows=4)
    ctx.decode(prompt, all_logits=False)
    ctx.decode([1, 2, 3], all_logits=False)
    keep = len(prompt) // 2
    ctx.rewind(keep)
    assert ctx.rewinds_replayed == 1 and ctx.tokens == prompt[:keep]
    fresh.decode(prompt[:keep], all_logits=False)
    np.testing.assert_array_equal(_next_row(ctx, [42]), _next_row(fresh, [42]))  # the same batches: bit for bit
    ctx.close()
    fresh.close()


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_speculation_on_a_hybrid_target_writes_the_plain_text(hybrid, prompt, depth):
    engine = Engine(hybrid, NgramDrafter(), OPTIONS)
    try:
        plain = list(engine.stream(prompt, GenerationConfig(max_tokens=40, depth=0, ignore_eog=True)))
        engine.forget()
        events = list(engine.stream(prompt, GenerationConfig(max_tokens=40, depth=depth, ignore_eog=True)))
    finally:
        engine.ctx.close()
    assert events[-1].token_ids == plain[-1].token_ids
    rounds = [e for e in events if isinstance(e, RoundEvent) and e.drafted]
    assert rounds, "the n-gram drafter proposed nothing"
    assert any(r.accepted < r.drafted for r in rounds)  # a rejection: the state was rolled back
    assert engine.ctx.rewinds_replayed == 0
    kinds = {e.kind for e in events if hasattr(e, "kind")}
    assert TokenKind.REPLACED in kinds or TokenKind.ACCEPTED in kinds


def test_a_state_that_cannot_roll_back_decodes_plainly_and_says_why(tmp_path, prompt):
    model = Model(mamba(tmp_path / "mamba.gguf"), OPTIONS)
    engine = Engine(model, NgramDrafter(), OPTIONS)
    try:
        assert engine.ctx.has_state and engine.ctx.rollback_depth == 0 and not engine.can_speculate
        assert engine.notice == (
            "draftlight test mamba keeps a recurrent state that llama.cpp cannot roll back for its "
            "architecture (mamba), so it decodes without speculation."
        )
        events = list(engine.stream(prompt, GenerationConfig(max_tokens=12, depth=3, ignore_eog=True)))
    finally:
        engine.close()
    stats = events[-1]
    assert stats.generated_tokens == 12 and stats.drafted == 0 and stats.depth == 0
    assert {e.kind for e in events if hasattr(e, "kind")} == {TokenKind.PLAIN}


def test_the_rollback_sentence_carries_its_cost_once_the_box_is_measured(hybrid, tmp_path, monkeypatch):
    from engine.measure.profile import profile_for_target_only

    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path))
    engine = Engine(hybrid, NgramDrafter(), OPTIONS)
    try:
        assert "costs" not in engine.describe_rollback()  # nothing measured on this box yet
        profile = profile_for_target_only(hybrid, OPTIONS, progress=lambda _: None)
        assert profile.rollback_s > 0 and profile.overhead_s == profile.rollback_s
        said = engine.describe_rollback()
    finally:
        engine.ctx.close()
    ms = f"{profile.rollback_s * 1e3:.2f} ms"
    share = f"{profile.rollback_s / profile.target_rows_s[0]:.1%}"
    assert said == (
        "draftlight test hybrid keeps a recurrent state: rejected drafts are undone from per-token snapshots "
        f"(up to 6 tokens). Undoing a rejected draft costs {ms} on this box, {share} of a target pass, "
        "and Auto counts it in a round's cost."
    )


def test_a_recurrent_draft_model_keeps_one_row_a_step_even_on_a_gpu(hybrid):
    from dataclasses import replace

    from engine.drafting import ModelDrafter

    drafter = ModelDrafter(hybrid, replace(OPTIONS, steady_draft_shape=True))
    try:  # a second row would be a one-token rewind, which a recurrent state can only replay
        assert drafter.ctx.has_state and drafter.shape == 1
    finally:
        drafter.close()
