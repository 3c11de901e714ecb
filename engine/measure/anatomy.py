"""Why drafts were rejected: where the target's token stood among the drafter's choices, how
sure the drafter was, and what a confidence cutoff (p_min) would have done to a reply.

A rejection whose target token was the drafter's 2nd or 3rd choice is one a draft tree of
width 2 or 3 would have caught. The p_min what-if replays a reply's own rounds: drafting
stops at the first position whose drafter confidence is below the cutoff, so those drafts
(and their cost) are skipped, and accepted drafts past that point come one round later.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engine.events import RoundEvent, TokenEvent, TokenKind

# "1st" happens only when sampling: the drafter drew a token other than its own first choice.
RANK_BUCKETS = ("1st", "2nd", "3rd", "4-10", ">10")
WHAT_IF_CUTOFFS = (0.3, 0.5, 0.7, 0.9)


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ... 11th, 12th, 13th, 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n:,}{suffix}"


def rank_bucket(rank: int) -> str:
    """The chart's bar for a rank (1 is the drafter's own first choice)."""
    if rank <= 3:
        return RANK_BUCKETS[max(rank, 1) - 1]
    return RANK_BUCKETS[3] if rank <= 10 else RANK_BUCKETS[4]


@dataclass(frozen=True)
class WhatIf:
    """A reply's rounds replayed with drafting stopped below a confidence cutoff."""

    p_min: float
    skipped: int  # drafts not proposed
    skipped_rejected: int  # of them, drafts the target had refused: the waste saved
    skipped_accepted: int  # of them, drafts the target had kept: tokens left for later rounds
    tps: float | None  # predicted decode tokens/s (None without the rounds' timings)

    def sentence(self, measured_tps: float | None = None) -> str:
        if self.skipped == 1:
            which = "which the target rejected" if self.skipped_rejected else "which the target would have kept"
            skipped = f"1 draft, {which}"
        else:
            skipped = f"{self.skipped} drafts, {self.skipped_rejected} of them rejected"
        head = f"with p_min {self.p_min:g} this reply would have skipped {skipped}"
        if self.tps is None:
            return head
        versus = f" against {measured_tps:.1f} measured" if measured_tps else ""
        return f"{head}; predicted {self.tps:.1f} tok/s{versus}"


@dataclass(frozen=True)
class RejectionAnatomy:
    rejections: int  # REPLACED tokens whose drafter had a distribution
    by_rank: dict[str, int]  # RANK_BUCKETS -> count
    mean_rejected_confidence: float | None  # the drafter's probability of drafts it lost
    mean_accepted_confidence: float | None  # ... and of drafts the target kept
    what_ifs: tuple[WhatIf, ...]

    @property
    def tree_catches(self) -> int:
        """Rejections a draft tree of width 3 would have caught (the target's token among the drafter's top 3)."""
        return sum(self.by_rank[b] for b in RANK_BUCKETS[:3])

    def summary(self) -> str:
        """One line for a reply: how the drafter missed."""
        if not self.rejections:
            return "No rejected draft had a drafter distribution to read."
        share = self.tree_catches / self.rejections
        sure = (
            f"; the drafter was {self.mean_rejected_confidence:.0%} sure of the drafts it lost on average"
            if self.mean_rejected_confidence is not None
            else ""
        )
        return (
            f"{self.tree_catches} of {self.rejections} rejections ({share:.0%}) were among the drafter's top 3 "
            f"choices: a draft tree of width 3 would have caught them{sure}."
        )

    def to_json(self) -> dict:
        return {
            "rejections": self.rejections,
            "by_rank": dict(self.by_rank),
            "mean_rejected_confidence": self.mean_rejected_confidence,
            "mean_accepted_confidence": self.mean_accepted_confidence,
            "what_if": [
                {
                    "p_min": w.p_min,
                    "skipped": w.skipped,
                    "skipped_rejected": w.skipped_rejected,
                    "skipped_accepted": w.skipped_accepted,
                    "tps": w.tps,
                }
                for w in self.what_ifs
            ],
        }


def rejection_anatomy(
    tokens: Iterable[TokenEvent],
    rounds: Iterable[RoundEvent],
    plain_pass_s: float | None = None,
    cutoffs: tuple[float, ...] = WHAT_IF_CUTOFFS,
) -> RejectionAnatomy:
    """A reply's (or a session's) rejections, from its events."""
    by_rank = dict.fromkeys(RANK_BUCKETS, 0)
    lost: list[float] = []
    for t in tokens:
        if t.kind is TokenKind.REPLACED and t.draft_rank is not None:
            by_rank[rank_bucket(t.draft_rank)] += 1
            if t.rejected_prob is not None:
                lost.append(t.rejected_prob)
    decode = [r for r in rounds if not r.from_prefill]
    kept = [c for r in decode for c in r.draft_confidence[: r.accepted]]
    return RejectionAnatomy(
        rejections=sum(by_rank.values()),
        by_rank=by_rank,
        mean_rejected_confidence=sum(lost) / len(lost) if lost else None,
        mean_accepted_confidence=sum(kept) / len(kept) if kept else None,
        what_ifs=tuple(what_if(decode, p, plain_pass_s) for p in cutoffs),
    )


def what_if(rounds: list[RoundEvent], p_min: float, plain_pass_s: float | None = None) -> WhatIf:
    """Replay rounds with drafting stopped at the first draft whose confidence is below p_min.

    A round keeps its first j drafts (j: that position) and emits min(accepted, j) + 1
    tokens. Its predicted time drops by the skipped drafts' share of its draft time and of
    its verify pass's cost beyond a plain pass (`plain_pass_s`; rows count as free without it).
    Rounds without confidences (a drafter with no distribution) are replayed unchanged.
    """
    skipped = skipped_rejected = skipped_accepted = 0
    tokens = 0
    seconds = 0.0
    timed = all(r.round_ms > 0 for r in rounds) and bool(rounds)
    for r in rounds:
        conf = r.draft_confidence
        j = next((i for i, c in enumerate(conf) if c < p_min), r.drafted) if len(conf) == r.drafted else r.drafted
        kept = min(r.accepted, j)
        skipped += r.drafted - j
        skipped_accepted += r.accepted - kept
        skipped_rejected += (r.drafted - j) - (r.accepted - kept)
        tokens += kept + 1
        round_s = r.round_ms / 1e3
        if r.drafted and j < r.drafted:
            rows_extra = max(0.0, r.verify_ms / 1e3 - plain_pass_s) if plain_pass_s else 0.0
            round_s -= (r.drafted - j) / r.drafted * (r.draft_ms / 1e3 + rows_extra)
        seconds += round_s
    return WhatIf(
        p_min=p_min,
        skipped=skipped,
        skipped_rejected=skipped_rejected,
        skipped_accepted=skipped_accepted,
        tps=tokens / seconds if timed and seconds > 0 else None,
    )
