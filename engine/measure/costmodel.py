"""The cost model: one definition of a round's cost, its acceptance, and the best depth.

Acceptance is a property of the text; the cost of a row is a property of the box. A
profile measures the second once per machine, model pair and runtime (engine.measure.profile);
the conversation supplies the first, round by round. Expected tokens per round at depth k
are E_k = 1 + sum_{j<=k} prod_{i<=j} a_i (a_i: acceptance at position i given i-1 was
accepted); the round costs C_k = catch-up + k draft steps + a target pass of k+1 rows +
overhead, less a step for each round that begins from a guess that came true (a draft model
that guesses each verify's outcome: a share prod_{i<=k+1} a_i of the rounds). The best depth
has the most tokens per second, E_k / C_k, depth 0 included.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from engine.depth import MAX_DEPTH
from engine.events import RunStats

# 5: the rollback timed, a draft model's step at the shape it runs; 6: GPU rows at a steady shape; 7: guesses;
# 8: spread, load and a plain round recorded, and checked (engine.measure.soundness)
PROFILE_VERSION = 8


@dataclass
class BoxProfile:
    """What a round costs on this machine for this pair, in seconds."""

    key: str
    machine: str
    target: str
    drafter: str
    runtime: str
    mode: str
    threads: int
    target_rows_s: list[float]  # target pass of 1, 2, ... rows
    drafter_step_s: float  # one drafter decode of one token
    overhead_s: float  # the rest of a round: sampling, bookkeeping, rewinds
    acceptance_prior: list[float]  # conditional acceptance per position, from the calibration prompts
    # A round's first draft step also feeds the drafter what the last round committed (the
    # target's token, and the last draft after a full acceptance): its extra cost, in situ.
    drafter_catch_up_s: float = 0.0
    # Undoing a rejected draft on the target (dropping KV cells; restoring a recurrent-state
    # snapshot on a hybrid target), timed after a full verify batch. Calibrated rounds already
    # count it in overhead_s; it is kept apart to say what a rollback costs here.
    rollback_s: float = 0.0
    # The draft model guesses each verify's outcome (RuntimeOptions.guess_outcome): a round whose
    # round before kept every draft and whose target chose the guess takes one step fewer.
    drafter_guesses: bool = False
    measured_at: float = field(default_factory=time.time)
    version: int = PROFILE_VERSION
    # How far it can be trusted: the widest spread of any figure's repeats, the 1-row pass's own,
    # a whole plain round of a real reply (which holds a 1-row pass), and the machine's load then.
    spread: float = 0.0
    plain_spread: float = 0.0
    plain_round_s: float = 0.0
    other_cpu: float | None = None
    thermal: str = "unknown"

    def basis(self) -> str:
        """What the verdict rests on, in words: "plain 31.2 tok/s ±3%, measured today"."""
        return f"plain {1 / self.plain_pass_s:.1f} tok/s ±{self.plain_spread / 2:.0%}, {describe_age(self.measured_at)}"

    @property
    def plain_pass_s(self) -> float:
        """One plain round: a target pass of one row and the round's overhead, no drafting."""
        return self.round_cost_s(0)

    @property
    def max_depth(self) -> int:
        """The deepest round this profile prices: its largest measured batch, less one."""
        return min(MAX_DEPTH, len(self.target_rows_s) - 1)

    def rows_in_passes(self, rows: int) -> float:
        return self.target_rows_s[rows - 1] / self.target_rows_s[0]

    def round_cost_s(
        self, depth: int, drafter_step_s: float | None = None, acceptance: list[float] | None = None
    ) -> float:
        """C_k in seconds; with `acceptance`, less the steps that guesses which came true save."""
        step = self.drafter_step_s if drafter_step_s is None else drafter_step_s
        catch_up = self.drafter_catch_up_s if depth and step else 0.0
        steps = depth - (guessed_share(acceptance, depth) if self.drafter_guesses and depth and acceptance else 0.0)
        return catch_up + steps * step + self.target_rows_s[depth] + self.overhead_s

    def table(self) -> str:
        one = self.target_rows_s[0]
        lines = ["rows  target pass  in plain passes"]
        for i, t in enumerate(self.target_rows_s, 1):
            lines.append(f"{i:4}  {t * 1e3:8.1f} ms  {t / one:6.2f}")
        lines.append(
            f"drafter step {self.drafter_step_s * 1e3:.1f} ms = {self.drafter_step_s / one:.2f} of a target pass"
        )
        lines.append(f"drafter catch-up at a round's start {self.drafter_catch_up_s * 1e3:.1f} ms")
        if self.drafter_guesses:
            lines.append("the drafter guesses each verify's outcome: a round after a right guess takes a step fewer")
        lines.append(f"round overhead (accept walk, rewinds) {self.overhead_s * 1e3:.2f} ms")
        lines.append(f"undoing a rejected draft {self.rollback_s * 1e3:.2f} ms = {self.rollback_s / one:.3f} of a pass")
        lines.append("calibration acceptance per position: " + " ".join(f"{a:.0%}" for a in self.acceptance_prior))
        return "\n".join(lines)


def describe_age(measured_at: float, now: float | None = None) -> str:
    """When a profile was measured, in words: "measured today", "measured 3 days ago"."""
    today = datetime.date.fromtimestamp(time.time() if now is None else now)
    days = (today - datetime.date.fromtimestamp(measured_at)).days
    return "measured today" if days <= 0 else "measured yesterday" if days == 1 else f"measured {days} days ago"


def reached_and_kept(rounds: Iterable[tuple[int, int]], depth: int) -> list[tuple[int, int]]:
    """Per position: rounds whose walk reached that draft (every draft before it kept), and kept it."""
    counts = [[0, 0] for _ in range(depth)]
    for drafted, accepted in rounds:
        for i in range(min(drafted, accepted + 1, depth)):
            counts[i][0] += 1
            if accepted > i:
                counts[i][1] += 1
    return [(reached, kept) for reached, kept in counts]


def conditional_acceptance(
    rounds: Iterable[tuple[int, int]], depth: int, prior: list[float] | None = None, pull: float = 0.0
) -> list[float]:
    """Acceptance at each position given the one before was accepted, from (drafted, accepted) pairs.

    With a prior, each estimate is pulled towards it as if `pull` rounds had agreed with it.
    A position no round reached borrows the estimate of the position before it: drafts
    deeper than the rounds went are judged by the text seen so far.
    """
    rounds = list(rounds)
    out: list[float] = []
    for i, (reached, kept) in enumerate(reached_and_kept(rounds, depth)):
        p = prior[min(i, len(prior) - 1)] if prior else 0.0
        if reached == 0 and out and rounds:
            out.append(out[-1])
        else:
            out.append((kept + pull * p) / (reached + pull) if reached + pull else p)
    return out


def measured_acceptance(rounds: Iterable[tuple[int, int]], depth: int) -> list[float | None]:
    """Conditional acceptance per position where some round reached it; None where none did."""
    return [kept / reached if reached else None for reached, kept in reached_and_kept(rounds, depth)]


def expected_tokens(acceptance: list[float], depth: int) -> float:
    """E_k: 1 + sum over j <= k of the product of conditional acceptances up to j."""
    total, run = 1.0, 1.0
    for a in acceptance[:depth]:
        run *= a
        total += run
    return total


def guessed_share(acceptance: list[float], depth: int) -> float:
    """The share of rounds at `depth` that begin from a guess that came true: the round before kept
    its drafts and the target's token was the drafter's next choice, as if one more draft had been
    kept (the deepest position measured stands in for one past it)."""
    share = 1.0
    for i in range(depth + 1):
        share *= acceptance[min(i, len(acceptance) - 1)]
    return share


def best_depth(
    profile: BoxProfile, acceptance: list[float], drafter_step_s: float | None = None, max_depth: int = MAX_DEPTH
) -> tuple[int, list[float]]:
    """The depth with the most tokens per second, and tokens/s at each depth (0..max)."""
    max_depth = min(max_depth, profile.max_depth, len(acceptance))
    rates = [
        expected_tokens(acceptance, k) / profile.round_cost_s(k, drafter_step_s, acceptance)
        for k in range(max_depth + 1)
    ]
    return max(range(len(rates)), key=rates.__getitem__), rates


def best_if_always_right(profile: BoxProfile) -> tuple[int, float]:
    """The best depth if every draft were accepted, and its speed over plain decoding: the
    most speculation could give on this box with this pair, whatever the text."""
    best, rates = best_depth(profile, [1.0] * profile.max_depth)
    return best, rates[best] / rates[0]


def speculation_pays(profile: BoxProfile) -> bool:
    """Whether some depth beats plain decoding here, at least for text the drafter always gets right."""
    best, speedup = best_if_always_right(profile)
    return best > 0 and speedup > 1.0


def why_plain(profile: BoxProfile) -> str:
    """Why replies run plain on this box, in its own numbers."""
    one = profile.target_rows_s[0]
    c1 = profile.round_cost_s(1, acceptance=[1.0]) / profile.round_cost_s(0)  # every guess right, too
    return (  # the first sentence is the headline the app shows; the rest is the arithmetic behind it
        f"Speculation cannot pay on this machine: a round with one draft costs {c1:.2f} plain passes "
        f"and yields at most 2 tokens. With {profile.drafter}, the target's 2-row verify pass costs "
        f"{profile.rows_in_passes(2):.2f} passes here and the drafter's step {profile.drafter_step_s / one:.2f}; "
        "even a drafter that was always right would be slower than no drafter at any depth. So replies run "
        "plain, with llama.cpp's fastest settings (repacked weights, f16 cache), and no drafter is loaded."
    )


def explain(profile: BoxProfile, depth: int, acceptance: list[float], drafter_step_s: float | None = None) -> str:
    """One line a person can act on: why this depth, in this box's numbers."""
    rows2 = profile.rows_in_passes(2)
    step = profile.drafter_step_s if drafter_step_s is None else drafter_step_s
    c1 = profile.round_cost_s(1, step, acceptance) / profile.round_cost_s(0, step)
    need = c1 - 1.0  # depth 1 pays when 1 + a > c1
    seen = f"{acceptance[0]:.0%}" if acceptance else "unknown"
    if depth == 0:
        if need >= 1.0:
            return (
                f"Speculation off: verifying 2 rows costs {rows2:.2f} passes and a draft step "
                f"{step / profile.target_rows_s[0]:.2f} here, so no acceptance could pay for a draft."
            )
        return (
            f"Speculation off: verifying 2 rows costs {rows2:.2f} passes here; drafts would need "
            f"> {need:.0%} acceptance, and this text gets {seen}."
        )
    _, rates = best_depth(profile, acceptance, drafter_step_s)
    return (
        f"Depth {depth}: {rates[depth] / rates[0]:.2f}x predicted over speculation off "
        f"(2 rows cost {rows2:.2f} passes here; acceptance {seen} at position 1)."
    )


# ---- what-if arithmetic: the calculator's and the lab's ----------------------------------


@dataclass(frozen=True)
class Costs:
    """A round's parts in plain target passes (one target pass of one row is 1.0)."""

    rows: tuple[float, ...]  # a target pass of 1, 2, ... rows
    drafter_step: float
    overhead: float
    guesses: bool = False  # the drafter guesses each verify's outcome (a draft model on CUDA, greedy)

    def as_profile(self) -> BoxProfile:
        """The same numbers as a BoxProfile whose unit of time is one plain pass."""
        return BoxProfile(
            key="what-if",
            machine="what if",
            target="",
            drafter="",
            runtime="",
            mode="",
            threads=0,
            target_rows_s=list(self.rows),
            drafter_step_s=self.drafter_step,
            overhead_s=self.overhead,
            acceptance_prior=[],
            drafter_guesses=self.guesses,
        )

    @classmethod
    def from_profile(cls, profile: BoxProfile) -> Costs:
        one = profile.target_rows_s[0]
        rows = tuple(t / one for t in profile.target_rows_s[: MAX_DEPTH + 1])
        return cls(rows, profile.drafter_step_s / one, profile.overhead_s / one, profile.drafter_guesses)


# A CPU laptop running the 1.5B target with the 0.5B drafter, roughly.
TYPICAL_COSTS = Costs((1.0, 1.15, 1.3, 1.45, 1.6, 1.75, 1.9), 0.3, 0.02)
TYPICAL_ACCEPTANCE = (0.8, 0.75, 0.7, 0.65, 0.6, 0.55)
PRESET_COSTS = {
    # Extra rows are nearly free on a big GPU, but the 0.5B drafter costs 0.64 of a 1.5B pass.
    "A GPU like an H200": Costs((1.0, 1.26, 1.3, 1.35, 1.4, 1.45, 1.5), 0.64, 0.0),
    # A memory-bound big target: rows cost little, and the drafter a tenth of a pass.
    "A big target with a small drafter": Costs((1.0, 1.02, 1.04, 1.06, 1.08, 1.1, 1.12), 0.1, 0.0),
}


@dataclass(frozen=True)
class DepthPrediction:
    depth: int
    expected_tokens: float  # E_k
    cost: float  # C_k in plain passes
    tokens_per_pass: float  # E_k / C_k
    speedup: float  # over speculation off


def predict(acceptance: list[float], costs: Costs) -> tuple[int, list[DepthPrediction]]:
    """The best depth and the prediction at each depth, in plain passes."""
    profile = costs.as_profile()
    best, rates = best_depth(profile, list(acceptance), max_depth=len(costs.rows) - 1)
    rows = [
        DepthPrediction(
            k,
            expected_tokens(acceptance, k),
            profile.round_cost_s(k, acceptance=list(acceptance)),
            rates[k],
            rates[k] / rates[0],
        )
        for k in range(len(rates))
    ]
    return best, rows


# ---- measured costs: a finished reply's rounds against plain passes ---------------------


def measured_plain_pass_s(replies: Iterable[RunStats]) -> float | None:
    """Seconds per plain target pass, from replies with speculation off; None without one."""
    plain = [r for r in replies if r.depth == 0 and r.rounds]
    if not plain:
        return None
    return sum(r.decode_s for r in plain) / sum(r.rounds for r in plain)


def measured_round_cost(stats: RunStats, plain_pass_s: float | None) -> float | None:
    """c: a reply's mean round time in plain passes; None where either is unknown."""
    if not stats.rounds or not plain_pass_s:
        return None
    return (stats.decode_s / stats.rounds) / plain_pass_s
