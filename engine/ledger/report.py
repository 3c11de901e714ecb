"""What the ledger says of a pair: its baseline and drift per content kind, the warning in words,
and its history over time with each change of fingerprint marked. `draftlight pair`, `draftlight
ledger`, `chat --json` and the app read it here."""

from __future__ import annotations

import csv
import io
import itertools
import json
import time
from dataclasses import dataclass
from pathlib import Path

from engine.events import CONTENT_KINDS
from engine.ledger import recording
from engine.ledger.drift import EVERY_KIND, KindDrift, Tally, drift
from engine.ledger.store import Ledger, LedgerReply, Setup

# What a change of setup is called in the history: field, words.
CHANGES = (
    ("target_fingerprint", "target file changed"),
    ("drafter_fingerprint", "drafter file changed"),
    ("runtime", "runtime changed"),
    ("draftlight", "Draftlight changed"),
    ("sampling", "sampling changed"),
)


@dataclass(frozen=True, slots=True)
class HistoryRow:
    """A day of one setup: its replies and acceptance per content kind, and what changed at its start."""

    day: str  # "2026-12-03"
    replies: int
    by_kind: dict[str, Tally]
    changed: tuple[str, ...] = ()  # words from CHANGES, for the first row after a change

    def to_json(self) -> dict:
        return {
            "day": self.day,
            "replies": self.replies,
            "changed": list(self.changed),
            "by_kind": {k: {"drafted": t.drafted, "accepted": t.accepted, "acceptance": t.acceptance}
                        for k, t in self.by_kind.items()},
        }  # fmt: skip


@dataclass(frozen=True, slots=True)
class PairLedger:
    """One pair (by names) in the ledger: its replies' history and the drift test's verdicts."""

    target: str
    drafter: str
    replies: int
    drift: tuple[KindDrift, ...]
    history: tuple[HistoryRow, ...]

    def stale(self) -> list[KindDrift]:
        """The kinds that fell; the replies whole only where no one kind shows the fall."""
        stale = [d for d in self.drift if d.stale]
        return [d for d in stale if d.kind != EVERY_KIND] or stale

    @property
    def warnings(self) -> list[str]:
        return [d.sentence() for d in self.stale()]

    def status(self) -> str:
        """One sentence: the warning, the baselines, or how far from a baseline the pair is."""
        if self.warnings:
            return " ".join(self.warnings)
        if not self.replies:
            return "No replies of this pair are in the acceptance ledger yet."
        if not self.drift:
            return (
                f"{_replies(self.replies)} of this pair in the ledger; a baseline needs more drafts of one kind "
                "of content before acceptance can be watched."
            )
        said = ", ".join(f"{d.kind} {d.baseline.label()}" for d in self.drift)
        return f"Acceptance holds against its baseline: {said}."

    def brief(self) -> dict:
        """What a reply's stats carry (`chat --json`, `serve`): the status sentence and any warnings."""
        return {"status": self.status(), "warnings": self.warnings}

    def notice(self) -> str:
        """The warning for the app's notice line: its first sentence on the line, the rest behind "why?"."""
        stale = self.stale()
        if not stale:
            return ""
        figures = "; ".join(
            f"{d.kind} {d.baseline.label()} at first, {d.recent.acceptance:.0%} ({d.recent.drafted:,} drafts) lately"
            for d in stale
        )
        return (
            f"{' '.join(d.sentence() for d in stale)} The acceptance ledger's figures: {figures}. Check the pair "
            "again in the pairing doctor or choose a drafter made for this target; Tools → Acceptance ledger → "
            "Clear forgets the old figures."
        )

    def history_lines(self) -> list[str]:
        kinds = [k for k in CONTENT_KINDS if any(k in row.by_kind for row in self.history)]
        out = [f"{'day':10} {'replies':>7}  " + "  ".join(f"{k:>15}" for k in kinds) + "  changed"]
        for row in self.history:
            cells = []
            for k in kinds:
                t = row.by_kind.get(k)
                cells.append(f"{t.acceptance:4.0%} ({t.drafted:>6,})" if t else f"{'-':>15}")
            mark = ("<- " + ", ".join(row.changed)) if row.changed else ""
            out.append(f"{row.day:10} {row.replies:>7}  " + "  ".join(f"{c:>15}" for c in cells) + f"  {mark}")
        return out

    def lines(self, with_history: bool = False) -> list[str]:
        out = [f"Ledger: {self.status()}"]
        for d in self.drift:
            lo, hi = d.baseline.interval()
            out.append(
                f"  {d.kind:9} baseline {d.baseline.acceptance:.0%} ({d.baseline.drafted:,} drafts, 95% {lo:.0%}-{hi:.0%})"
                f", recent {d.recent.acceptance:.0%} ({d.recent.drafted:,} drafts)" + (", STALE" if d.stale else "")
            )
        if with_history and self.history:
            out += [
                "History (acceptance by content kind, drafts in brackets):",
                *(f"  {x}" for x in self.history_lines()),
            ]
        return out

    def to_json(self) -> dict:
        return {
            "target": self.target,
            "drafter": self.drafter,
            "replies": self.replies,
            "status": self.status(),
            "warnings": self.warnings,
            "drift": [d.to_json() for d in self.drift],
            "history": [row.to_json() for row in self.history],
        }


def _replies(n: int) -> str:
    return f"{n:,} reply" if n == 1 else f"{n:,} replies"


def _changes(old: Setup, new: Setup) -> tuple[str, ...]:
    return tuple(words for field, words in CHANGES if getattr(old, field) != getattr(new, field))


def history(replies: list[LedgerReply]) -> list[HistoryRow]:
    """A row per day and setup (by fingerprints, runtime and sampling), oldest first."""
    rows: list[HistoryRow] = []
    last: Setup | None = None
    key: tuple[str, tuple[object, ...]] | None = None
    for r in replies:
        day = time.strftime("%Y-%m-%d", time.localtime(r.at))
        fingerprint = tuple(getattr(r.setup, f) for f, _ in CHANGES)
        if (day, fingerprint) != key:
            changed = _changes(last, r.setup) if last is not None and key is not None and fingerprint != key[1] else ()
            rows.append(HistoryRow(day, 0, {}, changed))
            key = (day, fingerprint)
        row = rows[-1]
        by_kind = dict(row.by_kind)
        for kind, (d, a) in r.content.items():
            by_kind[kind] = by_kind.get(kind, Tally()) + Tally(d, a)
        rows[-1] = HistoryRow(row.day, row.replies + 1, by_kind, row.changed)
        last = r.setup
    return rows


def pair_ledger(book: Ledger, target: str, drafter: str) -> PairLedger:
    replies = book.replies((target, drafter))
    return PairLedger(target, drafter, len(replies), tuple(drift(replies)), tuple(history(replies)))


RECENT_DRAFTS = 2000  # the most recent drafts Auto starts from
MIN_RECENT_DRAFTS = 200  # fewer say too little: Auto keeps the profile's calibration


def recent_acceptance(replies: list[LedgerReply], target_fingerprint: str, drafter_fingerprint: str) -> list[float]:
    """Conditional acceptance per position over the latest replies of these very files (newest
    RECENT_DRAFTS drafts), as Auto's starting point; [] where the ledger holds too few.

    From per-position totals: the rate at i over the rate at i - 1, which is the conditional
    acceptance where how deep a round drafts does not depend on whether its drafts are kept."""
    drafted: list[int] = []
    accepted: list[int] = []
    for r in reversed(replies):
        if (r.setup.target_fingerprint, r.setup.drafter_fingerprint) != (target_fingerprint, drafter_fingerprint):
            continue
        for i, (d, a) in enumerate(zip(r.drafted_per_position, r.accepted_per_position)):
            if i == len(drafted):
                drafted.append(0)
                accepted.append(0)
            drafted[i] += d
            accepted[i] += a
        if sum(drafted) >= RECENT_DRAFTS:
            break
    if sum(drafted) < MIN_RECENT_DRAFTS:
        return []
    rates = [a / d for a, d in zip(accepted, drafted) if d]
    return [rates[0]] + [min(1.0, b / a) if a > 0 else 0.0 for a, b in itertools.pairwise(rates)]


CSV_FIELDS = (
    "at", "source", "target", "drafter", "drafter_kind", "target_fingerprint", "drafter_fingerprint", "runtime",
    "draftlight", "sampling", "depth", "kind", "drafted", "accepted",
)  # fmt: skip


def export_csv(book: Ledger) -> str:
    """Every reply, a row per content kind (kind "all": the reply's total)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_FIELDS)
    for r in book.replies():
        s = r.setup
        head = [time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(r.at)), r.source, s.target, s.drafter,
                s.drafter_kind, s.target_fingerprint, s.drafter_fingerprint, s.runtime, s.draftlight, s.sampling,
                s.depth]  # fmt: skip
        writer.writerow([*head, "all", r.drafted, r.accepted])
        for kind, (d, a) in r.content.items():
            writer.writerow([*head, kind, d, a])
    return out.getvalue()


def export_json(book: Ledger) -> str:
    """Every reply with its setup, per position and per content kind."""
    rows = [
        {
            "at": r.at,
            "source": r.source,
            "setup": {f: getattr(r.setup, f) for f in r.setup.__dataclass_fields__},
            "drafted": r.drafted,
            "accepted": r.accepted,
            "drafted_per_position": list(r.drafted_per_position),
            "accepted_per_position": list(r.accepted_per_position),
            "by_content": {k: {"drafted": d, "accepted": a} for k, (d, a) in r.content.items()},
        }
        for r in book.replies()
    ]
    return json.dumps({"replies": rows}, ensure_ascii=False, indent=1)


def for_pair(target: Path, drafter: Path | None, kind: str, book: Ledger | None = None) -> PairLedger | None:
    """The ledger's view of a pair by its files (a drafter with no file by its kind); None where the
    ledger is turned off."""
    book = book or recording.ledger()
    if book is None:
        return None
    return pair_ledger(book, Path(target).name, Path(drafter).name if drafter is not None else kind)
