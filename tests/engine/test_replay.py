"""Stepping is streaming paused between rounds; a replay is the same rounds, from a file."""

from __future__ import annotations

import json

import pytest

from engine import GenerationConfig, RoundEvent, TokenEvent
from engine.errors import DraftlightError
from engine.replay import load, mentioned_tokens, record
from engine.stepping import Stepper

CONFIG = GenerationConfig(max_tokens=32, depth=3, top_candidates=5)


def test_stepping_yields_exactly_what_streaming_yields(engine, prompts):
    streamed = list(engine.stream(prompts["code"], CONFIG))
    stepper = Stepper(engine.stream(prompts["code"], CONFIG))
    steps = []
    while (step := stepper.step()) is not None:
        steps.append(step)
    assert stepper.finished and stepper.step() is None
    stepped_tokens = [t for s in steps for t in s.tokens]
    assert stepped_tokens == [e for e in streamed if isinstance(e, TokenEvent)]

    def shape(r: RoundEvent) -> tuple:  # everything but the timings, which differ run to run
        return (r.round_index, r.drafted, r.accepted, r.draft_tokens, r.depth)

    assert [shape(s.round) for s in steps] == [shape(e) for e in streamed if isinstance(e, RoundEvent)]
    assert stepper.stats.token_ids == streamed[-1].token_ids
    for s in steps:
        assert all(t.round_index == s.round.round_index for t in s.tokens)
        assert len(s.tokens) == s.round.accepted + 1


def test_a_replay_round_trips_and_needs_no_model(engine, prompts, tmp_path):
    stepper = Stepper(engine.stream(prompts["prose"], CONFIG))
    while stepper.step() is not None:
        pass
    replay = record(stepper.steps, stepper.stats, lambda t: engine.target.piece(t).decode("utf-8", "replace"),
                    "target.gguf", "drafter.gguf", "rendered prompt", {"depth": 3}, plain_pass_ms=55.0)  # fmt: skip
    path = replay.save(tmp_path / "reply.draftlight-replay.json")
    again = load(path)
    assert again.steps == stepper.steps
    assert again.stats == stepper.stats
    assert list(again.events())[:-1] == [e for s in stepper.steps for e in (*s.tokens, s.round)]
    assert again.plain_pass_ms == 55.0
    # every token the view may show has its text in the file
    assert mentioned_tokens(again.steps) <= set(again.pieces)
    some = stepper.steps[0].tokens[0]
    assert again.piece(some.token_id) == engine.target.piece(some.token_id).decode("utf-8", "replace")
    assert all(len(t.target_top) == 5 for s in again.steps for t in s.tokens)


def test_not_a_replay_is_refused_in_words(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"hello": 1}))
    with pytest.raises(DraftlightError, match="not a Draftlight replay"):
        load(bad)
    bad.write_text("{not json")
    with pytest.raises(DraftlightError, match="not JSON"):
        load(bad)
    bad.write_text(json.dumps({"format": "draftlight-replay", "version": 1, "rounds": [{"round": 0}], "stats": {}}))
    with pytest.raises(DraftlightError, match="damaged replay"):
        load(bad)
