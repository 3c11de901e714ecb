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


def test_an_auto_reply_whose_verdict_changes_does_not_reload_within_the_reply(
    cache, target_path, drafter_path, monkeypatch
):
    """No profile at load: the pair loads as asked. When Auto's profile (saved here in place of the
    first reply's measurement) says drafts cannot pay, that reply runs at depth 0 on the models it has:
    nothing loads within it. Going plain on the fastest settings is a reload the caller asks for between
    replies (Engine.go_plain_if_due, as `draftlight chat` and the app do)."""
    options = RuntimeOptions(n_ctx=1024)
    engine = Engine.load(target_path, drafter_path, options, go_plain=True)
    runtime, loads = type(engine.runtime), []
    load = runtime.load
    monkeypatch.setattr(runtime, "load", lambda self, path, *a, **k: loads.append(path) or load(self, path, *a, **k))
    try:
        target, drafter = engine.target, engine.drafter
        assert drafter is not None and engine.options.mode == "exact"
        save_profile(profile(target_path, drafter_path, options, *HOPELESS))
        events = reply(engine)
        assert loads == [] and engine.target is target and engine.drafter is drafter
        assert engine.notice.startswith("Speculation cannot pay")
        assert engine.go_plain_if_due() and loads == [target_path]
        assert engine.drafter is None and engine.options.mode == "fast" and engine.ctx.options.mode == "fast"
        assert not engine.go_plain_if_due() and len(loads) == 1
        again = reply(engine)[-1]
        assert engine.notice.startswith("Speculation cannot pay")
    finally:
        engine.close()
    assert events[-1].depth == 0 and events[-1].drafted == 0
    assert again.depth == 0 and again.drafted == 0 and len(again.token_ids) == PROMPT_TOKENS


def test_chat_asks_for_the_depth_policy_once_and_goes_plain_before_its_reply(
    cache, target_path, drafter_path, monkeypatch, capsys
):
    """`draftlight chat` at Auto: one depth policy for its reply; where the saved profile says drafts
    cannot pay, the target is plain before the reply starts."""
    import json

    from engine.cli import main

    asked = []
    policy = Engine.depth_policy
    monkeypatch.setattr(Engine, "depth_policy", lambda self, *a, **k: asked.append(a) or policy(self, *a, **k))
    options = RuntimeOptions()
    save_profile(profile(target_path, drafter_path, options, *HOPELESS))
    argv = ["chat", "hi", "--target", str(target_path), "--drafter", str(drafter_path), "--max-tokens", "4",
            "--ignore-eos", "--json"]  # fmt: skip
    assert main(argv) == 0
    stats = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert len(asked) == 1 and stats["drafter_kind"] == "none" and stats["drafted"] == 0


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
