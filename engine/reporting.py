"""From rounds to the events a reply streams: tokens, rounds, the run's totals.

The generation loop (engine.speculative) hands each round here; an Outbox holds a round's
events until the probabilities left to side work are in (on an accelerator, one round).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from engine.content import acceptance_by_segment
from engine.depth import Depth
from engine.events import Event, FinishReason, PositionTally, RoundEvent, RunStats, TokenEvent
from engine.rounds import Emitted, Prefill, Round
from engine.runtime.protocol import RuntimeModel


class Outbox:
    """Events waiting for their round's probabilities (side work), in order."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.round: tuple[int, Round] | None = None
        self.late: dict[tuple[int, int], float] = {}  # (round, position): the target's probability

    def put(self, events: list[Event]) -> None:
        self.events.extend(events)

    def wait_for(self, index: int, r: Round) -> None:
        self.round = (index, r) if r.pending is not None else None

    def release(self) -> list[Event]:
        if self.round is not None:
            index, r = self.round
            assert r.pending is not None
            for pos, job in enumerate(r.pending):
                self.late[(index, pos)] = job.result()
            self.round = None
        out, self.events = [self._filled(e) for e in self.events], []
        return out

    def _filled(self, e: Event) -> Event:
        if isinstance(e, TokenEvent):
            p = self.late.pop((e.round_index, e.position), None)
            if p is not None:  # the probability side work computed: the event as it goes out
                return dataclasses.replace(e, target_prob=p)
        return e


def token_event(e: Emitted, text: str, round_index: int, position: int, model: RuntimeModel) -> TokenEvent:
    return TokenEvent(
        token_id=e.token,
        text=text,
        kind=e.kind,
        round_index=round_index,
        position=position,
        target_prob=e.target_prob,
        draft_prob=e.draft_prob,
        rejected_id=e.rejected,
        rejected_text=model.piece(e.rejected).decode("utf-8", errors="replace") if e.rejected is not None else None,
        draft_rank=e.draft_rank,
        rejected_prob=e.rejected_prob,
        target_top=e.target_top,
        draft_top=e.draft_top,
    )


def round_event(r: Round, index: int, depth: int, round_s: float, from_prefill: bool) -> RoundEvent:
    if from_prefill:  # the prompt's pass did the work: the round is the engine's own overhead
        return RoundEvent(
            round_index=index,
            drafted=0,
            accepted=0,
            overhead_ms=round_s * 1e3,
            round_ms=round_s * 1e3,
            from_prefill=True,
        )
    return RoundEvent(
        round_index=index,
        drafted=len(r.draft.tokens),
        accepted=r.verdict.accepted,
        draft_ms=r.draft_s * 1e3,
        verify_ms=r.verify_s * 1e3,
        commit_ms=r.commit_s * 1e3,
        rewind_ms=r.rewind_s * 1e3,
        overhead_ms=(round_s - r.llama_s) * 1e3,
        round_ms=round_s * 1e3,
        draft_tokens=tuple(r.draft.tokens),
        draft_confidence=r.confidence,
        depth=depth,
        guessed=r.draft.guessed,
        host_syncs=r.host_syncs,
    )


def run_stats(
    rounds: list[tuple[RoundEvent, float]],
    finish: FinishReason,
    depth: Depth,
    token_ids: list[int],
    text: str,
    prefill: Prefill,
    n_ctx: int,
    shown: Sequence[TokenEvent] = (),
) -> RunStats:
    """The reply's totals, from its rounds; the prefill's round counts no decode time."""
    decode = [(r, s) for r, s in rounds if not r.from_prefill]
    tally = PositionTally()
    for r, _ in decode:
        tally.add(r.drafted, r.accepted)
    messages = {
        FinishReason.CONTEXT_FULL: f"The reply filled the context window ({n_ctx:,} tokens); start a new conversation.",
        FinishReason.CANCELLED: "Stopped.",
    }
    return RunStats(
        prompt_tokens=prefill.tokens,
        prefill_s=prefill.seconds,
        generated_tokens=len(token_ids),
        decode_s=sum(s for _, s in decode),
        rounds=len(decode),
        depth=depth,
        drafted=sum(tally.drafted),
        accepted=sum(tally.accepted),
        acceptance_per_position=tally.acceptance,
        drafted_per_position=tuple(tally.drafted),
        accepted_per_position=tuple(tally.accepted),
        draft_s=sum(r.draft_ms for r, _ in decode) / 1e3,
        verify_s=sum(r.verify_ms for r, _ in decode) / 1e3,
        commit_s=sum(r.commit_ms for r, _ in decode) / 1e3,
        rewind_s=sum(r.rewind_ms for r, _ in decode) / 1e3,
        overhead_s=sum(r.overhead_ms for r, _ in decode) / 1e3,
        host_syncs=None if any(r.host_syncs is None for r, _ in decode) else sum(r.host_syncs or 0 for r, _ in decode),
        finish_reason=finish,
        message=messages.get(finish, ""),
        text=text,
        token_ids=tuple(token_ids),
        from_prefill=len(rounds) - len(decode),
        content=acceptance_by_segment(list(shown), [r for r, _ in rounds]),
    )
