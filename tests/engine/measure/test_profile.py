"""Box profiles: saved and keyed by machine, files, runtime, mode and threads; a real measurement."""

from __future__ import annotations

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
