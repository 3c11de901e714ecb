"""The charts fed by a server that reports a reply's totals, not its rounds: vLLM's acceptance
per position, llama-server's one figure for every position; local replies keep their rounds."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from app.charts import ChartModel
from engine import FinishReason, RunStats, TokenEvent, TokenKind


def totals(drafted_per_position=(), accepted_per_position=(), drafted=0, accepted=0, rounds=0) -> RunStats:
    return RunStats(
        prompt_tokens=12, prefill_s=0.2, generated_tokens=21, decode_s=2.0, rounds=rounds, depth=3,
        drafted=drafted or sum(drafted_per_position), accepted=accepted or sum(accepted_per_position),
        acceptance_per_position=(), drafted_per_position=tuple(drafted_per_position),
        accepted_per_position=tuple(accepted_per_position), draft_s=0.0, verify_s=0.0, commit_s=0.0,
        rewind_s=0.0, overhead_s=0.0, finish_reason=FinishReason.MAX_TOKENS, from_prefill=1,
    )  # fmt: skip


def unreported(n: int) -> list[TokenEvent]:
    return [
        TokenEvent(token_id=-1, text="x", kind=TokenKind.UNREPORTED, round_index=i, position=0, target_prob=0.0)
        for i in range(n)
    ]


def test_vllms_positions_are_charted_as_its_counters_say():
    model = ChartModel()
    model.begin_message()
    model.add([*unreported(21), totals((6, 6, 6), (5, 3, 2), rounds=6)])
    assert (model.message_positions.drafted, model.message_positions.accepted) == ([6, 6, 6], [5, 3, 2])
    assert model.message_acceptance() == [5 / 6, 3 / 6, 2 / 6] and not model.totals_only
    assert model.tps == [(2.0, 20 / 2.0)]  # decoded tokens (the prefill's first is not one) over decode time
    assert model.mean_length == [(2.0, 20 / 6)]
    assert model.kinds[TokenKind.UNREPORTED] == 21


def test_llama_servers_totals_are_one_bar_and_a_second_reply_adds_to_the_session():
    model = ChartModel()
    for _ in range(2):
        model.begin_message()
        model.add([*unreported(21), totals(drafted=30, accepted=12)])
    assert model.totals_only and model.session_positions.drafted == [60] and model.session_positions.accepted == [24]
    assert model.message_positions.drafted == [30] and model.mean_length == []  # no rounds reported: no length
    assert model.tps == [(2.0, 10.0)]  # the reply's own decode time; both replies' together is "all"
    assert model.session_tps() == 40 / 4.0
