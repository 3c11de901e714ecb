"""The break-even gauge: whether speculation pays on this box, for a reply or a session, in one line.

The plain speed is this target's own on this box: from replies decoded without speculation
where there are some, else the box profile's plain round. What a speculative round costs comes
from the replies' own rounds, in plain passes: the verify pass, and a draft step.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engine.events import RunStats


@dataclass(frozen=True)
class Gauge:
    tps: float  # decode tokens/s of the replies that drafted
    plain_tps: float  # the target alone, here
    rows: float  # rows in a verify pass, on average (1 + drafts per round)
    verify_passes: float  # a verify pass, in plain passes
    step: float  # a draft step, in plain passes
    acceptance: float

    @property
    def speedup(self) -> float:
        return self.tps / self.plain_tps

    def short(self) -> str:
        """The verdict in a few words, for a status bar."""
        if self.speedup >= 1.0:
            return f"speculation saves {1 - 1 / self.speedup:.0%}"
        return f"speculation {1 - self.speedup:.0%} slower"

    def verdict(self) -> str:
        """One line: what speculation saves or costs here, and why where it costs."""
        speeds = f"{self.tps:.1f} against {self.plain_tps:.1f} tok/s plain"
        if self.speedup >= 1.0:
            return f"speculation saves {1 - 1 / self.speedup:.0%} of the time here ({speeds})"
        return (
            f"speculation is {1 - self.speedup:.0%} slower than plain decoding here ({speeds}): verifying "
            f"{self.rows:.3g} rows costs {self.verify_passes:.2f} passes and a draft step {self.step:.2f}, "
            f"so {self.acceptance:.0%} acceptance cannot pay for it"
        )


def gauge(replies: Iterable[RunStats], plain_pass_s: float | None) -> Gauge | None:
    """The gauge over the replies that drafted (one: a message; all: a session); None without any
    or without a plain speed to hold them against."""
    drafted = [r for r in replies if r.drafted and r.rounds and r.decode_s > 0]
    if not drafted or not plain_pass_s:
        return None
    rounds = sum(r.rounds for r in drafted)
    drafts = sum(r.drafted for r in drafted)
    return Gauge(
        tps=sum(r.decoded_tokens for r in drafted) / sum(r.decode_s for r in drafted),
        plain_tps=1.0 / plain_pass_s,
        rows=1 + drafts / rounds,
        verify_passes=sum(r.verify_s for r in drafted) / rounds / plain_pass_s,
        step=sum(r.draft_s for r in drafted) / drafts / plain_pass_s,
        acceptance=sum(r.accepted for r in drafted) / drafts,
    )
