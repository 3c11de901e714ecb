"""Greedy tokens chosen by llama.cpp in the decode (a backend sampler) equal the ones numpy chooses.

A GPU takes this path by default (RuntimeOptions.argmax_on_device): the host then never
scans a row before the next decode can launch. llama.cpp's CPU backend runs the same
sampler in its graph, so here it is forced on and every event must equal the host's path,
field for field: ids, provenance, drafts, ranks. The probabilities come from the device's own
normaliser there (DeviceGreedy's Normaliser), whose float32 sums run in another order: they
must equal the host's to 1e-5, relative.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace

import numpy as np
import pytest

from engine import Engine, GenerationConfig, Message, RoundEvent, RuntimeOptions, TokenEvent
from engine.drafting.base import choose_draft
from engine.runtime import Context
from engine.sampling import Sampler, SamplingConfig

N_TOKENS = 40


@pytest.fixture(scope="module")
def host_engine(engine, target_path, drafter_path):
    """The engine that scans rows with numpy: the session's own where that is this box's default."""
    if not engine.ctx.device_argmax:
        yield engine
        return
    eng = Engine.load(target_path, drafter_path, RuntimeOptions(argmax_on_device=False))
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def device_engine(target_path, drafter_path):
    eng = Engine.load(target_path, drafter_path, RuntimeOptions(argmax_on_device=True))
    yield eng
    eng.close()


def run(engine, prompt, overlap: bool, **kw) -> list:
    saved = engine.ctx.acceleration
    engine.ctx.acceleration = replace(saved, overlap_probabilities=overlap)
    try:
        return list(engine.stream(prompt, GenerationConfig(max_tokens=N_TOKENS, **kw)))
    finally:
        engine.ctx.acceleration = saved


def tokens_and_drafts(events: list) -> tuple[list[TokenEvent], list[tuple[int, ...]]]:
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    drafts = [tuple(e.draft_tokens) for e in events if isinstance(e, RoundEvent)]
    return tokens, drafts


PROBABILITIES = ("target_prob", "draft_prob", "rejected_prob")


def assert_same_tokens(device: list[TokenEvent], host: list[TokenEvent]) -> None:
    """Every field equal, but the probabilities: those to 1e-5 (relative), NaN where NaN."""
    assert len(device) == len(host)
    for d, h in zip(device, host):
        for f in fields(TokenEvent):
            a, b = getattr(d, f.name), getattr(h, f.name)
            if f.name in PROBABILITIES and a is not None and b is not None:
                assert math.isclose(a, b, rel_tol=1e-5) or (math.isnan(a) and math.isnan(b)), (f.name, d, h)
            else:
                assert a == b, (f.name, d, h)


def assert_same(device: list, host: list) -> None:
    """The same tokens (assert_same_tokens) and drafts."""
    device_tokens, device_drafts = tokens_and_drafts(device)
    host_tokens, host_drafts = tokens_and_drafts(host)
    assert_same_tokens(device_tokens, host_tokens)
    assert device_drafts == host_drafts


def test_the_contexts_take_the_argmax_where_they_were_told(host_engine, device_engine):
    assert not host_engine.ctx.device_argmax and not host_engine.drafter.ctx.device_argmax
    assert device_engine.ctx.device_argmax and device_engine.drafter.ctx.device_argmax


def test_a_verify_batch_gives_the_same_rows_and_their_argmax(target_path):
    from engine.runtime import Model

    model = Model(target_path, RuntimeOptions())
    host = Context(model, RuntimeOptions(argmax_on_device=False), max_rows=5)
    device = Context(model, RuntimeOptions(argmax_on_device=True), max_rows=5)
    try:
        prompt = model.tokenize("def reverse(items):\n    return", add_special=False)
        for ctx in (host, device):
            ctx.decode(prompt[:-1], all_logits=False)
        want = host.decode([prompt[-1], 1066, 58, 486, 25], all_logits=True).copy()
        got = device.decode([prompt[-1], 1066, 58, 486, 25], all_logits=True)
        assert host.argmax is None
        assert device.argmax == [int(row.argmax()) for row in want]
        assert np.array_equal(got, want)  # the rows arrive unchanged, bit for bit
        one = device.decode([device.argmax[0]], all_logits=False)
        assert one.shape == (1, model.n_vocab) and device.argmax == [int(one[0].argmax())]
    finally:
        host.close()
        device.close()
        model.close()


@pytest.mark.parametrize("fault", ["a wrong token", "no token", "a wrong normaliser"])
def test_a_device_that_errs_is_not_used_again(target_path, monkeypatch, fault):
    """The first decode checks the device's choice against its rows, and its probability against
    the host's softmax; a wrong one or none (a faulty backend, or one that cannot run the sampler,
    simulated here by altered answers) turns the device's argmax off for the context."""
    import ctypes

    import llama_cpp.llama_cpp as llama

    from engine.runtime import Model

    model = Model(target_path, RuntimeOptions())
    host = Context(model, RuntimeOptions(argmax_on_device=False), max_rows=3)
    device = Context(model, RuntimeOptions(argmax_on_device=True), max_rows=3)
    real = llama.llama_get_sampled_token_ith
    name, altered = {
        "a wrong token": ("llama_get_sampled_token_ith", lambda ctx, i: real(ctx, i) + 1),
        "no token": ("llama_get_sampled_token_ith", lambda ctx, i: -1),
        "a wrong normaliser": ("llama_get_sampled_probs_ith", lambda ctx, i: (ctypes.c_float * 1)(0.5)),
    }[fault]
    monkeypatch.setattr(llama, name, altered)
    try:
        prompt = model.tokenize("def reverse(items):\n    return", add_special=False)
        want = host.decode(prompt, all_logits=False).copy()
        got = device.decode(prompt, all_logits=False)
        assert np.array_equal(got, want)  # this decode's rows still stand
        assert device.argmax is None and device.normalisers is None and not device.device_argmax
        monkeypatch.undo()
        rows = [ctx.decode([int(want[0].argmax()), 13], all_logits=True).copy() for ctx in (host, device)]
        assert np.array_equal(rows[1], rows[0]) and device.argmax is None  # raw logits, the host's argmax
    finally:
        host.close()
        device.close()
        model.close()


def test_a_decode_the_device_names_no_token_for_is_scanned_on_the_host(target_path, monkeypatch):
    """CUDA's argmax names no token (-1) for a row of NaNs: that decode's rows go to the host's scan,
    and the device keeps the next one."""
    import llama_cpp.llama_cpp as llama

    from engine.runtime import Model

    model = Model(target_path, RuntimeOptions())
    device = Context(model, RuntimeOptions(argmax_on_device=True), max_rows=3)
    real = llama.llama_get_sampled_token_ith
    try:
        prompt = model.tokenize("def reverse(items):\n    return", add_special=False)
        first = device.decode(prompt, all_logits=False)
        assert device.argmax == [int(first[0].argmax())]  # checked once, and held
        monkeypatch.setattr(llama, "llama_get_sampled_token_ith", lambda ctx, i: -1)
        device.decode([device.argmax[0]], all_logits=False)
        assert device.argmax is None and device.device_argmax
        monkeypatch.setattr(llama, "llama_get_sampled_token_ith", real)
        rows = device.decode([13, 198], all_logits=True)
        assert device.argmax == [int(row.argmax()) for row in rows]
    finally:
        device.close()
        model.close()


@pytest.mark.parametrize("depth", [0, 1, 3])
@pytest.mark.parametrize("overlap", [False, True], ids=["eager", "side-work"])
def test_a_reply_is_the_same_event_for_event(host_engine, device_engine, prompts, depth, overlap):
    assert_same_reply(host_engine, device_engine, prompts["code"], overlap, depth)


def test_a_long_prompt_prefilled_in_several_batches(host_engine, device_engine, prompts):
    """Batches with no row of logits (a long prompt's first ones) pass through the sampler too."""
    assert len(prompts["long"]) > device_engine.ctx.capacity
    device_engine.forget()
    assert_same_reply(host_engine, device_engine, prompts["long"], True, 2)


def assert_same_reply(host_engine, device_engine, prompt, overlap: bool, depth: int) -> None:
    host = run(host_engine, prompt, overlap, depth=depth, ignore_eog=True)
    device = run(device_engine, prompt, overlap, depth=depth, ignore_eog=True)
    assert_same(device, host)  # every field: ids, kinds, ranks, drafts; the probabilities to 1e-5
    assert device[-1].token_ids == host[-1].token_ids and len(device[-1].token_ids) == N_TOKENS
    if depth:
        assert device[-1].drafted > 0 and device[-1].accepted > 0
    # the device took every argmax: its first check held, and the last decode's choice stands
    assert device_engine.ctx.device_argmax and device_engine.ctx.argmax is not None
    assert device_engine.ctx.normalisers is not None  # and the softmax's normalisers, on the device
    if depth:
        assert device_engine.drafter.ctx.device_argmax and device_engine.drafter.ctx.argmax is not None
        assert device_engine.drafter.ctx.normalisers is not None


def test_a_banned_end_of_turn_is_passed_over_as_on_the_host(host_engine, device_engine):
    """Where the device's argmax is a banned token (ignore_eog's end of turn), the row is scanned
    on the host with the ban: the reply writes on past where it would have ended."""
    engine = host_engine
    prompt = engine.prompt_ids([Message("user", "Answer with one word: is water wet?")])
    short = run(engine, prompt, False, depth=2)
    assert short[-1].finish_reason.value == "eog" and len(short[-1].token_ids) < N_TOKENS
    host = run(engine, prompt, True, depth=2, ignore_eog=True)
    device = run(device_engine, prompt, True, depth=2, ignore_eog=True)
    assert_same(device, host)  # the device's probabilities with the banned token's share taken out
    assert len(device[-1].token_ids) == N_TOKENS
    assert device[-1].token_ids[: len(short[-1].token_ids) - 1] == short[-1].token_ids[:-1]


def test_p_min_reads_the_row_the_device_chose_from(host_engine, device_engine, prompts):
    host = run(host_engine, prompts["prose"], False, depth=4, p_min=0.6, ignore_eog=True)
    device = run(device_engine, prompts["prose"], False, depth=4, p_min=0.6, ignore_eog=True)
    assert_same(device, host)
    assert any(len(d) < 4 for d in tokens_and_drafts(device)[1][1:])  # p_min cut some drafts short


def test_a_draft_has_the_device_s_softmax_of_every_row(device_engine, prompts):
    """Where the device took each row's softmax, a draft holds its parts from the start: no pass
    over a row is left for its probabilities (Draft.prepare has nothing to do)."""
    from engine.sampling import softmax_parts

    drafter = device_engine.drafter
    history = list(prompts["code"])
    drafter.reset()
    drafter.prefill(history)
    draft = drafter.draft(history, 3, Sampler(SamplingConfig(), drafter.model.n_vocab))
    assert len(draft) == 3 and sorted(draft.parts) == [0, 1, 2]
    for i in range(3):
        assert draft.parts[i] == pytest.approx(softmax_parts(draft.rows[i]), rel=1e-5)
    drafter.reset()


def test_a_drafter_passes_over_a_banned_device_choice(target_path):
    """A row where the device chose a banned token has no device choice: the drafter scans it with the ban."""
    from engine.runtime import Model

    model = Model(target_path, RuntimeOptions())
    device = Context(model, RuntimeOptions(argmax_on_device=True), max_rows=1)
    try:
        logits = device.decode(model.tokenize("def reverse(items):\n    return", add_special=False), False)
        first = int(logits[-1].argmax())
        second = int(np.argsort(logits[-1])[-2])
        assert device.device_choices() == [first] == device.device_choices((first + 1,))
        assert device.device_choices((first,)) == [None]
        sampler = Sampler(SamplingConfig(), model.n_vocab)
        row = np.empty(model.n_vocab, dtype=np.float32)
        assert choose_draft(row, logits[-1], sampler, 0.0, (), top=first) == first
        assert choose_draft(row, logits[-1], sampler, 0.0, (first,), top=None) == second  # banned: the host's scan
        assert row[first] == -np.inf and row[second] == logits[-1][second]
    finally:
        device.close()
        model.close()


def test_a_greedy_round_leaves_no_probability_to_side_work(device_engine, prompts):
    """Where the device took each verify row's normaliser, the round's probabilities are lookups
    made at once: nothing is left for the next decode's gap (the round's `pending`)."""
    from engine.runtime.side import SideWork
    from engine.speculative import speculative_round

    eng, prompt = device_engine, list(prompts["code"])
    eng.forget()
    eng.ctx.sync(prompt[:-1])
    eng.drafter.prefill(prompt)
    side, saved = SideWork(), eng.ctx.acceleration
    eng.ctx.acceleration = replace(saved, overlap_probabilities=True)
    try:
        sampler = Sampler(SamplingConfig(), eng.target.n_vocab)
        r = speculative_round(eng.ctx, eng.drafter, prompt, 3, sampler, GenerationConfig(), side=side)
    finally:
        eng.ctx.acceleration = saved
        eng.forget()
    assert r.pending is None and len(r.draft.tokens) == 3
    assert all(0.0 < e.target_prob <= 1.0 for e in r.emitted)
