"""Depth: one cap, one spelling of Auto, a fixed policy."""

from __future__ import annotations

import pytest

from engine.depth import AUTO, MAX_DEPTH, FixedDepth, describe_depth, parse_depth


def test_a_depth_is_a_whole_number_up_to_the_cap_or_auto():
    assert parse_depth("auto") == AUTO == "auto"
    assert [parse_depth(str(k)) for k in range(MAX_DEPTH + 1)] == list(range(MAX_DEPTH + 1))
    assert parse_depth(3) == 3
    for bad in ("-1", str(MAX_DEPTH + 1), "two", "", "Auto"):
        with pytest.raises(ValueError, match=f"depth must be 0-{MAX_DEPTH} or auto"):
            parse_depth(bad)


def test_a_fixed_depth_is_a_policy_that_never_changes():
    policy = FixedDepth(2)
    policy.observe(2, 0)
    assert policy.choose() == 2 and policy.setting == 2
    with pytest.raises(ValueError):
        FixedDepth(MAX_DEPTH + 1)
    with pytest.raises(ValueError):
        FixedDepth(-1)


def test_depths_in_words():
    assert describe_depth(AUTO) == "auto" and describe_depth(0) == "0" and describe_depth(4) == "4"
