"""The break-even gauge: whether speculation pays on this box, for a reply or a session, in one line.

The plain speed is this target's own on this box: from replies decoded without speculation
where there are some, else the box profile's plain round. What a speculative round costs comes
from the replies' own rounds, in plain passes: the verify pass, and a draft step.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engine.events import RunStats
from engine.measure.soundness import DISAGREEMENT


@dataclass(frozen=True)
class Gauge:
    tps: float  # decode tokens/s of the replies that drafted
    plain_tps: float  # the target alone, here
    rows: float  # rows in a verify pass, on average (1 + drafts per round)
    verify_passes: float  # a verify pass, in plain passes
    step: float  # a draft step, in plain passes
    acceptance: float
    basis: str = ""  # what the plain speed rests on: "plain 31.2 tok/s ±3%, measured today"

    @property
    def speedup(self) -> float:
        return self.tps / self.plain_tps

    @property
    def contradicted(self) -> bool:
        """The replies' own verify passes, each over one row or more, ran well under the plain pass they are
        held against: that plain speed is wrong (a box profile measured on a busy machine), and no saving
        it would show can be claimed."""
        return self.verify_passes * DISAGREEMENT < 1.0

    def to_json(self) -> dict:
        """The gauge in `--json` stats and the server's: no speedup where the replies contradict it."""
        return {"plain_tps": self.plain_tps, "speedup": None if self.contradicted else self.speedup,
                "verdict": self.verdict(), "basis": self.basis}  # fmt: skip

    def short(self) -> str:
        """The verdict in a few words, for a status bar."""
        if self.contradicted:
            return "plain speed unknown: re-measuring"
        if self.speedup >= 1.0:
            return f"speculation saves {1 - 1 / self.speedup:.0%}"
        return f"speculation {1 - self.speedup:.0%} slower"

    def verdict(self) -> str:
        """One line: what speculation saves or costs here, and why where it costs."""
        speeds = f"{self.tps:.1f} against {self.plain_tps:.1f} tok/s plain"
        basis = f"; {self.basis}" if self.basis else ""
        if self.contradicted:
            return (
                f"no saving can be claimed: the box profile's plain pass ({self.plain_tps:.1f} tok/s{basis}) "
                f"measured {1 / self.verify_passes:.0f}x slower than this reply's own verify passes: re-measuring"
            )
        if self.speedup >= 1.0:
            return f"speculation saves {1 - 1 / self.speedup:.0%} of the time here ({speeds}{basis})"
        return (
            f"speculation is {1 - self.speedup:.0%} slower than plain decoding here ({speeds}): verifying "
            f"{self.rows:.3g} rows costs {self.verify_passes:.2f} passes and a draft step {self.step:.2f}, "
            f"so {self.acceptance:.0%} acceptance cannot pay for it"
        )


def gauge(replies: Iterable[RunStats], plain_pass_s: float | None, basis: str = "") -> Gauge | None:
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
        basis=basis,
    )
