"""Auto depth: each round's depth from the box profile and the conversation's acceptance."""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, replace

from engine.depth import AUTO, MAX_DEPTH, Depth, RoundSeconds
from engine.drafting import Drafter, ModelDrafter
from engine.measure.costmodel import BoxProfile, best_depth, conditional_acceptance, explain
from engine.measure.keys import model_file
from engine.measure.profile import (
    Steps,
    drafting_free,
    measuring_rows,
    measuring_soundly,
    profile_for,
    profile_for_target_only,
    profile_key,
)
from engine.measure.soundness import rounds_disagree
from engine.measure.timing import measuring
from engine.runtime.protocol import RunOptions, TextModel


class AutoDepth:
    """Chooses each round's depth from the profile and the conversation's live acceptance.

    Acceptance per position is kept over a rolling window of rounds; positions not yet
    seen borrow the profile's calibration. The choice is revisited every `every` rounds
    and changes only when the new depth is predicted `margin` faster, so it does not flap.

    With `in_situ`, the drafter's costs come from the conversation's own rounds, not the
    profile: an MTP head, DFlash or EAGLE-3 drafter has no model to time on its own, and
    what it costs (a draft step, feeding it the target's rows inside the verify pass, the
    rollback after a rejection) shows only in the rounds it drafts.
    """

    def __init__(
        self,
        profile: BoxProfile,
        drafter_step_s: float | None = None,
        window: int = 48,
        every: int = 4,
        margin: float = 0.03,
        max_depth: int = MAX_DEPTH,
        in_situ: bool = False,
    ) -> None:
        self.profile = profile
        self._guesses = profile.drafter_guesses
        self.in_situ = in_situ
        self.timings: deque[tuple[float, float, float]] = deque(maxlen=window)  # per draft token, extra, commit
        self.drafter_step_s = drafter_step_s
        self.window = window
        self.every = every
        self.margin = margin
        self.max_depth = min(max_depth, profile.max_depth)
        self.rounds: deque[tuple[int, int]] = deque(maxlen=window)  # (drafted, accepted)
        self.depth, self._rates = best_depth(profile, self.acceptance(), drafter_step_s, self.max_depth)
        self._since = 0
        self._seen: deque[tuple[int, RoundSeconds]] = deque(maxlen=2 * every)  # the latest rounds' own seconds
        # Why Auto holds speculation off: its profile contradicted (for good: the engine re-measures it),
        # or this reply's rounds slower than its plain pass (until the next reply, whose text may differ).
        self.held_plain = ""
        self._contradicted = False

    @property
    def setting(self) -> Depth:
        return AUTO

    def acceptance(self) -> list[float]:
        """Conditional acceptance per position: live where seen, the calibration elsewhere."""
        return conditional_acceptance(self.rounds, self.max_depth, self.profile.acceptance_prior or [0.0], pull=2.0)

    def start_from(self, prior: list[float]) -> None:
        """Start from acceptance already measured for this pair (the acceptance ledger's recent
        replies) instead of the profile's calibration prompts."""
        self.profile = replace(self.profile, acceptance_prior=list(prior))
        self.depth, self._rates = best_depth(self.profile, self.acceptance(), self.drafter_step_s, self.max_depth)

    def choose(self) -> int:
        return 0 if self.held_plain else self.depth

    @property
    def contradicted(self) -> str:
        """Why this Auto's profile cannot be trusted, where a reply's own rounds contradicted it; else ""."""
        return self.held_plain if self._contradicted else ""

    def observe(self, drafted: int, accepted: int, seconds: RoundSeconds | None = None) -> None:
        if seconds is not None:
            self._seen.append((drafted, seconds))
        if drafted:
            self.rounds.append((drafted, accepted))
            if self.in_situ and seconds is not None:
                rows_s = self.profile.target_rows_s[min(drafted, len(self.profile.target_rows_s) - 1)]
                self.timings.append((seconds.draft / drafted, max(0.0, seconds.verify - rows_s), seconds.commit))
        self._since += 1
        if self._since < self.every:
            return
        self._since = 0
        if self.timings:
            self._learn_costs()
        if self.held_plain or self._hold_plain():
            self.depth = 0
            return
        best, rates = best_depth(self.profile, self.acceptance(), self.drafter_step_s, self.max_depth)
        if best != self.depth and rates[best] > rates[self.depth] * (1 + self.margin):
            self.depth = best
        self._rates = rates

    def _hold_plain(self) -> bool:
        """Whether the rounds so far contradict the profile, or draft slower than its plain pass: then
        every round from here is plain (the engine marks the profile stale and re-measures it)."""
        said = rounds_disagree(self.profile, list(self._seen))
        if said:
            self.held_plain, self._contradicted = f"the box profile {said}: re-measuring; plain until then", True
            return True
        drafting = [(d, s) for d, s in self._seen if d]
        if len(drafting) >= self.every and self.depth:
            seconds = sum(s.draft + s.verify + s.commit for _, s in drafting)
            tokens = sum(1 + a for (d, a) in list(self.rounds)[-len(drafting) :])
            if tokens / seconds < 1 / self.profile.plain_pass_s:
                self.held_plain = (
                    f"its rounds made {tokens / seconds:.1f} tok/s, slower than the profile's plain "
                    f"{1 / self.profile.plain_pass_s:.1f} tok/s: plain from here"
                )
                return True
        return False

    def _learn_costs(self) -> None:
        """The drafter's step, its extra cost inside the verify pass and the round's rest, from the rounds seen."""
        step, extra, commit = (statistics.median(x) for x in zip(*self.timings))
        self.profile = replace(self.profile, drafter_step_s=step, drafter_catch_up_s=extra, overhead_s=commit)
        self.drafter_step_s = None  # the profile's, learnt

    def predicted_speedup(self) -> float:
        return self._rates[self.depth] / self._rates[0]

    def for_reply(self, greedy: bool) -> None:
        """A draft model guesses each verify's outcome in greedy replies only: price this reply's rounds so."""
        held, self._seen = self.held_plain and not self._contradicted, deque(maxlen=2 * self.every)
        if held:
            self.held_plain = ""
        guesses = self._guesses and greedy
        if guesses != self.profile.drafter_guesses or held:
            self.profile = replace(self.profile, drafter_guesses=guesses)
            self.depth, self._rates = best_depth(self.profile, self.acceptance(), self.drafter_step_s, self.max_depth)

    def explain(self) -> str:
        if self.held_plain:
            return f"Speculation off: {self.held_plain}."
        return explain(self.profile, self.depth, self.acceptance(), self.drafter_step_s)


def auto_depth_for(target: TextModel, drafter: Drafter, options: RunOptions, progress=None) -> AutoDepth:
    """Auto for a pair: a draft model's saved (or freshly measured) profile; a drafter with
    no model of its own (n-grams, an MTP head, DFlash, EAGLE-3) starts free on the target's
    measured rows, and its costs are learnt from the conversation's rounds."""
    deepest = min(MAX_DEPTH, drafter.max_depth)  # chained heads draft at most one each
    if isinstance(drafter, ModelDrafter):
        return AutoDepth(profile_for(target, drafter.model, options, progress), max_depth=deepest)
    profile = profile_for_target_only(target, options, progress or (lambda _said: None))  # measured if need be
    return AutoDepth(drafting_free(profile, profile.drafter), drafter_step_s=0.0, in_situ=True, max_depth=deepest)


@dataclass(frozen=True)
class MeasurePlan:
    """How much a box measurement times: the deepest round, repeats of each row timing, and the
    tokens of each calibration reply (`draftlight tune` and Auto's first use take these defaults)."""

    max_depth: int = MAX_DEPTH
    repeats: int = 7
    calibration_tokens: int = 40


def measuring_for(
    target: TextModel, drafter: Drafter, options: RunOptions, plan: MeasurePlan, again: bool = False, progress=None
) -> Steps:
    """Auto's box measurement for a pair, as steps to run between replies; saved if sound. A draft
    model is timed and calibrated; a drafter with no model of its own needs the target's rows only.
    `again` measures even where a recent measurement was refused (the user asked for it)."""
    if isinstance(drafter, ModelDrafter):
        depth = min(plan.max_depth, drafter.max_depth)
        key = "" if again else profile_key(model_file(target), model_file(drafter.model), options)
        return measuring_soundly(
            lambda: measuring(target, drafter.model, options, depth, plan.repeats, progress, plan.calibration_tokens),
            progress,
            key,
        )
    key = "" if again else profile_key(model_file(target), model_file(target), options)
    return measuring_soundly(lambda: measuring_rows(target, options, progress, plan.repeats), progress, key)
