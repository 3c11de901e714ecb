"""A realistic replay made without a model: rounds of every kind, candidates, pieces.

Shaped as the engine records them (the round's tokens are its kept drafts and the target's
own; every id shown has its text), for the replay schema tests and the replay fuzz suite.
"""

from __future__ import annotations

import random

from engine import RoundEvent, RoundStep, RunStats, TokenEvent, TokenKind
from engine.events import FinishReason
from engine.replay import Replay, record


def sample_replay(rounds: int = 12, depth: int = 3, seed: int = 7) -> Replay:
    rng = random.Random(seed)
    steps: list[RoundStep] = []
    ids: list[int] = []
    for r in range(rounds):
        prefill = r == 0
        drafted = 0 if prefill else depth
        accepted = 0 if prefill else rng.randint(0, depth)
        drafts = tuple(rng.randint(10, 5000) for _ in range(drafted))
        tokens = []
        for i in range(accepted + 1):
            if prefill:
                kind = TokenKind.PLAIN
            elif i < accepted:
                kind = TokenKind.ACCEPTED
            else:
                kind = TokenKind.BONUS if accepted == drafted else TokenKind.REPLACED
            tid = drafts[i] if kind is TokenKind.ACCEPTED else rng.randint(10, 5000)
            top = tuple((rng.randint(10, 5000), round(rng.random(), 4)) for _ in range(5))
            rejected = drafts[i] if kind is TokenKind.REPLACED else None
            tokens.append(
                TokenEvent(
                    token_id=tid,
                    text=f"w{tid} ",
                    kind=kind,
                    round_index=r,
                    position=i,
                    target_prob=round(rng.random(), 4),
                    draft_prob=None if prefill else round(rng.random(), 4),
                    rejected_id=rejected,
                    rejected_text=None if rejected is None else f"w{rejected} ",
                    target_top=top,
                    draft_top=top[::-1],
                )
            )
            ids.append(tid)
        event = RoundEvent(round_index=r, drafted=drafted, accepted=accepted, draft_ms=3.0, verify_ms=20.0,
                           commit_ms=0.3, rewind_ms=0.1, overhead_ms=0.2, round_ms=23.6, draft_tokens=drafts,
                           depth=drafted, from_prefill=prefill)  # fmt: skip
        steps.append(RoundStep(event, tuple(tokens)))
    decode = [s for s in steps if not s.round.from_prefill]
    stats = RunStats(prompt_tokens=20, prefill_s=0.1, generated_tokens=len(ids), decode_s=0.5,
                     rounds=len(decode), depth=depth, drafted=sum(s.round.drafted for s in decode),
                     accepted=sum(s.round.accepted for s in decode), acceptance_per_position=(0.5,) * depth,
                     drafted_per_position=(len(decode),) * depth, accepted_per_position=(1,) * depth,
                     draft_s=0.05, verify_s=0.4, commit_s=0.01, rewind_s=0.01, overhead_s=0.01,
                     finish_reason=FinishReason.MAX_TOKENS, text="".join(f"w{t} " for t in ids),
                     token_ids=tuple(ids), from_prefill=1)  # fmt: skip
    return record(steps, stats, lambda t: f"w{t} ", "target.gguf", "drafter.gguf", "<prompt>", {"depth": depth}, 40.0)
