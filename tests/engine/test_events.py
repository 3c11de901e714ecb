"""The event stream's vocabulary: per-position tallies, and stats that read back what they wrote."""

from __future__ import annotations

import pytest

from engine.depth import AUTO
from engine.events import FinishReason, PositionTally, RoundEvent, RunStats, event_from_json


def _stats(depth) -> RunStats:
    return RunStats(
        prompt_tokens=5,
        prefill_s=0.1,
        generated_tokens=4,
        decode_s=0.2,
        rounds=2,
        depth=depth,
        drafted=3,
        accepted=2,
        acceptance_per_position=(1.0, 0.5),
        drafted_per_position=(2, 1),
        accepted_per_position=(2, 1),
        draft_s=0.01,
        verify_s=0.15,
        commit_s=0.01,
        rewind_s=0.001,
        overhead_s=0.002,
        finish_reason=FinishReason.MAX_TOKENS,
        token_ids=(1, 2, 3, 4),
        from_prefill=1,
    )


def test_position_tally_counts_each_position_a_round_drafted_and_kept():
    tally = PositionTally()
    for drafted, accepted in ((3, 3), (3, 1), (2, 0), (0, 0)):
        tally.add(drafted, accepted)
    assert tally.drafted == [3, 3, 2] and tally.accepted == [2, 1, 1]
    assert tally.acceptance == pytest.approx((2 / 3, 1 / 3, 1 / 2))
    tally.extend((1, 1, 1, 1), (1, 0, 0, 0))  # a finished reply's counts, one position deeper
    assert tally.drafted == [4, 4, 3, 1] and tally.accepted == [3, 1, 1, 0]
    assert PositionTally().acceptance == ()


@pytest.mark.parametrize("depth", [0, 3, AUTO])
def test_run_stats_read_back_what_they_wrote(depth):
    stats = _stats(depth)
    line = stats.to_json()
    assert line["depth"] == depth
    assert event_from_json(line) == stats


def test_auto_saved_as_minus_one_reads_back_as_auto():
    """Replies stored before Auto had a name wrote -1."""
    line = _stats(AUTO).to_json() | {"depth": -1}
    assert event_from_json(line).depth == AUTO


def test_events_take_keywords_only():
    with pytest.raises(TypeError):
        RoundEvent(0, 1, 1)  # type: ignore[misc]
    r = RoundEvent(round_index=2, drafted=1, accepted=1, draft_ms=1.0, verify_ms=2.0, commit_ms=0.5)
    assert r.total_ms == 3.5 and RoundEvent.from_json(r.to_json()) == r
    guessed = RoundEvent(round_index=3, drafted=2, accepted=2, guessed=True)
    assert RoundEvent.from_json(guessed.to_json()) == guessed
