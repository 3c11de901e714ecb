"""Auto depth: the decision follows the text, with hysteresis."""

from __future__ import annotations

import pytest

from engine.depth import AUTO, MAX_DEPTH, RoundSeconds
from engine.measure.auto import AutoDepth
from engine.measure.costmodel import BoxProfile


def _profile(rows, step, overhead=0.0, prior=(0.8, 0.8, 0.8, 0.8)) -> BoxProfile:
    return BoxProfile("k", "m", "t.gguf", "d.gguf", "rt", "exact", 2, list(rows), step, overhead, list(prior))


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


def test_auto_is_a_depth_policy_capped_by_the_one_cap():
    rows = [0.05 + 0.001 * k for k in range(MAX_DEPTH + 2)]  # one row more than Auto may use
    auto = AutoDepth(_profile(rows, 0.001, prior=(0.95,) * MAX_DEPTH))
    assert auto.setting == AUTO and auto.max_depth == MAX_DEPTH
    for _ in range(40):
        auto.observe(auto.choose(), auto.choose())
    assert auto.choose() == MAX_DEPTH


def test_a_drafter_without_a_model_is_priced_from_its_own_rounds():
    # The target's rows are cheap (a GPU-like box) and every draft lands: drafting that
    # started free pays. The rounds then show each draft step costing a whole pass and the
    # verify pass 20 ms over the target's rows (the head fed inside it): Auto stops drafting.
    box = _profile([0.010, 0.011, 0.012, 0.013, 0.014], 0.0, prior=(0.9, 0.9, 0.9, 0.9))
    auto = AutoDepth(box, drafter_step_s=0.0, every=4, in_situ=True)
    assert auto.depth == 4
    for _ in range(8):
        k = auto.choose()
        auto.observe(k, k, RoundSeconds(draft=0.010 * k, verify=box.target_rows_s[k] + 0.020, commit=0.001))
    learnt = auto.profile
    assert (learnt.drafter_step_s, learnt.drafter_catch_up_s, learnt.overhead_s) == pytest.approx((0.010, 0.020, 0.001))
    assert auto.depth == 0


def test_a_model_drafters_profile_is_not_overwritten_by_rounds():
    box = _profile([0.05, 0.06, 0.07, 0.08, 0.09], 0.01)
    auto = AutoDepth(box, every=1)
    auto.observe(2, 2, RoundSeconds(draft=1.0, verify=1.0, commit=1.0))
    assert auto.profile is box


def test_a_sampled_reply_is_priced_without_the_guesses_only_greedy_replies_make():
    box = _profile([0.010, 0.0105, 0.011, 0.0115, 0.012], 0.004, prior=(0.9, 0.9, 0.9, 0.9))
    box.drafter_guesses = True
    auto = AutoDepth(box)
    greedy = auto.predicted_speedup()
    auto.for_reply(greedy=False)
    assert not auto.profile.drafter_guesses and auto.predicted_speedup() < greedy
    auto.for_reply(greedy=True)
    assert auto.profile.drafter_guesses and auto.predicted_speedup() == pytest.approx(greedy)
    plain = AutoDepth(_profile(box.target_rows_s, 0.004, prior=(0.9,) * 4))
    plain.for_reply(greedy=True)  # a profile without guesses never gains them
    assert not plain.profile.drafter_guesses


def test_rounds_that_contradict_the_profile_hold_auto_plain_for_good():
    """A profile measured on a busy box says a pass costs 0.5 s; the rounds' verify passes take 0.05 s."""
    box = _profile([0.5] * 5, 0.001, prior=(0.9,) * 4)
    auto = AutoDepth(box, every=4)
    assert auto.choose() == 4
    for _ in range(4):
        auto.observe(4, 4, RoundSeconds(0.004, 0.046, 0.0))  # a whole round 0.05 s, priced 0.504
    assert auto.choose() == 0
    assert auto.contradicted == "the box profile measured 10x slower than this reply: re-measuring; plain until then"
    assert auto.explain() == f"Speculation off: {auto.contradicted}."
    auto.for_reply(greedy=True)
    assert auto.choose() == 0


def test_auto_goes_plain_the_moment_its_rounds_are_slower_than_the_plain_pass():
    """Every draft lands, but the draft steps take 5x what the profile says: the rounds make 17 tok/s
    against the profile's plain 20. Plain for the rest of the reply; the next reply tries again."""
    box = _profile([0.05, 0.06, 0.07, 0.08, 0.09], 0.01, prior=(0.9,) * 4)
    auto = AutoDepth(box, every=4)
    assert auto.choose() == 4
    for _ in range(4):
        auto.observe(4, 4, RoundSeconds(0.2, 0.09, 0.0))
    assert auto.choose() == 0 and auto.contradicted == ""
    assert auto.held_plain == "its rounds made 17.2 tok/s, slower than the profile's plain 20.0 tok/s: plain from here"
    auto.for_reply(greedy=True)
    assert auto.choose() == 4
