"""Saved box profiles with a given shape of costs, for the tests of what the engine does with them.

"hopeless" is this CPU's measured shape: a two-row verify pass at 2.2 plain passes, a drafter
step at 0.4 of one (no depth can pay); "paying" is a GPU-like box where rows are nearly free.
"""

from __future__ import annotations

from engine import BoxProfile
from engine.measure.profile import machine_id, profile_key

PASS_S = 0.060
# These are shapes, not measurements: their spread is wide enough that a reply on any box, however
# busy, agrees with them (engine.measure.soundness holds a reply against a profile beyond its spread).
SHAPE_ONLY = 100.0


def profile(target_path, drafter_path, options, rows: list[float], step: float) -> BoxProfile:
    return BoxProfile(
        key=profile_key(target_path, drafter_path, options), machine=machine_id(), target=target_path.name,
        drafter=drafter_path.name, runtime=options.runtime_version(), mode=options.mode, threads=options.threads,
        target_rows_s=[PASS_S * r for r in rows], drafter_step_s=PASS_S * step, overhead_s=0.0005,
        acceptance_prior=[0.8] * 6, spread=SHAPE_ONLY,
    )  # fmt: skip


HOPELESS = ([1.0, 2.2, 3.3, 4.4, 5.5, 6.6, 7.7], 0.4)
PAYING = ([1.0, 1.02, 1.04, 1.06, 1.08, 1.1, 1.12], 0.1)
