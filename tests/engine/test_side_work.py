"""Probabilities left to side work (done while a GPU decodes) change nothing but when events go out.

On this CPU a decode has finished when it returns, so the side work runs after it; the
path is the one a GPU takes, and its events must equal the eager path's, field for field.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import replace

import pytest

from engine import GenerationConfig, RoundEvent, RunStats, TokenEvent
from engine.runtime.side import DEVICE_BUSY_S, SIDE_WORK_SHARE, BusyTimes, SideWork

N_TOKENS = 40


@contextmanager
def overlapping(engine, on: bool = True):
    saved = engine.ctx.acceleration
    engine.ctx.acceleration = replace(saved, overlap_probabilities=on)
    try:
        yield
    finally:
        engine.ctx.acceleration = saved


def collect(engine, prompt, overlap: bool, cancelled=lambda: False, **kw):
    config = GenerationConfig(max_tokens=N_TOKENS, ignore_eog=True, **kw)
    with overlapping(engine, overlap):
        return list(engine.stream(prompt, config, cancelled))


def same_rounds(a: RoundEvent, b: RoundEvent) -> bool:
    fields = ("round_index", "drafted", "accepted", "draft_tokens", "depth", "from_prefill")
    return all(getattr(a, f) == getattr(b, f) for f in fields)


def assert_same_events(eager: list, late: list) -> None:
    assert [type(e) for e in late] == [type(e) for e in eager]
    for a, b in zip(eager, late):
        if isinstance(a, TokenEvent):
            assert b == a  # ids, text, provenance and the very same probabilities
            assert math.isfinite(b.target_prob) and 0.0 < b.target_prob <= 1.0
        elif isinstance(a, RoundEvent):
            assert same_rounds(a, b)
        elif isinstance(a, RunStats):
            assert (b.token_ids, b.text, b.finish_reason) == (a.token_ids, a.text, a.finish_reason)


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_overlapped_probabilities_equal_the_eager_ones(engine, prompts, depth):
    eager = collect(engine, prompts["code"], False, depth=depth)
    late = collect(engine, prompts["code"], True, depth=depth)
    assert_same_events(eager, late)
    assert any(e.draft_prob is not None for e in late if isinstance(e, TokenEvent)) == (depth > 0)


def test_every_round_follows_its_own_tokens(engine, prompts):
    events = collect(engine, prompts["prose"], True, depth=2)
    seen: set[int] = set()
    for e in events:
        if isinstance(e, TokenEvent):
            assert e.round_index not in seen  # no token after its round's summary
        elif isinstance(e, RoundEvent):
            seen.add(e.round_index)
    assert isinstance(events[-1], RunStats) and len(seen) == events[-1].rounds + events[-1].from_prefill


def test_a_stop_string_ends_the_reply_at_the_same_token(engine, prompts):
    eager = collect(engine, prompts["code"], False, depth=2, stop=(" sort",))
    late = collect(engine, prompts["code"], True, depth=2, stop=(" sort",))
    assert_same_events(eager, late)
    assert eager[-1].finish_reason.value == "stop_string" and "sort" not in eager[-1].text


def test_a_cancelled_reply_keeps_what_it_had(engine, prompts):
    def after(n):
        calls = iter(range(10**6))
        return lambda: next(calls) >= n

    eager = collect(engine, prompts["code"], False, after(6), depth=2)
    late = collect(engine, prompts["code"], True, after(6), depth=2)
    assert_same_events(eager, late)
    assert eager[-1].finish_reason.value == "cancelled" and eager[-1].generated_tokens > 5


class Failing:
    """The engine's own drafter, failing at its n-th draft: a crash mid-reply."""

    def __init__(self, drafter, n: int):
        self.inner, self.left = drafter, n

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def draft(self, *args, **kw):
        self.left -= 1
        if self.left < 0:
            raise RuntimeError("the drafter broke")
        return self.inner.draft(*args, **kw)


def test_a_crash_mid_reply_delivers_every_token_before_it(engine, prompts):
    def until_crash(overlap: bool) -> list:
        saved = engine.drafter
        engine.swap_drafter(Failing(saved, 4))
        out = []
        try:
            with overlapping(engine, overlap), pytest.raises(RuntimeError, match="drafter broke"):
                config = GenerationConfig(max_tokens=N_TOKENS, depth=2, ignore_eog=True)
                for event in engine.stream(prompts["code"], config):
                    out.append(event)
        finally:
            engine.swap_drafter(saved)
        return out

    eager, late = until_crash(False), until_crash(True)
    assert_same_events(eager, late)
    assert sum(isinstance(e, RoundEvent) for e in late) == 5  # the prompt's round and four drafted ones


def test_a_context_runs_side_work_inside_its_decode(engine, prompts):
    ctx, side = engine.ctx, SideWork()
    engine.forget()
    ctx.prefill(prompts["code"][:-1])
    seen, before = [], []
    job = side.add(lambda: seen.append(ctx.n_past) or "done")
    side.add(lambda: before.append(ctx.n_past), reads=ctx)  # reads its logits: runs before they change
    ctx.decode(prompts["code"][-1:], all_logits=True, side=side)
    assert before == [len(prompts["code"]) - 1]
    assert seen == [len(prompts["code"])]  # after the launch, before the logits were read
    assert job.result() == "done" and seen == [len(prompts["code"])]  # a job runs once
    assert not side.run()  # nothing left
    engine.forget()


def test_work_that_may_wait_waits_for_a_later_gap_or_for_its_reader():
    ctx = object()
    side, order = SideWork(), []
    early = side.add(lambda: order.append("early") or 1, may_wait=True)
    side.add(lambda: order.append("now"))
    side.add(lambda: order.append("reads ctx"), reads=ctx, may_wait=True)
    assert side.run(budget_s=0.0) and order == ["now"]  # a spent gap: only what cannot wait, first
    side.run_reading(ctx)  # ctx is about to decode over the logits that job reads
    assert order == ["now", "reads ctx"]
    assert early.result() == 1 and order == ["now", "reads ctx", "early"]
    assert not side.run()  # asked for early: nothing left to do
    side.add(lambda: order.append("waits"), may_wait=True)
    side.add(lambda: order.append("feeds"))
    assert side.run() and order[-2:] == ["feeds", "waits"]  # no budget: everything, what cannot wait first


def test_work_that_waits_for_a_device_runs_last_in_its_gap_and_is_never_put_off():
    side, order = SideWork(), []
    side.add(lambda: order.append("guess"), last=True)
    side.add(lambda: order.append("probability"), may_wait=True)
    side.add(lambda: order.append("feed"))
    assert side.run() and order == ["feed", "probability", "guess"]
    side.add(lambda: order.append("guess again"), last=True)
    side.add(lambda: order.append("put off"), may_wait=True)
    assert side.run(budget_s=1.0) and order[3:] == ["put off", "guess again"]
    # a gap whose decode is expected to be done: what may wait is put off, a guess is not made
    side.add(lambda: order.append("too late"), last=True)
    side.add(lambda: order.append("put off again"), may_wait=True)
    assert not side.run(budget_s=0.0) and order[5:] == []
    assert side.run() and order[5:] == ["put off again"]  # the guess is gone, not queued


@pytest.mark.parametrize("depth", [0, 2])
def test_probabilities_put_off_to_later_gaps_are_the_same(engine, prompts, depth, monkeypatch):
    """With no time left in any gap, each target probability is computed when its row is about to
    be overwritten, or when its round's events go out: the very same values."""
    eager = collect(engine, prompts["code"], False, depth=depth)
    run, waiting = SideWork.run, []

    def spent(self, budget_s=None):
        waiting.append(sum(job.may_wait for job in self._jobs))
        return run(self, 0.0)

    monkeypatch.setattr(SideWork, "run", spent)
    late = collect(engine, prompts["code"], True, depth=depth)
    assert_same_events(eager, late)
    assert max(waiting) >= 1  # a gap found probabilities waiting, and left them


def test_a_gap_is_budgeted_by_how_long_its_decodes_kept_the_device_busy():
    busy = BusyTimes()
    assert busy.budget(2) is None  # nothing seen yet: no limit
    assert busy.saw(2, after_launch=0.004, waited=0.001)  # waited for the logits: busy 4 ms
    assert busy.budget(2) == pytest.approx(SIDE_WORK_SHARE * 0.004)
    assert busy.saw(2, after_launch=0.008, waited=0.002)  # a running mean
    assert busy.budget(2) == pytest.approx(SIDE_WORK_SHARE * (0.75 * 0.004 + 0.25 * 0.008))
    # the logits were ready when the side work ended, 2 ms in: the device took no longer than that
    assert not busy.saw(2, after_launch=0.002 + DEVICE_BUSY_S / 2, waited=DEVICE_BUSY_S / 2)
    assert busy.budget(2) == pytest.approx(SIDE_WORK_SHARE * 0.002)
    assert busy.budget(1) is None and not busy.saw(1, 0.001, 0.0) and busy.budget(1) is None  # sizes apart
