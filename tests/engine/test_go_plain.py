"""Defaults that never lose: where no depth could beat plain decoding, an Auto reply runs plain,
on llama.cpp's fastest settings, with no drafter loaded.

The box's costs come from a saved profile (what `draftlight tune` or a first Auto reply
writes), here with this CPU's measured shape: a two-row verify pass at 2.2 plain passes and a
drafter step at 0.4 of one ("hopeless"), or rows nearly free ("paying").
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine import AUTO, Engine, GenerationConfig, RunStats, TokenEvent, TokenKind
from engine.measure.costmodel import best_if_always_right, speculation_pays
from engine.measure.profile import save_profile
from engine.runtime import RuntimeOptions
from tests.engine.box_profiles import HOPELESS, PASS_S, PAYING, profile

PROMPT_TOKENS = 24


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path))
    return tmp_path


def reply(engine: Engine, depth=AUTO) -> list:
    from engine import Message

    prompt = engine.prompt_ids([Message("user", "Write a bubble sort in Python.")])
    return list(engine.stream(prompt, GenerationConfig(max_tokens=PROMPT_TOKENS, depth=depth, ignore_eog=True)))


def test_the_verdict_comes_from_the_box_costs(target_path, drafter_path):
    options = RuntimeOptions()
    hopeless = profile(target_path, drafter_path, options, *HOPELESS)
    paying = profile(target_path, drafter_path, options, *PAYING)
    assert not speculation_pays(hopeless) and best_if_always_right(hopeless)[0] == 0
    best, speedup = best_if_always_right(paying)
    o = 0.0005 / PASS_S  # the round's overhead, in passes
    assert speculation_pays(paying) and best == 6 and speedup == pytest.approx(7 * (1 + o) / (1.12 + 0.6 + o))


def test_a_hopeless_box_loads_a_plain_fast_target_and_no_drafter(cache, target_path, drafter_path):
    options = RuntimeOptions(n_ctx=1024)
    save_profile(profile(target_path, drafter_path, options, *HOPELESS))
    engine = Engine.load(target_path, drafter_path, options, go_plain=True)
    try:
        assert engine.drafter is None and engine.options.mode == "fast" and not engine.target.options.exact
        assert engine.notice.startswith("Speculation cannot pay on this machine")
        assert "costs 2.59 plain passes" in engine.notice and "no drafter is loaded" in engine.notice
        events = reply(engine)
    finally:
        engine.close()
    stats = events[-1]
    assert isinstance(stats, RunStats) and stats.depth == 0 and stats.drafted == 0
    assert {e.kind for e in events if isinstance(e, TokenEvent)} == {TokenKind.PLAIN}
    fast = Engine.load(target_path, "none", replace(options, exact=False))
    try:
        assert stats.token_ids == reply(fast, 0)[-1].token_ids  # the fast target's own plain text
    finally:
        fast.close()


def test_a_box_where_drafts_pay_keeps_the_pair(cache, target_path, drafter_path):
    options = RuntimeOptions(n_ctx=1024)
    save_profile(profile(target_path, drafter_path, options, *PAYING))
    engine = Engine.load(target_path, drafter_path, options, go_plain=True)
    try:
        assert engine.drafter is not None and engine.options.mode == "exact" and engine.notice == ""
        stats = reply(engine)[-1]
    finally:
        engine.close()
    assert stats.depth == AUTO and stats.drafted > 0


def test_the_first_auto_reply_goes_plain_once_the_box_is_measured(cache, target_path, drafter_path):
    """No profile at load: the pair loads as asked; when Auto's profile (saved here in place of
    the first reply's measurement) says drafts cannot pay, the reply already runs plain."""
    options = RuntimeOptions(n_ctx=1024)
    engine = Engine.load(target_path, drafter_path, options, go_plain=True)
    try:
        assert engine.drafter is not None and engine.options.mode == "exact"
        save_profile(profile(target_path, drafter_path, options, *HOPELESS))
        events = reply(engine)
        assert engine.drafter is None and engine.options.mode == "fast" and engine.ctx.options.mode == "fast"
        assert engine.notice.startswith("Speculation cannot pay")
        assert reply(engine)[-1].token_ids == events[-1].token_ids  # and stays plain
    finally:
        engine.close()
    assert events[-1].depth == 0 and events[-1].drafted == 0


def test_a_program_gets_the_pair_it_loaded(cache, target_path, drafter_path):
    """Without go_plain (the library's default) Auto keeps the drafter, and chooses depth 0 itself."""
    options = RuntimeOptions(n_ctx=1024)
    save_profile(profile(target_path, drafter_path, options, *HOPELESS))
    engine = Engine.load(target_path, drafter_path, options)
    try:
        stats = reply(engine)[-1]
        assert engine.drafter is not None and engine.options.mode == "exact" and engine.notice == ""
    finally:
        engine.close()
    assert stats.depth == AUTO and stats.drafted == 0
