"""A pair's baseline acceptance per content kind, and the test that says it has fallen.

The baseline is a pair's first BASELINE_DRAFTS drafts of a kind (whole replies), with a
Wilson interval, and how much its replies' acceptance varies from prompt to prompt (at least
PROMPT_SPREAD). Later replies are weighed against it by a z-test on a group of replies whose
variance is the binomial one plus the prompt spread per reply, plus the baseline's own. Each
reply counts for at most REPLY_CAP standard deviations and a group holds two replies at least,
so one odd prompt never raises it alone. Two groups:

- the replies since the setup first differed from the baseline's (target or drafter file,
  runtime, Draftlight, sampling, depth), where a stale drafter shows: judged once, when they
  hold CHANGE_DRAFTS drafts, so one look and a low bar (CHANGE_THRESHOLD); once raised, the
  warning stands until those replies as a whole climb back over that bar;
- the latest replies, up to WINDOW_DRAFTS drafts, looked at after every reply whatever the setup:
  a fall with no change (the prompts changed) could start anywhere, so a high bar (THRESHOLD).

benchmarks/ledger_false_alarms.py measures how often stable histories raise it
(FALSE_ALARM_RATE) and how often a real fall does (docs/ledger.md has the table).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from engine.events import CONTENT_KINDS
from engine.ledger.store import LedgerReply, Setup

BASELINE_DRAFTS = 3000  # drafts of one kind, in whole replies, before the test starts
FALL = 0.10  # the fall the test is tuned to find within 300 drafts
PROMPT_SPREAD = 0.03  # the least prompt-to-prompt standard deviation of a reply's acceptance assumed
REPLY_CAP = 3.0  # standard deviations one reply counts for at most
WINDOW_DRAFTS = 600  # the latest replies the test looks at whatever the setup (at least two replies)
THRESHOLD = 3.6  # z of the latest replies
CHANGE_THRESHOLD = 1.8  # z of the first CHANGE_DRAFTS drafts since the setup changed
CHANGE_DRAFTS = 300  # the replies since a change are judged once they hold this many drafts
EVERY_KIND = "every kind of content"  # the replies whole, whatever kinds they hold
# Of stable histories of 3,000 drafts (a change of setup or none) whose prompts move acceptance by 3 points: measured.
FALSE_ALARM_RATE = 0.04


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
    statistic: float  # z: how many standard deviations below the baseline the recent replies are
    stale: bool
    cause: str = ""  # a sentence: what changed between the baseline and the recent replies
    changed: str = ""  # the short cause: target, drafter, runtime, sampling, depth, prompts
    threshold: float = THRESHOLD  # the bar of the group looked at: CHANGE_THRESHOLD since a change

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
            "threshold": self.threshold,
            "stale": self.stale,
            "changed": self.changed,
            "warning": self.sentence() if self.stale else "",
        }


def prompt_spread(replies: list[Tally]) -> float:
    """The prompt-to-prompt standard deviation of the replies' acceptance (method of moments: their
    spread less the binomial part), at least PROMPT_SPREAD."""
    n = sum(t.drafted for t in replies)
    if len(replies) < 2 or n == 0:
        return PROMPT_SPREAD
    p = sum(t.accepted for t in replies) / n
    spread = sum((t.acceptance - p) ** 2 for t in replies) / (len(replies) - 1)
    binomial = p * (1 - p) * sum(1 / t.drafted for t in replies) / len(replies)
    return max(math.sqrt(max(spread - binomial, 0.0)), PROMPT_SPREAD)


class DriftTest:
    """The test over one kind's replies after the baseline, fed one reply at a time (oldest first)."""

    def __init__(self, baseline: list[Tally]) -> None:
        total = sum(baseline, Tally())
        self.baseline = total
        self.p0 = min(max(total.acceptance, 0.02), 0.98)
        self.spread = prompt_spread(baseline)
        self.baseline_variance = sum(t.drafted**2 * self._variance(t) for t in baseline) / total.drafted**2
        self.replies: list[Tally] = []
        self.deviations: list[tuple[float, float]] = []  # per reply: capped z, its standard deviation
        self.change_at: int | None = None  # the first reply whose setup the baseline never had
        self._judged = False  # the replies since the change: judged once they hold CHANGE_DRAFTS drafts
        self.raised = False  # whether they had fallen then

    def _variance(self, reply: Tally) -> float:
        return self.p0 * (1 - self.p0) / reply.drafted + self.spread**2

    def add(self, reply: Tally, new_setup: bool = False) -> None:
        sd = math.sqrt(self._variance(reply))
        z = (self.p0 - reply.acceptance) / sd
        self.replies.append(reply)
        self.deviations.append((min(max(z, -REPLY_CAP), REPLY_CAP), sd))
        if new_setup and self.change_at is None:
            self.change_at = len(self.replies) - 1
        if self.change_at is not None and not self._judged:
            group = self.replies[self.change_at :]
            if len(group) >= 2 and sum(t.drafted for t in group) >= CHANGE_DRAFTS:
                self._judged, self.raised = True, self.z(self.change_at) >= CHANGE_THRESHOLD

    def _z(self, weight: float, weighted: float) -> float:
        fall = weighted / weight
        return fall / math.sqrt(1 / weight + self.baseline_variance)

    def z(self, start: int) -> float:
        """How far the replies from `start` on fall below the baseline, in standard deviations of the
        difference: their fall estimated with each reply's z capped, over its variance plus the baseline's."""
        group = self.deviations[start:]
        return self._z(sum(1 / sd**2 for _, sd in group), sum(z / sd for z, sd in group))

    def latest(self) -> tuple[float, int]:
        """The z of the latest replies (at least two, up to WINDOW_DRAFTS drafts) and where they start."""
        n = len(self.replies)
        best, start, drafts, weight, weighted = 0.0, n, 0, 0.0, 0.0
        for i in range(n - 1, -1, -1):
            drafts += self.replies[i].drafted
            if drafts > WINDOW_DRAFTS and i < n - 2:
                break
            z, sd = self.deviations[i]
            weight, weighted = weight + 1 / sd**2, weighted + z / sd
            if i > n - 2:
                continue
            found = self._z(weight, weighted)
            if start == n or found > best:
                best, start = found, i
        return best, start

    def since_change(self) -> float:
        """The z of every reply since the setup changed, once the first CHANGE_DRAFTS of them fell past
        CHANGE_THRESHOLD: judged that once (one look, so its bar is low), it stands until they recover."""
        return self.z(self.change_at) if self.raised and self.change_at is not None else 0.0

    def verdict(self) -> tuple[float, float, int]:
        """The group whose z stands highest against its bar: (z, its bar, where it starts)."""
        latest, start = self.latest()
        changed = self.since_change()
        if self.raised and self.change_at is not None and changed / CHANGE_THRESHOLD >= latest / THRESHOLD:
            return changed, CHANGE_THRESHOLD, self.change_at
        return latest, THRESHOLD, start


def drift_of_kind(replies: list[LedgerReply], kind: str) -> KindDrift | None:
    """The test over one kind's replies (oldest first); None until the baseline is complete."""
    counts = [(r, (r.drafted, r.accepted) if kind == EVERY_KIND else r.content.get(kind, (0, 0))) for r in replies]
    mine = [(r, Tally(*c)) for r, c in counts if c[0] > 0]
    i = 0
    while i < len(mine) and sum(t.drafted for _, t in mine[:i]) < BASELINE_DRAFTS:
        i += 1
    if sum(t.drafted for _, t in mine[:i]) < BASELINE_DRAFTS:
        return None
    test = DriftTest([t for _, t in mine[:i]])
    before = [r.setup for r, _ in mine[:i]]
    seen = set(before)
    for r, t in mine[i:]:
        test.add(t, new_setup=r.setup not in seen)
    statistic, threshold, start = test.verdict()
    window = mine[i + start :]
    recent = sum((t for _, t in window), Tally())
    stale = statistic >= threshold
    changed, cause = why([r for r, _ in window], before) if stale else ("", "")
    return KindDrift(kind, test.baseline, recent, max(statistic, 0.0), stale, cause, changed, threshold)


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
