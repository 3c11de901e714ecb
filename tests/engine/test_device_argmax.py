"""Greedy tokens chosen by llama.cpp in the decode (a backend sampler) equal the ones numpy chooses.

A GPU takes this path by default (RuntimeOptions.argmax_on_device): the host then never
scans a row before the next decode can launch. llama.cpp's CPU backend runs the same
sampler in its graph, so here it is forced on and every event must equal the host's path,
field for field: ids, provenance, drafts, the very same probabilities.
"""

from __future__ import annotations

from dataclasses import replace

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
    saved = engine.ctx.options
    engine.ctx.options = replace(saved, overlap_probabilities=overlap)
    try:
        return list(engine.stream(prompt, GenerationConfig(max_tokens=N_TOKENS, **kw)))
    finally:
        engine.ctx.options = saved


def tokens_and_drafts(events: list) -> tuple[list[TokenEvent], list[tuple[int, ...]]]:
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    drafts = [tuple(e.draft_tokens) for e in events if isinstance(e, RoundEvent)]
    return tokens, drafts


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


@pytest.mark.parametrize("fault", ["a wrong token", "no token"])
def test_a_device_that_errs_is_not_used_again(target_path, monkeypatch, fault):
    """The first decode checks the device's choice against its rows; a wrong one or none (a faulty
    backend, or one that cannot run the sampler, simulated here by altered answers) turns the
    device's argmax off for the context."""
    import llama_cpp.llama_cpp as llama

    from engine.runtime import Model

    model = Model(target_path, RuntimeOptions())
    host = Context(model, RuntimeOptions(argmax_on_device=False), max_rows=3)
    device = Context(model, RuntimeOptions(argmax_on_device=True), max_rows=3)
    real = llama.llama_get_sampled_token_ith
    altered = (lambda ctx, i: real(ctx, i) + 1) if fault == "a wrong token" else (lambda ctx, i: -1)
    monkeypatch.setattr(llama, "llama_get_sampled_token_ith", altered)
    try:
        prompt = model.tokenize("def reverse(items):\n    return", add_special=False)
        want = host.decode(prompt, all_logits=False).copy()
        got = device.decode(prompt, all_logits=False)
        assert np.array_equal(got, want)  # this decode's rows still stand
        assert device.argmax is None and not device.device_argmax
        monkeypatch.setattr(llama, "llama_get_sampled_token_ith", real)
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
    host_tokens, host_drafts = tokens_and_drafts(host)
    device_tokens, device_drafts = tokens_and_drafts(device)
    assert device_tokens == host_tokens  # every field: ids, kinds, probabilities, ranks
    assert device_drafts == host_drafts
    assert device[-1].token_ids == host[-1].token_ids and len(device_tokens) == N_TOKENS
    if depth:
        assert device[-1].drafted > 0 and device[-1].accepted > 0
    # the device took every argmax: its first check held, and the last decode's choice stands
    assert device_engine.ctx.device_argmax and device_engine.ctx.argmax is not None
    if depth:
        assert device_engine.drafter.ctx.device_argmax and device_engine.drafter.ctx.argmax is not None


def test_a_banned_end_of_turn_is_passed_over_as_on_the_host(host_engine, device_engine):
    """Where the device's argmax is a banned token (ignore_eog's end of turn), the row is scanned
    on the host with the ban: the reply writes on past where it would have ended."""
    engine = host_engine
    prompt = engine.tokenize_prompt(engine.render([Message("user", "Answer with one word: is water wet?")]))
    short = run(engine, prompt, False, depth=2)
    assert short[-1].finish_reason.value == "eog" and len(short[-1].token_ids) < N_TOKENS
    host = run(engine, prompt, True, depth=2, ignore_eog=True)
    device = run(device_engine, prompt, True, depth=2, ignore_eog=True)
    assert tokens_and_drafts(device) == tokens_and_drafts(host)
    assert len(device[-1].token_ids) == N_TOKENS
    assert device[-1].token_ids[: len(short[-1].token_ids) - 1] == short[-1].token_ids[:-1]


def test_p_min_reads_the_row_the_device_chose_from(host_engine, device_engine, prompts):
    host = run(host_engine, prompts["prose"], False, depth=4, p_min=0.6, ignore_eog=True)
    device = run(device_engine, prompts["prose"], False, depth=4, p_min=0.6, ignore_eog=True)
    assert tokens_and_drafts(device) == tokens_and_drafts(host)
    assert any(len(d) < 4 for d in tokens_and_drafts(device)[1][1:])  # p_min cut some drafts short


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
