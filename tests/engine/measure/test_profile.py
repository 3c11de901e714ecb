"""Box profiles: saved and keyed by machine, files, runtime, mode and threads; a real measurement."""

from __future__ import annotations

import pytest

from engine.measure.costmodel import BoxProfile
from engine.measure.profile import load_profile, measure, profile_key, save_profile
from engine.runtime import RuntimeOptions


def _profile(rows, step, overhead=0.0, prior=(0.8, 0.8, 0.8, 0.8)) -> BoxProfile:
    return BoxProfile("k", "m", "t.gguf", "d.gguf", "rt", "exact", 2, list(rows), step, overhead, list(prior))


def test_profiles_are_saved_and_keyed(tmp_path, monkeypatch, target_path, drafter_path):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path))
    options = RuntimeOptions()
    assert load_profile(target_path, drafter_path, options) is None
    key = profile_key(target_path, drafter_path, options)
    profile = _profile([0.05, 0.09], 0.02)
    profile.key = key
    save_profile(profile)
    assert load_profile(target_path, drafter_path, options) == profile
    # another mode or thread count is another box
    assert profile_key(target_path, drafter_path, RuntimeOptions(exact=False)) != key
    assert profile_key(target_path, drafter_path, RuntimeOptions(n_threads=1)) != key
    assert load_profile(target_path, drafter_path, RuntimeOptions(exact=False)) is None


def test_a_real_measurement(engine, tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path))
    steps = []
    profile = measure(
        engine.target, engine.drafter.model, engine.options, max_depth=2, repeats=2, progress=steps.append
    )
    assert len(profile.target_rows_s) == 3 and all(t > 0 for t in profile.target_rows_s)
    assert profile.drafter_step_s > 0 and profile.overhead_s >= 0
    assert len(profile.acceptance_prior) == 2 and all(0 <= a <= 1 for a in profile.acceptance_prior)
    assert steps[0] == "timing target passes of 1 to 3 rows" and steps[-1].startswith("calibrating")
    assert "rows  target pass" in profile.table()


def test_an_overlapping_drafter_is_priced_from_rounds_at_two_depths(engine, tmp_path, monkeypatch):
    """Its last draft's decode runs beside each verify: a cost per round, apart from the cost per step,
    from whole rounds at two depths."""
    from dataclasses import replace

    import engine.measure.timing as timing_module

    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path))
    options = replace(engine.options, overlap_drafter=True)
    assert profile_key(engine.target.path, engine.drafter.model.path, options) != profile_key(
        engine.target.path, engine.drafter.model.path, engine.options
    )
    depths, generate = [], timing_module.generate

    def recording(ctx, drafter, policy, *args, **kw):
        depths.append((policy.choose(), drafter is not None and drafter.overlaps))
        return generate(ctx, drafter, policy, *args, **kw)

    priced, price_steps = [], timing_module.price_steps

    def pricing(rounds_at, *args):
        priced.append((sorted(rounds_at), price_steps(rounds_at, *args)))
        return priced[-1][1]

    monkeypatch.setattr(timing_module, "generate", recording)
    monkeypatch.setattr(timing_module, "price_steps", pricing)
    profile = measure(engine.target, engine.drafter.model, options, max_depth=3, repeats=2)
    # the calibration replies at depth 3, a plain one, and one at depth 1, the drafter overlapping
    assert depths == [(3, True), (3, True), (0, False), (1, True)]
    # priced from the rounds at depths 1 and 3: the step and catch-up the profile keeps
    assert [at for at, _ in priced] == [[1, 3]]
    assert (profile.drafter_step_s, profile.drafter_catch_up_s) == priced[0][1]


def test_steps_are_priced_by_the_line_through_two_depths():
    from engine.measure.timing import price_steps

    rows = [0.004, 0.0045, 0.0054, 0.0063, 0.0072]

    # rounds of 0.3 ms catch-up, 1.5 ms a step and 0.2 ms of rest around their verify passes
    def at(k: int, guessed: bool = False, noise=(0.0, 0.0001, 0.002)) -> list[tuple[float, bool]]:
        return [(rows[k] + 0.0002 + 0.0003 + (k - guessed) * 0.0015 + n, guessed) for n in noise]

    rounds = {1: at(1), 4: at(4)}
    step, catch_up = price_steps(rounds, rows, 0.0002, 0.001)
    assert step == pytest.approx(0.0015) and catch_up == pytest.approx(0.0003 + 0.0001)  # medians: the noise's middle
    # never below a bare step, never a negative catch-up
    assert price_steps(rounds, rows, 0.0002, 0.003) == (0.003, 0.0)
    # Rounds that began from a guess that came true took a step fewer: each depth is priced by its
    # most common kind of round, at the steps that kind took.
    mixed = {1: at(1, True) + at(1, False, (0.0, 0.0001)), 4: at(4, False) + at(4, True, (0.0,))}
    step, catch_up = price_steps(mixed, rows, 0.0002, 0.001)
    assert step == pytest.approx(0.0015) and catch_up == pytest.approx(0.0003 + 0.0001)
    every = {1: at(1, True), 4: at(4, True)}  # every draft kept: every round from a guess
    assert price_steps(every, rows, 0.0002, 0.001) == pytest.approx((0.0015, 0.0003 + 0.0001))
