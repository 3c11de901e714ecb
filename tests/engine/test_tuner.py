"""The tuner: the formula, the decision with hysteresis, the saved profile, a real measurement."""

from __future__ import annotations

import pytest

from engine.tuner import (
    AutoDepth,
    BoxProfile,
    best_depth,
    conditional_acceptance,
    expected_tokens,
    explain,
    load_profile,
    measure,
    profile_key,
    save_profile,
)


def _profile(rows, step, overhead=0.0, prior=(0.8, 0.8, 0.8, 0.8)) -> BoxProfile:
    return BoxProfile("k", "m", "t.gguf", "d.gguf", "rt", "exact", 2, list(rows), step, overhead, list(prior))


def test_expected_tokens_is_one_plus_the_running_products():
    a = [0.9, 0.8, 0.7, 0.6]
    assert expected_tokens(a, 0) == 1.0
    assert expected_tokens(a, 1) == pytest.approx(1.9)
    assert expected_tokens(a, 4) == pytest.approx(1 + 0.9 + 0.72 + 0.504 + 0.3024)


def test_best_depth_maximises_tokens_per_second():
    # a GPU-like box: rows nearly free, a cheap drafter -> deep drafts pay
    gpu = _profile([0.010, 0.0105, 0.011, 0.0115, 0.012], 0.001)
    depth, rates = best_depth(gpu, [0.9, 0.9, 0.9, 0.9])
    assert depth == 4 and rates[4] == pytest.approx(expected_tokens([0.9] * 4, 4) / (4 * 0.001 + 0.012))
    # this project's 2-core box: two rows cost 1.77 passes and the drafter a third of one
    cpu = _profile([0.057, 0.101, 0.145, 0.19, 0.235], 0.019)
    depth, rates = best_depth(cpu, [0.94, 0.9, 0.9, 0.9])
    assert depth == 0 and max(rates) == rates[0]


def test_explain_says_why_in_the_boxs_numbers():
    cpu = _profile([0.057, 0.101, 0.145, 0.19, 0.235], 0.019)
    text = explain(cpu, 0, [0.94])
    assert text.startswith("Speculation off: verifying 2 rows costs 1.77 passes")
    assert "no acceptance could pay" in text  # (0.019 + 0.101) / 0.057 - 1 > 100%
    cheap = _profile([0.057, 0.07, 0.08, 0.09, 0.1], 0.005)
    assert "drafts would need > 32% acceptance, and this text gets 20%" in explain(cheap, 0, [0.2])
    assert explain(cheap, 2, [0.9, 0.9]).startswith("Depth 2: ")


def test_conditional_acceptance_from_rounds():
    rounds = [(3, 3), (3, 1), (3, 0), (2, 2)]  # (drafted, accepted)
    # position 1: 4 rounds drafted it, 3 kept; position 2: reached in 3 (accepted >= 1), kept in 2
    # position 3: drafted in 3 rounds, reached (accepted >= 2) in 1, kept in 1
    assert conditional_acceptance(rounds, 3) == [3 / 4, 2 / 3, 1 / 1]
    assert conditional_acceptance([], 2, prior=[0.5], pull=2.0) == [0.5, 0.5]


def test_auto_depth_follows_the_text_with_hysteresis():
    box = _profile([0.05, 0.06, 0.07, 0.08, 0.09], 0.01, prior=(0.5, 0.5, 0.5, 0.5))
    auto = AutoDepth(box, every=4, margin=0.03)
    start = auto.depth
    for _ in range(40):  # every draft accepted: deeper pays
        auto.observe(auto.depth, auto.depth)
    assert auto.depth == 4 and auto.depth > start
    assert auto.predicted_speedup() > 1.5
    for _ in range(80):  # nothing accepted: drafting is waste
        auto.observe(auto.depth, 0)
    assert auto.depth == 0
    before = auto.depth
    auto.observe(1, 1)  # one round does not flip the decision
    assert auto.depth == before


def test_profiles_are_saved_and_keyed(tmp_path, monkeypatch, target_path, drafter_path):
    from engine.runtime import RuntimeOptions

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
