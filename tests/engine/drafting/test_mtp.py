"""The target's own MTP head as the drafter, on a hybrid target, against llama.cpp's draft-mtp driver.

The model is a tiny random-weight qwen35 with one NextN block, written at test time
(tests/engine/synthetic.py). Random weights accept few drafts, which is why the oracle
comparison looks at every draft token, round by round, not only at the text.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine import (
    AUTO,
    MAX_DEPTH,
    Engine,
    GenerationConfig,
    IncompatibleDrafter,
    RoundEvent,
    RuntimeOptions,
    TokenEvent,
    TokenKind,
)

pytest.importorskip("gguf")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from speculative_simple import before_the_end, ours, theirs
from synthetic import hybrid_qwen35

OPTIONS = RuntimeOptions(n_ctx=256, n_batch=256)
# With these weights (seed 42) the head's drafts are accepted now and then on this prompt,
# so the comparison covers the head resuming from a kept draft, not only from rejections.
PROMPT = "the mill on the river turned; the mill on the river"
N_PREDICT = 24


@pytest.fixture(scope="module")
def mtp_path(tmp_path_factory) -> Path:
    return hybrid_qwen35(tmp_path_factory.mktemp("models") / "hybrid-mtp.gguf", nextn=True)


@pytest.fixture(scope="module")
def mtp_engine(mtp_path):
    eng = Engine.load(mtp_path, "mtp", OPTIONS)
    yield eng
    eng.close()


def test_the_head_is_found_in_the_target_file(mtp_engine):
    assert mtp_engine.drafter.kind == "mtp" and mtp_engine.drafter.n_heads == 1
    assert mtp_engine.drafter.name == "draftlight test hybrid with MTP MTP head"
    assert mtp_engine.can_speculate and mtp_engine.notice == ""


def test_a_target_without_heads_is_refused_in_a_sentence(tmp_path):
    plain = hybrid_qwen35(tmp_path / "no-heads.gguf")
    with pytest.raises(IncompatibleDrafter, match="has no multi-token-prediction \\(NextN\\) heads"):
        Engine.load(plain, "mtp", OPTIONS)


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_mtp_drafts_write_the_plain_text(mtp_engine, depth):
    ids = mtp_engine.target.tokenize(PROMPT, add_special=True)
    plain = list(mtp_engine.stream(ids, GenerationConfig(max_tokens=32, depth=0, ignore_eog=True)))[-1]
    events = list(mtp_engine.stream(ids, GenerationConfig(max_tokens=32, depth=depth, ignore_eog=True)))
    stats = events[-1]
    assert stats.token_ids == plain.token_ids
    assert stats.drafted > 0 and stats.depth == depth
    rounds = [e for e in events if isinstance(e, RoundEvent) and not e.from_prefill]
    assert all(r.drafted == min(depth, 32 - 1 - i) or r.drafted <= depth for i, r in enumerate(rounds))
    kinds = [e.kind for e in events if isinstance(e, TokenEvent)]
    assert kinds[0] is TokenKind.PLAIN and TokenKind.REPLACED in kinds


@pytest.mark.oracle
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_mtp_drafts_equal_llama_cpps_round_by_round(mtp_engine, mtp_path, depth):
    full = before_the_end(theirs(mtp_path, "draft-mtp", depth, PROMPT, N_PREDICT, OPTIONS.threads), depth, N_PREDICT)
    assert len(full) >= 8 and sum(accepted for _, accepted, _ in full) >= 1
    assert ours(mtp_engine, depth, PROMPT, N_PREDICT)[: len(full)] == full


# Known by construction (synthetic.hybrid_qwen35(known=...)): the target writes F[x] after x, the
# head drafts G[x]; they differ after every multiple of 3, so drafts land and fail in a pattern.
F = [(5 * x + 3) % 128 for x in range(128)]
G = [F[x] if x % 3 else (F[x] + 1) % 128 for x in range(128)]


def predicted(last: int, depth: int, n_tokens: int) -> tuple[list[int], list[int], list[int]]:
    """Token ids, drafted and accepted per position, worked out from F and G alone."""
    generated, drafted, accepted = [F[last]], [0] * depth, [0] * depth  # the first token: the prompt's pass
    last = generated[-1]
    while len(generated) < n_tokens:
        k = min(depth, n_tokens - len(generated) - 1)
        drafts, d = [], last
        for _ in range(k):
            d = G[d]
            drafts.append(d)
        kept, prev = 0, last
        while kept < k and drafts[kept] == F[prev]:
            prev = drafts[kept]
            kept += 1
        for i in range(k):
            drafted[i] += 1
        for i in range(kept):
            accepted[i] += 1
        generated += [*drafts[:kept], F[prev]]
        last = generated[-1]
    return generated, drafted[: max(i + 1 for i in range(depth) if drafted[i]) if any(drafted) else 0], accepted


@pytest.fixture(scope="module")
def known_path(tmp_path_factory) -> Path:
    return hybrid_qwen35(tmp_path_factory.mktemp("models") / "known-mtp.gguf", nextn=True, known=(F, G))


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_acceptance_per_position_is_what_the_construction_predicts(known_path, depth):
    engine = Engine.load(known_path, "mtp", OPTIONS)
    try:
        stats = list(engine.stream([10, 20, 30], GenerationConfig(max_tokens=30, depth=depth, ignore_eog=True)))[-1]
    finally:
        engine.close()
    tokens, drafted, accepted = predicted(30, depth, 30)
    assert list(stats.token_ids) == tokens
    assert list(stats.drafted_per_position) == drafted
    assert list(stats.accepted_per_position) == accepted[: len(drafted)]
    assert 0 < sum(accepted) < sum(drafted)  # some drafts land, some do not


@pytest.mark.oracle
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_known_drafts_equal_llama_cpps_round_by_round(known_path, depth):
    engine = Engine.load(known_path, "mtp", OPTIONS)
    try:
        full = before_the_end(
            theirs(known_path, "draft-mtp", depth, PROMPT, N_PREDICT, OPTIONS.threads), depth, N_PREDICT
        )
        assert ours(engine, depth, PROMPT, N_PREDICT)[: len(full)] == full
    finally:
        engine.close()
    kept = sum(accepted for _, accepted, _ in full)
    assert 0 < kept < sum(len(drafts) for drafts, _, _ in full)


def test_auto_with_the_head_measures_the_targets_rows_once_and_writes_the_plain_text(mtp_engine, tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path))
    said = []
    ids = mtp_engine.target.tokenize(PROMPT, add_special=True)
    plain = list(mtp_engine.stream(ids, GenerationConfig(max_tokens=16, depth=0, ignore_eog=True)))[-1]
    auto = list(
        mtp_engine.stream(ids, GenerationConfig(max_tokens=16, depth=AUTO, ignore_eog=True), progress=said.append)
    )
    assert auto[-1].depth == AUTO and auto[-1].token_ids == plain.token_ids
    timing = f"timing target passes of 1 to {MAX_DEPTH + 1} rows"
    # Rows only, no drafter steps: once, or again (up to three attempts) where a busy box spread the timings too wide.
    again = [s for s in said if s.startswith("measuring again (attempt ")]
    assert len(again) < 3 and said == [timing, *[x for why in again for x in (why, timing)]]
    profile = mtp_engine.auto.profile
    assert profile.drafter == "(none)" and len(profile.target_rows_s) == MAX_DEPTH + 1
    assert (
        mtp_engine.auto.in_situ and mtp_engine.auto.profile.drafter_step_s > 0.0
    )  # the head's steps, timed in its rounds
    assert len(list((tmp_path / "profiles").glob("*.json"))) == 1  # saved: the next reply measures nothing


def test_tune_with_the_head_times_the_targets_rows_and_says_the_head_is_priced_in_situ(
    mtp_path, tmp_path, monkeypatch, capsys
):
    from engine.cli import main

    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path))
    assert main(["tune", "--target", str(mtp_path), "--drafter", "mtp", "--ctx", "256"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Box profile for hybrid-mtp.gguf, exact mode")
    assert "undoing a rejected draft" in out and f"{MAX_DEPTH + 1:4}  " in out  # rows 1..7 timed
    assert out.rstrip().endswith("from the conversation's own rounds.")


def test_a_plain_reply_does_not_feed_the_head(mtp_engine):
    ids = mtp_engine.target.tokenize(PROMPT, add_special=True)
    plain = list(mtp_engine.stream(ids, GenerationConfig(max_tokens=12, depth=0, ignore_eog=True)))[-1]
    assert mtp_engine.drafter.head.n_past == 0  # speculation off: the head's pass is not paid for
    assert mtp_engine.ctx._observers  # and it listens again for the next reply
    drafted = list(mtp_engine.stream(ids, GenerationConfig(max_tokens=12, depth=3, ignore_eog=True)))[-1]
    assert drafted.token_ids == plain.token_ids and drafted.drafted > 0


def test_a_plain_reply_held_between_steps_does_not_blind_the_head(mtp_engine):
    ids = mtp_engine.target.tokenize(PROMPT, add_special=True)
    config = GenerationConfig(max_tokens=12, depth=3, ignore_eog=True)
    alone = [e.draft_tokens for e in mtp_engine.stream(ids, config) if isinstance(e, RoundEvent)]
    held = mtp_engine.stream(ids, GenerationConfig(max_tokens=12, depth=0, ignore_eog=True))
    next(held)  # the teaching view holds a reply like this between its steps
    beside = [e.draft_tokens for e in mtp_engine.stream(ids, config) if isinstance(e, RoundEvent)]
    held.close()
    assert beside == alone and any(beside)


def test_a_drafter_closed_while_a_plain_reply_is_held_is_never_called_again(mtp_path):
    engine = Engine.load(mtp_path, "mtp", OPTIONS)
    try:
        ids = engine.target.tokenize(PROMPT, add_special=True)
        held = engine.stream(ids, GenerationConfig(max_tokens=12, depth=0, ignore_eog=True))
        next(held)
        engine.set_drafter(None)  # closes the head, and stops it watching the target
        assert not engine.ctx._observers
        assert list(held)[-1].generated_tokens == 12  # the held reply finishes on the target alone
        assert not engine.ctx._observers  # and puts back no closed head to be called on the next decode
    finally:
        engine.close()
