"""Auto depth: each round's depth from the box profile and the conversation's acceptance."""

from __future__ import annotations

from collections import deque

from engine.depth import AUTO, MAX_DEPTH, Depth
from engine.drafting import Drafter, ModelDrafter
from engine.measure.costmodel import BoxProfile, best_depth, conditional_acceptance, explain
from engine.measure.profile import profile_for, profile_for_target_only
from engine.runtime import Model, RuntimeOptions


class AutoDepth:
    """Chooses each round's depth from the profile and the conversation's live acceptance.

    Acceptance per position is kept over a rolling window of rounds; positions not yet
    seen borrow the profile's calibration. The choice is revisited every `every` rounds
    and changes only when the new depth is predicted `margin` faster, so it does not flap.
    """

    def __init__(
        self,
        profile: BoxProfile,
        drafter_step_s: float | None = None,
        window: int = 48,
        every: int = 4,
        margin: float = 0.03,
        max_depth: int = MAX_DEPTH,
    ) -> None:
        self.profile = profile
        self.drafter_step_s = drafter_step_s
        self.window = window
        self.every = every
        self.margin = margin
        self.max_depth = min(max_depth, profile.max_depth)
        self.rounds: deque[tuple[int, int]] = deque(maxlen=window)  # (drafted, accepted)
        self.depth, self._rates = best_depth(profile, self.acceptance(), drafter_step_s, self.max_depth)
        self._since = 0

    @property
    def setting(self) -> Depth:
        return AUTO

    def acceptance(self) -> list[float]:
        """Conditional acceptance per position: live where seen, the calibration elsewhere."""
        return conditional_acceptance(self.rounds, self.max_depth, self.profile.acceptance_prior or [0.0], pull=2.0)

    def choose(self) -> int:
        return self.depth

    def observe(self, drafted: int, accepted: int) -> None:
        if drafted:
            self.rounds.append((drafted, accepted))
        self._since += 1
        if self._since < self.every:
            return
        self._since = 0
        best, rates = best_depth(self.profile, self.acceptance(), self.drafter_step_s, self.max_depth)
        if best != self.depth and rates[best] > rates[self.depth] * (1 + self.margin):
            self.depth = best
        self._rates = rates

    def predicted_speedup(self) -> float:
        return self._rates[self.depth] / self._rates[0]

    def explain(self) -> str:
        return explain(self.profile, self.depth, self.acceptance(), self.drafter_step_s)


def auto_depth_for(target: Model, drafter: Drafter, options: RuntimeOptions, progress=None) -> AutoDepth:
    """Auto for a pair: a draft model's saved (or freshly measured) profile; a drafter with
    no model (n-gram) costs next to nothing, so the target's rows decide alone."""
    if isinstance(drafter, ModelDrafter):
        return AutoDepth(profile_for(target, drafter.model, options, progress))
    return AutoDepth(profile_for_target_only(target, options, progress), drafter_step_s=0.0)
