"""What a loaded pair knows of this box: its saved profile, its Auto policy, each reply held against
the profile, and its place in the acceptance ledger. Engine's measuring half (engine.session)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from engine.depth import AUTO, MAX_DEPTH, Depth, DepthPolicy, FixedDepth
from engine.drafting import Drafter, kinds
from engine.errors import DraftlightError
from engine.events import RunStats
from engine.ledger import recording
from engine.ledger.fingerprint import FileIdentity
from engine.ledger.report import PairLedger, for_pair, recent_acceptance
from engine.ledger.store import Setup
from engine.measure.auto import AutoDepth, MeasurePlan, auto_depth_for, measuring_for
from engine.measure.costmodel import BoxProfile, speculation_pays, why_plain
from engine.measure.profile import Steps, mark_stale, saved_pair_profile, saved_target_profile
from engine.measure.soundness import ProfileRefused, reply_disagrees
from engine.runtime.protocol import RuntimeContext, TextModel

ProfileProgress = Callable[[str], None]  # a sentence at a time while a box profile is measured


class PairMeasuring:
    """The Engine's methods on its box profile, Auto and the ledger; Engine.__init__ sets the state."""

    target: TextModel
    drafter: Drafter | None
    ctx: RuntimeContext
    go_plain: bool  # an Auto reply that finds drafts cannot pay sets plain_due (Engine.go_plain_if_due)
    plain_due: str
    profile_notice: str
    _auto: AutoDepth | None
    _identity: tuple[FileIdentity, FileIdentity] | None

    @property
    def auto(self) -> AutoDepth | None:
        """The pair's Auto policy once an Auto reply (or `auto_depth`) has built it."""
        return self._auto

    def auto_depth(self, progress: ProfileProgress | None = None) -> AutoDepth:
        """Auto for this pair; the first time, measuring the box if no profile is saved."""
        if self.drafter is None:
            raise DraftlightError("Auto depth needs a drafter; with none, every round is plain.")
        if self._auto is None:
            self._auto = auto_depth_for(self.target, self.drafter, self.target.options, progress)
            book = recording.ledger()
            if book is not None:  # what this pair's files accepted lately, not the calibration prompts
                target, drafter = self._pair_identity()
                found = recent_acceptance(
                    book.replies((target.name, drafter.name)), target.fingerprint, drafter.fingerprint
                )
                if found:
                    self._auto.start_from(found)
        return self._auto

    def measuring(self, plan: MeasurePlan | None = None, again: bool = False, progress=None) -> Steps | None:
        """The box measurement Auto needs, as steps a caller may run between replies (the app does);
        None where there is nothing to measure (no drafter that can speculate) or, unless `again`,
        a profile is saved already. Once it ends, Auto starts afresh from the new profile."""
        if not self.can_speculate or (not again and self.saved_profile() is not None):
            return None
        assert self.drafter is not None
        return self._remeasured(
            measuring_for(self.target, self.drafter, self.target.options, plan or MeasurePlan(), again, progress)
        )

    def _remeasured(self, steps: Steps) -> Steps:
        profile = yield from steps
        self._auto, self.profile_notice, self.plain_due = None, "", ""
        return profile

    @property
    def can_speculate(self) -> bool:
        """A drafter is loaded and the target can undo a rejected draft (recurrent targets need snapshots)."""
        return self.drafter is not None and self.ctx.can_rewind

    def depth_policy(self, depth: Depth, progress: ProfileProgress | None = None) -> DepthPolicy:
        """What a reply asked for, as a policy: the one place "no drafter means depth 0" is decided.
        Computed once a reply (`stream` takes the caller's); it may measure the box on Auto's first use,
        and never loads a model: where the measurement says drafts cannot pay, the reply runs at depth 0
        and `plain_due` says why until go_plain_if_due switches.

        A target whose state cannot be rolled back decodes plainly too (`notice` says why).
        """
        if not self.can_speculate:
            return FixedDepth(0)
        if depth == AUTO:
            if self.plain_due:
                return FixedDepth(0)
            try:
                auto = self.auto_depth(progress)
            except ProfileRefused as refused:  # measured on a busy box: plain, and said, until a sound one
                self.profile_notice = str(refused)
                return FixedDepth(0)
            assert self.drafter is not None  # can_speculate
            if self.go_plain and self.drafter.kind == kinds.MODEL.name and not speculation_pays(auto.profile):
                self.plain_due = why_plain(auto.profile)
                return FixedDepth(0)
            return auto
        return FixedDepth(min(depth, MAX_DEPTH))

    def describe_rollback(self) -> str:
        """How the target undoes a rejected draft, in a sentence; with its cost here where a profile is saved."""
        said = self.ctx.describe_rollback()
        profile = saved_target_profile(self.target, self.target.options)
        if self.ctx.has_state and self.ctx.can_rewind and profile is not None and profile.rollback_s > 0:
            share = profile.rollback_s / profile.target_rows_s[0]
            said += (
                f" Undoing a rejected draft costs {profile.rollback_s * 1e3:.2f} ms on this box, "
                f"{share:.1%} of a target pass, and Auto counts it in a round's cost."
            )
        return said

    def saved_profile(self) -> BoxProfile | None:
        """This pair's box profile if one is saved (`draftlight tune`, or a first Auto reply)."""
        return saved_pair_profile(self.target, self.drafter, self.target.options)

    def plain_pass_s(self) -> float | None:
        """One plain round of this target on this box, from a saved profile; None where none is saved."""
        profile = self.saved_profile() or saved_target_profile(self.target, self.target.options)
        return profile.plain_pass_s if profile else None

    def profile_basis(self) -> str:
        """What the plain speed rests on, in words ("plain 31.2 tok/s ±3%, measured today"); "" with no profile."""
        profile = self.saved_profile() or saved_target_profile(self.target, self.target.options)
        return profile.basis() if profile else ""

    def check_profile(self, stats: RunStats, policy: DepthPolicy) -> None:
        """Hold the box profile against a finished reply's own passes: where they contradict it beyond
        its spread, say so, mark it stale and let the next Auto reply measure it again."""
        auto = policy if isinstance(policy, AutoDepth) else None
        profile = (
            auto.profile if auto else self.saved_profile() or saved_target_profile(self.target, self.target.options)
        )
        if profile is None:
            return
        said = auto.contradicted if auto else ""
        if not said:
            found = reply_disagrees(profile, stats)
            said = f"the box profile {found}: re-measuring" if found else ""
        if said:
            self.profile_notice = f"Auto: {said}."
            mark_stale(profile)
            self._auto = None

    def ledger_view(self) -> PairLedger | None:
        """This pair in the acceptance ledger: baselines, the drift warning, history; None with no drafter."""
        if self.drafter is None:
            return None
        return for_pair(self._target_path(), recording.drafter_file(self.drafter), self.drafter.kind)

    def ledger_setup(self, stats: RunStats, temperature: float) -> Setup:
        """What the acceptance ledger keys a reply of this pair by (engine.ledger)."""
        if self.drafter is None:
            raise DraftlightError("A reply with no drafter has no acceptance to keep.")
        runtime = self.target.options.runtime_version()
        return recording.setup_for(self._pair_identity(), self.drafter.kind, runtime, stats, temperature)

    def _target_path(self) -> Path:
        """The target's file or folder, which a reload and the ledger name it by."""
        if self.target.path is None:
            raise DraftlightError(f"{self.target.name} was built in memory: it has no file to reload or to name.")
        return self.target.path

    def _pair_identity(self) -> tuple[FileIdentity, FileIdentity]:
        if self._identity is None:
            self._identity = recording.pair_identity(self._target_path(), self.drafter)
        return self._identity
