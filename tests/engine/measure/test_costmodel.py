"""The cost model: expected tokens, a round's cost, the best depth, conditional acceptance."""

from __future__ import annotations

import pytest

from engine.measure.costmodel import (
    BoxProfile,
    Costs,
    best_depth,
    conditional_acceptance,
    expected_tokens,
    explain,
    guessed_share,
    measured_acceptance,
    predict,
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


# The calculator's arithmetic, by hand. E_k = 1 + 0.9 + 0.9*0.8 + ...; C_k = 0.2 k + rows[k];
# speedup = E_k / C_k (C_0 = 1).
A = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
ROWS = (1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.2)
E = [1.0, 1.9, 2.62, 3.124, 3.4264, 3.5776, 3.63808]
C = [1.0, 1.4, 1.8, 2.2, 2.6, 3.0, 3.4]
SPEEDUP = [e / c for e, c in zip(E, C)]


def test_predict_is_the_formula_by_hand():
    best, rows = predict(A, Costs(ROWS, 0.2, 0.0))
    assert [r.depth for r in rows] == [0, 1, 2, 3, 4, 5, 6]
    assert [r.expected_tokens for r in rows] == pytest.approx(E, abs=1e-9)
    assert [r.cost for r in rows] == pytest.approx(C, abs=1e-9)
    assert [r.tokens_per_pass for r in rows] == pytest.approx([e / c for e, c in zip(E, C)], abs=1e-9)
    assert [r.speedup for r in rows] == pytest.approx(SPEEDUP, abs=1e-9)
    assert best == 2


def test_overhead_counts_in_every_round_and_in_the_plain_pass():
    _, rows = predict(A, Costs(ROWS, 0.2, 0.1))
    assert [r.cost for r in rows] == pytest.approx([c + 0.1 for c in C], abs=1e-9)
    assert [r.speedup for r in rows] == pytest.approx([e / (c + 0.1) * 1.1 for e, c in zip(E, C)], abs=1e-9)


def test_predict_agrees_with_the_profile_in_seconds():
    """The same box in seconds (a 25 ms pass) gives the same best depth and speedups."""
    pass_s = 0.025
    profile = BoxProfile("k", "m", "t", "d", "r", "exact", 2, [r * pass_s for r in ROWS], 0.2 * pass_s, 0.0, [])
    best, rates = best_depth(profile, A)
    ours, rows = predict(A, Costs(ROWS, 0.2, 0.0))
    assert ours == best
    assert [r.speedup for r in rows] == pytest.approx([x / rates[0] for x in rates], abs=1e-12)
    assert [r.expected_tokens for r in rows] == [expected_tokens(A, k) for k in range(7)]
    assert Costs.from_profile(profile).rows == pytest.approx(ROWS, abs=1e-12)
    assert profile.plain_pass_s == profile.round_cost_s(0) == pass_s


def test_a_drafter_that_guesses_the_outcome_saves_a_step_in_the_rounds_its_guess_came_true():
    a = [0.9, 0.8, 0.5]
    # depth k: the round before kept its k drafts and the target chose the guess, a (k+1)-th kept
    assert guessed_share(a, 1) == pytest.approx(0.9 * 0.8)
    assert guessed_share(a, 3) == pytest.approx(0.9 * 0.8 * 0.5 * 0.5)  # one past the deepest: its neighbour's
    rows = [0.010, 0.0105, 0.011, 0.0115]
    plain, guessing = _profile(rows, 0.002, 0.0001), _profile(rows, 0.002, 0.0001)
    guessing.drafter_guesses = True
    for k in range(4):
        saved = 0.002 * guessed_share(a, k) if k else 0.0
        assert guessing.round_cost_s(k, acceptance=a) == pytest.approx(plain.round_cost_s(k, acceptance=a) - saved)
        assert guessing.round_cost_s(k) == plain.round_cost_s(k)  # no acceptance: every step priced
    # always right: every round but the first begins from the guess, one step fewer
    _, rates = best_depth(guessing, [1.0] * 3)
    assert rates[2] == pytest.approx(3 / (0.002 + 0.011 + 0.0001))


def test_measured_acceptance_counts_only_the_drafts_a_walk_reached():
    # 10 rounds drafted 3: 8 kept the first draft, 6 of those the second, 3 of those the third
    rounds = [(3, 3)] * 3 + [(3, 2)] * 3 + [(3, 1)] * 2 + [(3, 0)] * 2
    assert measured_acceptance(rounds, 5) == [0.8, 0.75, 0.5, None, None]
    assert measured_acceptance([], 4) == [None] * 4
    assert measured_acceptance([(2, 0)] * 5, 2) == [0.0, None]  # position 2 never reached
    # a round that kept both of its two drafts never reached a third: Auto mixes depths
    assert measured_acceptance([(2, 2), (3, 2)], 3) == [1.0, 1.0, 0.0]
    assert conditional_acceptance([(2, 2), (3, 2)], 3) == [1.0, 1.0, 0.0]
