"""A request's fields, checked before the engine sees them: out of range or of the wrong type is
a 400 with a sentence, never the engine's own error; null means "the default" everywhere."""

from __future__ import annotations

import json

import pytest

from engine.depth import AUTO
from engine.serve.protocol import RequestError, parse_chat

MAX_SEED = (1 << 63) - 1  # what the command line's --seed takes

MESSAGES = [{"role": "user", "content": "hi"}]


def parse(**fields):
    return parse_chat(json.dumps({"messages": MESSAGES, **fields}).encode(), 512)


@pytest.mark.parametrize("seed", [-1, -(1 << 70), MAX_SEED + 1])
def test_a_seed_out_of_range_is_refused_in_a_sentence(seed):
    with pytest.raises(RequestError) as refused:
        parse(seed=seed)
    assert refused.value.status == 400
    assert refused.value.message == f"seed must be a whole number from 0 to {MAX_SEED:,}; it was {seed:,}."


def test_a_seed_in_range_passes():
    assert (parse(seed=0).seed, parse(seed=MAX_SEED).seed, parse().seed) == (0, MAX_SEED, None)


@pytest.mark.parametrize(("value", "said"), [("false", '"false"'), ("true", '"true"'), ([], "[]"), ({}, "{}"),
                                             (0, "0"), (1, "1")])  # fmt: skip
def test_thinking_takes_only_true_or_false(value, said):
    with pytest.raises(RequestError) as refused:
        parse(draftlight={"thinking": value})
    assert (refused.value.status, refused.value.message) == (
        400,
        f"draftlight.thinking must be true or false; it was {said}.",
    )


def test_thinking_true_and_false():
    assert parse(draftlight={"thinking": True}).thinking is True
    assert parse(draftlight={"thinking": False}).thinking is False


def test_null_means_the_default_inside_draftlight_as_at_the_top_level():
    nulls = parse(seed=None, temperature=None, draftlight={"depth": None, "drafter": None, "thinking": None,
                                                            "p_min": None})  # fmt: skip
    assert nulls == parse()
    assert (nulls.depth, nulls.drafter, nulls.thinking, nulls.p_min) == (AUTO, "loaded", False, 0.0)
    assert parse(draftlight=None) == parse()
