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


def test_the_contexts_take_the_argmax_where_they_were_told(engine, device_engine):
    assert device_engine.ctx.options.device_argmax and device_engine.drafter.ctx.options.device_argmax
    assert not engine.ctx.device_argmax and engine.ctx.argmax is None  # this CPU's default: numpy's
    assert device_engine.ctx.device_argmax and device_engine.drafter.ctx.device_argmax


def test_a_verify_batch_gives_the_same_rows_and_their_argmax(target_path):
    from engine.runtime import Model

    model = Model(target_path, RuntimeOptions())
    host = Context(model, RuntimeOptions(), max_rows=5)
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


def test_a_device_that_errs_is_not_used_again(target_path, monkeypatch):
    """The first decode checks the device's choice against its rows; a wrong one (a faulty backend,
    simulated here by one altered answer) turns the device's argmax off for the context."""
    import llama_cpp.llama_cpp as llama

    from engine.runtime import Model

    model = Model(target_path, RuntimeOptions())
    host = Context(model, RuntimeOptions(), max_rows=3)
    device = Context(model, RuntimeOptions(argmax_on_device=True), max_rows=3)
    real = llama.llama_get_sampled_token_ith
    monkeypatch.setattr(llama, "llama_get_sampled_token_ith", lambda ctx, i: real(ctx, i) + 1)
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


@pytest.mark.parametrize("depth", [0, 1, 3])
@pytest.mark.parametrize("overlap", [False, True], ids=["eager", "side-work"])
def test_a_reply_is_the_same_event_for_event(engine, device_engine, prompts, depth, overlap):
    host = run(engine, prompts["code"], overlap, depth=depth, ignore_eog=True)
    device = run(device_engine, prompts["code"], overlap, depth=depth, ignore_eog=True)
    host_tokens, host_drafts = tokens_and_drafts(host)
    device_tokens, device_drafts = tokens_and_drafts(device)
    assert device_tokens == host_tokens  # every field: ids, kinds, probabilities, ranks
    assert device_drafts == host_drafts
    assert device[-1].token_ids == host[-1].token_ids and len(device_tokens) == N_TOKENS
    if depth:
        assert device[-1].drafted > 0 and device[-1].accepted > 0


def test_a_banned_end_of_turn_is_passed_over_as_on_the_host(engine, device_engine):
    """Where the device's argmax is a banned token (ignore_eog's end of turn), the row is scanned
    on the host with the ban: the reply writes on past where it would have ended."""
    prompt = engine.tokenize_prompt(engine.render([Message("user", "Answer with one word: is water wet?")]))
    short = run(engine, prompt, False, depth=2)
    assert short[-1].finish_reason.value == "eog" and len(short[-1].token_ids) < N_TOKENS
    host = run(engine, prompt, True, depth=2, ignore_eog=True)
    device = run(device_engine, prompt, True, depth=2, ignore_eog=True)
    assert tokens_and_drafts(device) == tokens_and_drafts(host)
    assert len(device[-1].token_ids) == N_TOKENS
    assert device[-1].token_ids[: len(short[-1].token_ids) - 1] == short[-1].token_ids[:-1]


def test_p_min_reads_the_row_the_device_chose_from(engine, device_engine, prompts):
    host = run(engine, prompts["prose"], False, depth=4, p_min=0.6, ignore_eog=True)
    device = run(device_engine, prompts["prose"], False, depth=4, p_min=0.6, ignore_eog=True)
    assert tokens_and_drafts(device) == tokens_and_drafts(host)
    assert any(len(d) < 4 for d in tokens_and_drafts(device)[1][1:])  # p_min cut some drafts short


def test_a_drafter_passes_over_a_banned_device_choice():
    sampler = Sampler(SamplingConfig(), 8)
    logits = np.array([0.0, 1.0, 5.0, 2.0, 0.5, 0.0, 0.0, 0.0], dtype=np.float32)
    row = np.empty_like(logits)
    assert choose_draft(row, logits.copy(), sampler, 0.0, (), top=2) == 2
    assert choose_draft(row, logits.copy(), sampler, 0.0, (2,), top=2) == 3  # banned: the host's scan
    assert row[2] == -np.inf and row[3] == 2.0
