"""Rejection anatomy: where the target's token stood among the drafter's choices, and what a
confidence cutoff would have changed. Ranks are checked against the drafter run on its own."""

from __future__ import annotations

import numpy as np
import pytest

from engine import GenerationConfig, Message, RoundEvent, TokenEvent, TokenKind
from engine.measure.anatomy import WhatIf, rank_bucket, rejection_anatomy, what_if

PROSE = "Write a short travel blog paragraph about a morning in Lisbon."
TOP = 16  # the drafter's candidates each token reports


@pytest.fixture(scope="module")
def reply(engine):
    prompt = engine.prompt_ids([Message("user", PROSE)])
    engine.forget()
    config = GenerationConfig(max_tokens=40, depth=3, ignore_eog=True, top_candidates=TOP)
    events = list(engine.stream(prompt, config))
    return prompt, events


def test_ranks_and_confidences_are_the_drafters_own(reply):
    _, events = reply
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    replaced = [t for t in tokens if t.kind is TokenKind.REPLACED]
    assert len(replaced) >= 3  # prose: the drafter misses
    assert any(t.draft_rank <= TOP for t in replaced)
    confidence = {
        (e.round_index, i): c for e in events if isinstance(e, RoundEvent) for i, c in enumerate(e.draft_confidence)
    }
    for t in replaced:
        # The rank is the token's place in the drafter's own top candidates, where it is among them.
        candidates = [token for token, _ in t.draft_top]
        assert len(candidates) == TOP and candidates[0] == t.rejected_id
        if t.draft_rank <= TOP:
            assert candidates.index(t.token_id) + 1 == t.draft_rank
        else:
            assert t.token_id not in candidates
        assert t.draft_rank >= 2  # greedy: its first choice was the refused draft
        # Greedy: the refused draft was the drafter's top choice, so its probability is the round's
        # confidence there, and the first of its candidates'.
        assert t.rejected_prob == pytest.approx(confidence[(t.round_index, t.position)], rel=1e-6)
        assert t.rejected_prob == pytest.approx(t.draft_top[0][1], rel=1e-5)
    for r in (e for e in events if isinstance(e, RoundEvent) and not e.from_prefill):
        assert len(r.draft_confidence) == r.drafted
        kept = [t for t in tokens if t.round_index == r.round_index and t.kind is TokenKind.ACCEPTED]
        for t in kept:  # greedy: the drafter's top probability is its draft's
            assert r.draft_confidence[t.position] == pytest.approx(t.draft_prob, rel=1e-5)


def test_the_anatomy_counts_every_rejection(reply):
    _, events = reply
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    rounds = [e for e in events if isinstance(e, RoundEvent)]
    a = rejection_anatomy(tokens, rounds)
    replaced = [t for t in tokens if t.kind is TokenKind.REPLACED]
    assert a.rejections == len(replaced)
    for bucket in a.by_rank:
        assert a.by_rank[bucket] == sum(rank_bucket(t.draft_rank) == bucket for t in replaced)
    assert a.tree_catches == sum(t.draft_rank <= 3 for t in replaced)
    assert a.mean_rejected_confidence == pytest.approx(np.mean([t.rejected_prob for t in replaced]))
    assert [w.p_min for w in a.what_ifs] == [0.3, 0.5, 0.7, 0.9]
    assert all(w.tps is not None and w.tps > 0 for w in a.what_ifs)


def test_rank_buckets():
    assert [rank_bucket(r) for r in (1, 2, 3, 4, 10, 11, 500)] == [
        "1st", "2nd", "3rd", "4-10", "4-10", ">10", ">10"
    ]  # fmt: skip


def rounds_of(*specs) -> list[RoundEvent]:
    return [
        RoundEvent(round_index=i + 1, drafted=d, accepted=a, draft_confidence=c, draft_ms=3.0 * d, verify_ms=12.0,
                   round_ms=3.0 * d + 14.0)
        for i, (d, a, c) in enumerate(specs)
    ]  # fmt: skip


def test_what_if_replays_the_rounds():
    rounds = rounds_of(
        (3, 3, (0.95, 0.9, 0.8)),  # all kept; a 0.85 cutoff stops before the third
        (3, 1, (0.9, 0.4, 0.3)),  # one kept, then two refused: a 0.5 cutoff skips both refused
        (3, 0, (0.2, 0.9, 0.9)),  # nothing kept: any cutoff above 0.2 skips the whole draft
    )
    w = what_if(rounds, 0.5, plain_pass_s=0.010)
    assert (w.skipped, w.skipped_rejected, w.skipped_accepted) == (5, 5, 0)
    # tokens: 4 + 2 + 1; time: 23 + (23 - 2/3 * (9 + 2)) + (23 - (9 + 2)) ms
    assert w.tps == pytest.approx(7 / ((23 + 23 - 22 / 3 + 12) / 1e3))
    w = what_if(rounds, 0.85, plain_pass_s=0.010)
    assert (w.skipped, w.skipped_rejected, w.skipped_accepted) == (6, 5, 1)
    assert w.sentence(5.0).startswith("with p_min 0.85 this reply would have skipped 6 drafts, 5 of them rejected;")
    nothing = what_if(rounds, 0.1)
    assert (nothing.skipped, nothing.tps) == (0, pytest.approx(7 / (69 / 1e3)))


def test_rounds_without_confidences_are_replayed_unchanged():
    rounds = rounds_of((3, 1, ()))  # an n-gram drafter: no distribution
    w = what_if(rounds, 0.9)
    assert (w.skipped, w.skipped_rejected) == (0, 0)
    a = rejection_anatomy([], rounds)
    assert a.rejections == 0 and a.summary() == "No rejected draft had a drafter distribution to read."


def test_one_skipped_draft_reads_as_one():
    rejected = WhatIf(p_min=0.3, skipped=1, skipped_rejected=1, skipped_accepted=0, tps=None)
    kept = WhatIf(p_min=0.3, skipped=1, skipped_rejected=0, skipped_accepted=1, tps=None)
    assert rejected.sentence() == "with p_min 0.3 this reply would have skipped 1 draft, which the target rejected"
    assert kept.sentence() == "with p_min 0.3 this reply would have skipped 1 draft, which the target would have kept"
