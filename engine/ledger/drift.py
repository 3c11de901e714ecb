"""A pair's baseline acceptance per content kind, and the test that says it has fallen.

The baseline is a pair's first BASELINE_DRAFTS drafts of a kind (whole replies), with a
Wilson interval. Every later reply feeds a one-sided CUSUM on Bernoulli acceptance: the
log-likelihood ratio of "acceptance fell by FALL" against "it is the baseline's". One reply
moves the statistic by at most REPLY_CAP, so one odd prompt never raises it; the warning
stands while the statistic is past THRESHOLD. benchmarks/ledger_false_alarms.py measures
how often stable histories raise it (FALSE_ALARM_RATE) and how often a real fall does.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from engine.events import CONTENT_KINDS
from engine.ledger.store import LedgerReply, Setup

BASELINE_DRAFTS = 1000  # drafts of one kind, in whole replies, before the test starts
FALL = 0.10  # the fall the test is tuned to find
THRESHOLD = 6.0
# Drafts of one reply move together; the baseline's replies say how much, within these bounds (a
# dozen replies estimate it roughly: past 0.05 one reply would count for almost nothing).
MIN_REPLY_CORRELATION = 0.005
MAX_REPLY_CORRELATION = 0.05
REPLY_CAP = 2.5  # at least three replies in a row must lean towards the fall
EVERY_KIND = "every kind of content"  # the replies whole, whatever kinds they hold
FALSE_ALARM_RATE = 0.04  # of stable histories of 3,000 drafts whose prompts vary acceptance by 3 points (measured)


@dataclass(frozen=True, slots=True)
class Tally:
    drafted: int = 0
    accepted: int = 0

    @property
    def acceptance(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    def interval(self, z: float = 1.96) -> tuple[float, float]:
        """The Wilson score interval of the acceptance (95% by default)."""
        n = self.drafted
        if n == 0:
            return (0.0, 1.0)
        p = self.accepted / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return (max(0.0, centre - half), min(1.0, centre + half))

    def __add__(self, other: Tally) -> Tally:
        return Tally(self.drafted + other.drafted, self.accepted + other.accepted)

    def label(self) -> str:
        lo, hi = self.interval()
        return f"{self.acceptance:.0%} ({self.drafted:,} drafts, {lo:.0%}-{hi:.0%})"


@dataclass(frozen=True, slots=True)
class KindDrift:
    """One content kind of one pair: its baseline, the recent run the test looks at, and the verdict."""

    kind: str
    baseline: Tally
    recent: Tally  # the replies since the statistic last stood at zero
    statistic: float
    stale: bool
    cause: str = ""  # a sentence: what changed between the baseline and the recent replies
    changed: str = ""  # the short cause: target, drafter, runtime, sampling, depth, prompts

    def sentence(self) -> str:
        """ "Acceptance on code fell from 86% (1,240 drafts) to 63% (410 drafts) since ..." """
        head = (
            f"Acceptance on {self.kind} fell from {self.baseline.acceptance:.0%} ({self.baseline.drafted:,} drafts) "
            f"to {self.recent.acceptance:.0%} ({self.recent.drafted:,} drafts)"
        )
        return f"{head} {self.cause}"

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "baseline": {
                "drafted": self.baseline.drafted,
                "accepted": self.baseline.accepted,
                "acceptance": self.baseline.acceptance,
                "interval": list(self.baseline.interval()),
            },
            "recent": {
                "drafted": self.recent.drafted,
                "accepted": self.recent.accepted,
                "acceptance": self.recent.acceptance,
            },
            "statistic": self.statistic,
            "threshold": THRESHOLD,
            "stale": self.stale,
            "changed": self.changed,
            "warning": self.sentence() if self.stale else "",
        }


def reply_correlation(baseline: list[Tally]) -> float:
    """How much drafts of one reply move together (its prompt makes them all easy or all hard), from
    the spread of the baseline's replies (method of moments), at least MIN_REPLY_CORRELATION."""
    n = sum(t.drafted for t in baseline)
    if len(baseline) < 2 or n == 0:
        return MAX_REPLY_CORRELATION
    p = sum(t.accepted for t in baseline) / n
    if p <= 0 or p >= 1:
        return MIN_REPLY_CORRELATION
    mean_n = n / len(baseline)
    spread = sum(t.drafted * (t.acceptance - p) ** 2 for t in baseline) / (len(baseline) - 1)
    dispersion = spread / (p * (1 - p))  # 1 for independent drafts
    rho = (dispersion - 1) / (mean_n - 1) if mean_n > 1 else 0.0
    return min(max(rho, MIN_REPLY_CORRELATION), MAX_REPLY_CORRELATION)


def cusum_step(statistic: float, drafted: int, accepted: int, p0: float, rho: float) -> float:
    """The statistic after one reply: its log-likelihood ratio of a fall by FALL, capped, floored at 0.

    Drafts of one reply are not independent: the ratio is divided by the variance inflation
    1 + (n - 1) * rho (quasi-likelihood), rho the baseline's reply correlation."""
    p0 = min(max(p0, 0.02), 0.98)
    p1 = max(p0 - FALL, 0.01)
    z = accepted * math.log(p1 / p0) + (drafted - accepted) * math.log((1 - p1) / (1 - p0))
    z /= 1 + (drafted - 1) * rho
    return max(0.0, statistic + min(z, REPLY_CAP))


def drift_of_kind(replies: list[LedgerReply], kind: str) -> KindDrift | None:
    """The test over one kind's replies (oldest first); None until the baseline is complete."""
    counts = [(r, (r.drafted, r.accepted) if kind == EVERY_KIND else r.content.get(kind, (0, 0))) for r in replies]
    mine = [(r, Tally(*c)) for r, c in counts if c[0] > 0]
    i = 0
    while i < len(mine) and sum(t.drafted for _, t in mine[:i]) < BASELINE_DRAFTS:
        i += 1
    baseline = sum((t for _, t in mine[:i]), Tally())
    if baseline.drafted < BASELINE_DRAFTS:
        return None
    rho = reply_correlation([t for _, t in mine[:i]])
    before = [r.setup for r, _ in mine[:i]]
    statistic, start = 0.0, i
    for j in range(i, len(mine)):
        statistic = cusum_step(statistic, mine[j][1].drafted, mine[j][1].accepted, baseline.acceptance, rho)
        if statistic == 0.0:
            start = j + 1
    window = mine[start:]
    recent = sum((t for _, t in window), Tally())
    stale = statistic >= THRESHOLD
    changed, cause = why([r for r, _ in window], before) if stale else ("", "")
    return KindDrift(kind, baseline, recent, statistic, stale, cause, changed)


def drift(replies: list[LedgerReply]) -> list[KindDrift]:
    """Every content kind of a pair with a complete baseline, in CONTENT_KINDS order, then the replies
    whole: a target changed enough writes another kind of text, and no one kind shows the fall."""
    return [d for kind in (*CONTENT_KINDS, EVERY_KIND) if (d := drift_of_kind(replies, kind)) is not None]


def _day(at: float) -> str:
    t = time.localtime(at)
    return f"{t.tm_mday} {time.strftime('%b', t)}"


def why(recent: list[LedgerReply], before: list[Setup]) -> tuple[str, str]:
    """The likely cause, from what differs between the recent replies' setups and the baseline's."""

    def first_new(field: str) -> LedgerReply | None:
        old = {getattr(s, field) for s in before}
        return next((r for r in recent if getattr(r.setup, field) not in old), None)

    if r := first_new("target_fingerprint"):
        return "target", (
            f"since the target's file changed on {_day(r.at)}: this drafter was measured against the earlier file."
        )
    if r := first_new("drafter_fingerprint"):
        return (
            "drafter",
            f"since the drafter's file changed on {_day(r.at)}: its new file drafts worse for this target.",
        )
    for field, words in (("runtime", "the runtime"), ("draftlight", "Draftlight")):
        if r := first_new(field):
            was = ", ".join(sorted({getattr(s, field) for s in before}))
            return "runtime", f"since {words} changed on {_day(r.at)} ({was} to {getattr(r.setup, field)})."
    if r := first_new("sampling"):
        was = ", ".join(sorted({s.sampling for s in before}))
        return (
            "sampling",
            f"since the sampling changed ({was} to {r.setup.sampling}): sampled drafts are kept less often.",
        )
    if r := first_new("depth"):
        was = ", ".join(sorted({s.depth for s in before}))
        return "depth", f"since the depth changed ({was} to {r.setup.depth}): deeper drafts are kept less often."
    return "prompts", (
        "with the same files, runtime and sampling: your prompts changed; the figures by content kind show which."
    )
