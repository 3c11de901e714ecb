"""Whether a box profile can be trusted: the spread of its figures, the machine's load while it
was measured, and what physics allows (a pass over more rows never costs less than one over
fewer; a drafter step no slower than the target's pass; no part slower than the whole it is part
of). A profile that fails is measured again, up to ATTEMPTS times in all, and if the last fails
too it is not saved: Auto runs plain, measures again RETRY_AFTER_S later, and keeps the first that passes.

Measured on this box: another llama.cpp process decoding on the same two cores slowed some
passes by 10x (two spinning thread pools), and a profile saved then priced a 1-row pass at
2.87 s against 0.28 s for two rows: every later reply trusted it.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from engine.errors import DraftlightError

if TYPE_CHECKING:
    from engine.depth import RoundSeconds
    from engine.events import RunStats
    from engine.measure.costmodel import BoxProfile

MAX_SPREAD = 0.5  # a figure whose repeats vary more than this (interquartile range over median) is not kept
MAX_OTHER_CPU = 0.5  # other processes' share of every core while measuring, beyond which nothing is kept
SLACK = 0.10  # timing noise a physical check forgives, on top of the figures' own spread
# A 1-row pass timed on its own against a reply's whole plain round: two contexts, two moments.
# Measured on this box with SmolLM2-135M, the pass came to 1.09-1.24x the round (about 1 ms of
# host work either way); the check is there for an order of magnitude, as in the profile above.
ACROSS_CONTEXTS = 0.5
# Measured on this box with two other processes spinning on both cores: the MLX window's first-run
# measurement (passes of about 1 ms, preempted now and then) failed a physical check in 5 of 15
# attempts, twice in a row in 1 of 11 runs. Each attempt's noise is its own; a pass slowed every
# time, as by the second thread pool above, fails every attempt alike and is still refused.
ATTEMPTS = 3
RETRY_AFTER_S = 600.0  # after a refusal, Auto runs plain this long before measuring again
DISAGREEMENT = 2.0  # a reply's own passes this many times off the profile's (beyond its spread): stale


class ProfileRefused(DraftlightError):
    """A box profile that could not be measured soundly; the message says why and when it is retried."""


@dataclass(frozen=True)
class MachineLoad:
    """What else the machine was doing while a profile was measured."""

    other_cpu: float | None  # other processes' share of all cores, 0..1; None where /proc is not there
    thermal: str  # the thermal state's name ("nominal", ..., "unknown")

    def describe(self) -> str:
        cpu = "other processes' CPU not read" if self.other_cpu is None else f"other processes {self.other_cpu:.0%}"
        return f"{cpu} of the CPU, thermal {self.thermal}"


def _cpu_ticks() -> tuple[int, int] | None:
    """(busy, total) clock ticks of all cores since boot, from /proc/stat."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle and iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


def _own_ticks() -> int | None:
    """This process's user and system ticks, its threads included (llama.cpp's pool among them)."""
    try:
        after_name = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(after_name[11]) + int(after_name[12])  # utime, stime (fields 14 and 15)


class LoadMeter:
    """Other processes' CPU between `start` and `read`: all busy ticks less this process's own."""

    def __init__(self) -> None:
        self._start = (_cpu_ticks(), _own_ticks())

    def read(self) -> MachineLoad:
        from engine.measure.thermal import read_thermal

        (cpu0, own0), cpu1, own1 = self._start, _cpu_ticks(), _own_ticks()
        other = None
        if cpu0 and cpu1 and own0 is not None and own1 is not None and cpu1[1] > cpu0[1]:
            other = max(0.0, ((cpu1[0] - cpu0[0]) - (own1 - own0)) / (cpu1[1] - cpu0[1]))
        try:
            thermal = read_thermal().state.value
        except Exception:  # a sensor's oddity must not cost the measurement
            thermal = "unknown"
        return MachineLoad(other, thermal)


def spread(samples: list[float]) -> float:
    """How much repeats of one figure vary: their interquartile range over their median."""
    if len(samples) < 2:
        return 0.0
    median = statistics.median(samples)
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return (q3 - q1) / median if median > 0 else 0.0


def impossible(rows_s: list[float], step_s: float, tolerance: float, plain_round_s: float | None = None) -> str:
    """What in these figures physics rules out, in a sentence; "" where nothing is.

    `rows_s`: target passes of 1, 2, ... rows; `step_s`: a drafter step (0 where none is timed);
    `plain_round_s`: a whole plain round of a real reply, which contains a 1-row pass."""
    give = 1.0 + SLACK + tolerance
    for more in range(1, len(rows_s)):
        for fewer in range(more):
            if rows_s[more] * give < rows_s[fewer]:
                return (
                    f"a target pass of {more + 1} rows measured {rows_s[more] * 1e3:.1f} ms, less than one of "
                    f"{fewer + 1} rows ({rows_s[fewer] * 1e3:.1f} ms)"
                )
    shape = rows_s[min(1, len(rows_s) - 1)]  # a drafter step decodes one or two rows
    if step_s > shape * give:
        return (
            f"a drafter step measured {step_s * 1e3:.1f} ms, slower than the target's pass of "
            f"{min(2, len(rows_s))} rows ({shape * 1e3:.1f} ms)"
        )
    if plain_round_s and rows_s[0] > plain_round_s * (give + ACROSS_CONTEXTS):
        return (
            f"a 1-row target pass measured {rows_s[0] * 1e3:.1f} ms, slower than a whole plain round of a "
            f"real reply ({plain_round_s * 1e3:.1f} ms)"
        )
    return ""


def problem_of(profile: BoxProfile) -> str:
    """Why a measured profile cannot be kept, in the user's words; "" where it can."""
    problem = impossible(profile.target_rows_s, profile.drafter_step_s, profile.spread, profile.plain_round_s)
    if not problem and profile.spread > MAX_SPREAD:
        problem = f"its repeats varied by ±{profile.spread / 2:.0%}"
    if not problem and profile.other_cpu is not None and profile.other_cpu > MAX_OTHER_CPU:
        problem = f"other processes used {profile.other_cpu:.0%} of the CPU meanwhile"
    if not problem and profile.thermal in ("serious", "critical"):
        problem = f"the machine was throttling (thermal {profile.thermal})"
    if problem and profile.other_cpu is not None and "other processes" not in problem:
        problem += f" while other processes used {profile.other_cpu:.0%} of the CPU"
    return problem


def disagreement(profile_s: float, measured_s: float, spread: float, judge_faster_only: bool = False) -> str:
    """How a profile's figure compares with the same figure measured in a reply, where the two differ
    beyond the profile's spread ("measured 6x slower than this reply"); "" where they agree."""
    if profile_s <= 0 or measured_s <= 0:
        return ""
    ratio, allowed = profile_s / measured_s, DISAGREEMENT * (1 + spread)
    if ratio > allowed:
        return f"measured {ratio:.0f}x slower than this reply"
    if ratio * allowed < 1 and not judge_faster_only:
        return f"measured {1 / ratio:.0f}x faster than this reply"
    return ""


MIN_ROUNDS = 4  # a reply's figures judged from fewer rounds than this say too little


def reply_disagrees(profile: BoxProfile, stats: RunStats) -> str:
    """Where a finished reply's own passes contradict its profile: its plain rounds against the profile's
    plain round; a drafting reply's verify passes against the profile's pass of as many rows, in the one
    direction physics settles (a verify that also feeds a drafter may run slower than priced, never faster)."""
    if stats.rounds < MIN_ROUNDS or stats.decode_s <= 0:
        return ""
    if not stats.drafted:
        return disagreement(profile.plain_pass_s, stats.decode_s / stats.rounds, profile.spread)
    rows = min(round(1 + stats.drafted / stats.rounds), len(profile.target_rows_s))
    return disagreement(profile.target_rows_s[rows - 1], stats.verify_s / stats.rounds, profile.spread, True)


def rounds_disagree(profile: BoxProfile, rounds: list[tuple[int, RoundSeconds]]) -> str:
    """The same, from a reply's rounds so far (drafted, seconds): Auto's check while the reply runs."""
    plain = [s.draft + s.verify + s.commit for drafted, s in rounds if not drafted]
    if len(plain) >= MIN_ROUNDS:
        return disagreement(profile.plain_pass_s, statistics.median(plain), profile.spread)
    # A drafting round priced as the profile prices it, every step taken: a drafter whose costs show
    # only in its rounds (priced free) may run slower than that, never much faster.
    drafting = [(d, s.draft + s.verify + s.commit) for d, s in rounds if d and d < len(profile.target_rows_s)]
    if len(drafting) < MIN_ROUNDS:
        return ""
    ratio = statistics.median(profile.round_cost_s(d) / seconds for d, seconds in drafting if seconds > 0)
    return disagreement(ratio, 1.0, profile.spread, True)


def refusal(problem: str) -> str:
    """The sentence a person reads when a profile is not saved."""
    minutes = RETRY_AFTER_S / 60
    return (
        f"The box profile was not saved: {problem}. Replies at Auto depth run plain until it is measured again, "
        f"in {minutes:.0f} minutes or by `draftlight tune`; close other busy programs first."
    )


def _refused_marker(profile_file: Path) -> Path:
    return profile_file.with_suffix(".refused")


def note_refusal(profile_file: Path, sentence: str) -> None:
    """Remember a refusal beside where the profile would be, so the next reply does not measure at once."""
    marker = _refused_marker(profile_file)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(sentence)


def recent_refusal(profile_file: Path) -> str:
    """The sentence of a refusal younger than RETRY_AFTER_S; "" where there is none."""
    marker = _refused_marker(profile_file)
    try:
        if time.time() - marker.stat().st_mtime < RETRY_AFTER_S:
            return marker.read_text()
        marker.unlink()
    except OSError:
        pass
    return ""
