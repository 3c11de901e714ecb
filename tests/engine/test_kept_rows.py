"""A draft model's rows kept on the device (RowKeeper): each step's row stays in its position's slot
there, and only its argmax's logit and the banned tokens' come back.

llama.cpp's CPU backend runs the keeper in its graph as a GPU does, so here it is on (it follows
argmax_on_device) and checked against the rows the host takes in: the kept rows bit for bit, what
comes back, a reply event for event (ranks and probabilities at refused drafts included), and the
rows fetched: only those a figure reads all of.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from engine import Engine, GenerationConfig, RoundEvent, RuntimeOptions, TokenEvent
from engine.drafting import ModelDrafter
from engine.runtime import Context, Model
from engine.runtime.llama.keptrows import KEPT_WIDTH, MAX_BANNED
from engine.sampling import Sampler, SamplingConfig, softmax_parts

N_TOKENS = 40
DEVICE = RuntimeOptions(argmax_on_device=True)


@pytest.fixture(scope="module")
def drafter_model(drafter_path):
    model = Model(drafter_path, DEVICE)
    yield model
    model.close()


@pytest.fixture
def contexts(drafter_model):
    """A context whose rows the device keeps (four slots), and one that takes them in."""
    kept = Context(drafter_model, DEVICE, max_rows=1, kept_rows=4)
    taken = Context(drafter_model, DEVICE, max_rows=1)
    yield kept, taken
    kept.close()
    taken.close()


@pytest.fixture(scope="module")
def engines(target_path, drafter_path):
    """The same engine twice, on the device's argmax: its drafter's rows kept, and taken in."""
    kept = Engine.load(target_path, drafter_path, DEVICE)
    taken = Engine.load(target_path, drafter_path, replace(DEVICE, keep_draft_rows=False))
    yield kept, taken
    kept.close()
    taken.close()


def _steps(kept, taken, model, tokens, n):
    """n decodes on both contexts, each of the greedy token after the last: the rows taken in, by position."""
    rows = {}
    for _ in range(n):
        small = kept.decode(tokens, all_logits=False)
        row = taken.decode(tokens, all_logits=False)[-1].copy()
        assert small.shape == (1, KEPT_WIDTH) and kept.argmax == taken.argmax == [int(row.argmax())]
        rows[kept.n_past - 1] = (small.copy(), row)
        tokens = kept.argmax
    return rows


def _writes(monkeypatch) -> list[int]:
    """Each time the host writes a keeper's inputs (it waits for the device first)."""
    import llama_cpp.llama_cpp as llama

    calls, sync = [], llama.llama_synchronize
    monkeypatch.setattr(llama, "llama_synchronize", lambda ctx: calls.append(1) or sync(ctx))
    return calls


def test_the_rows_kept_are_the_rows_and_what_comes_back_is_theirs(drafter_model, contexts, monkeypatch):
    """Each decode's row in its position's slot, found by the graph itself: the host writes nothing
    before a step, only when the ban changes."""
    model, (kept, taken) = drafter_model, contexts
    assert kept.keeps_rows and not taken.keeps_rows and taken.device_argmax
    banned = model.eog_tokens()[:3]
    assert banned
    writes = _writes(monkeypatch)
    kept.keep_banned(banned)
    rows = _steps(kept, taken, model, model.tokenize("def reverse(items):\n    return", add_special=False), 4)
    assert len(writes) == 1  # the ban, before the first decode; no slot named
    for small, row in rows.values():
        top = int(row.argmax())
        assert small[0, 0] == row[top] and list(small[0, 1 : 1 + len(banned)]) == list(row[list(banned)])
    small, row = rows[kept.n_past - 1]
    assert kept.device_parts(small, banned) == taken.device_parts(row[None], banned)
    assert kept.device_parts(small, banned[:1]) is None  # not the ban whose logits came back
    assert kept.device_parts(small, banned)[0][1] == pytest.approx(softmax_parts(row)[1], rel=1e-5)
    # four positions in four slots: each still holds its own decode's row
    for position, (_, row) in rows.items():
        assert np.array_equal(kept.kept_row(position, np.empty(model.n_vocab, np.float32)), row)
    # a decode four positions on takes the slot of the first
    first = min(rows)
    kept.rewind(first + 1)
    taken.rewind(first + 1)
    again = _steps(kept, taken, model, model.tokenize(" while", add_special=False)[:1], 4)
    assert len(writes) == 1
    assert np.array_equal(kept.kept_row(first + 4, np.empty(model.n_vocab, np.float32)), again[first + 4][1])
    assert not np.array_equal(again[first + 4][1], rows[first][1])


def test_where_positions_are_not_plain_the_host_names_each_slot(drafter_model, monkeypatch):
    """A model whose positions are no single number a token (M-RoPE's four): the host writes each
    decode's slot before it, and the rows land as where the graph finds them."""
    import llama_cpp.llama_cpp as llama

    with monkeypatch.context() as m:
        m.setattr(llama, "llama_model_rope_type", lambda _model: llama.LLAMA_ROPE_TYPE_MROPE)
        kept = Context(drafter_model, DEVICE, max_rows=1, kept_rows=3)
    taken = Context(drafter_model, DEVICE, max_rows=1)
    try:
        assert kept.keeps_rows
        writes = _writes(monkeypatch)
        rows = _steps(kept, taken, drafter_model, drafter_model.tokenize("SELECT name FROM", add_special=False), 3)
        # each slot named where it is not the one the inputs held (0 at first): the three in turn
        assert len(writes) == (3 if min(rows) % 3 else 2)
        for position, (_, row) in rows.items():
            assert np.array_equal(kept.kept_row(position, np.empty(drafter_model.n_vocab, np.float32)), row)
    finally:
        kept.close()
        taken.close()


def test_a_ban_changed_while_a_decode_is_in_flight_waits_for_it(drafter_model, contexts):
    """keep_banned while a fed batch still runs: its row comes back with the ban it was fed with,
    the next decode's with the new one."""
    model, (kept, taken) = drafter_model, contexts
    banned = model.eog_tokens()[:2]
    tokens = model.tokenize("SELECT name FROM", add_special=False)
    kept.keep_banned(())
    kept.feed(tokens)
    kept.keep_banned(banned)  # on a GPU the fed batch may still be running (here it is done)
    small = kept.collect()
    first = taken.decode(tokens, all_logits=False)[-1].copy()
    assert kept.device_parts(small, ()) == taken.device_parts(first[None], ())
    assert kept.device_parts(small, banned) is None
    top = int(first.argmax())
    small = kept.decode([top], all_logits=False)
    second = taken.decode([top], all_logits=False)[-1]
    assert list(small[0, 1:3]) == list(second[list(banned)])
    assert np.array_equal(kept.kept_row(len(tokens) - 1, np.empty(model.n_vocab, np.float32)), first)
    assert np.array_equal(kept.kept_row(len(tokens), np.empty(model.n_vocab, np.float32)), second)


def replies(engines, prompt, **kw) -> tuple[list, list]:
    return tuple(list(eng.stream(prompt, GenerationConfig(max_tokens=N_TOKENS, **kw))) for eng in engines)


@pytest.mark.parametrize("kind", ["code", "prose"])
def test_a_reply_with_the_rows_kept_is_the_same_event_for_event(engines, prompts, kind, monkeypatch):
    """Greedy, the events of every field equal; and a row is fetched only at a refused draft (its
    rank, the target's token's probability there): once a round, none where every draft was kept."""
    kept, taken = engines
    assert kept.drafter.ctx.keeps_rows and not taken.drafter.ctx.keeps_rows
    fetched, fetch = [], kept.drafter.ctx.kept_row
    monkeypatch.setattr(kept.drafter.ctx, "kept_row", lambda at, out: fetched.append(at) or fetch(at, out))
    a, b = replies(engines, prompts[kind], depth=3, ignore_eog=True)
    assert [e for e in a if isinstance(e, TokenEvent)] == [e for e in b if isinstance(e, TokenEvent)]
    rounds = [e for e in a if isinstance(e, RoundEvent)]
    assert [r.draft_tokens for r in rounds] == [r.draft_tokens for r in b if isinstance(r, RoundEvent)]
    refused = sum(1 for r in rounds if r.accepted < r.drafted)
    assert refused > 0 and len(fetched) == refused


def test_a_sampled_reply_fetches_each_row_and_draws_as_on_the_host(engines, prompts):
    sampling = SamplingConfig(temperature=0.8, seed=11)
    a, b = replies(engines, prompts["prose"], depth=2, sampling=sampling)
    assert [e for e in a if isinstance(e, TokenEvent)] == [e for e in b if isinstance(e, TokenEvent)]


def test_a_ban_too_long_to_come_back_is_served_by_fetching_the_rows(engines, prompts):
    """More banned tokens than MAX_BANNED: the rows are fetched and scanned with the ban, as taken in."""
    kept, taken = engines
    prompt = list(prompts["code"])
    sampler = Sampler(SamplingConfig(), kept.drafter.model.n_vocab)
    taken.drafter.reset()
    taken.drafter.prefill(prompt)
    natural = taken.drafter.draft(prompt, 1, sampler).tokens[0]  # banned with the rest: its row is scanned
    banned = (natural, *range(10, 10 + MAX_BANNED))
    drafts = []
    for eng in (kept, taken):
        drafter: ModelDrafter = eng.drafter
        drafter.reset()
        drafter.prefill(prompt)
        draft = drafter.draft(prompt, 3, sampler, banned=banned)
        drafts.append((draft.tokens, draft.probs(draft.tokens), [draft.rank(i, t) for i, t in enumerate(draft.tokens)]))
        drafter.reset()
    (tokens, probs, ranks), (host_tokens, host_probs, host_ranks) = drafts
    assert len(tokens) == 3 and tokens == host_tokens and ranks == host_ranks and not set(tokens) & set(banned)
    # the host's sums here (no device normaliser for this ban) against the device's less the ban's terms
    assert probs == pytest.approx(host_probs, rel=1e-5)


def test_a_row_fetched_after_its_draft_has_the_ban_written_in(engines, prompts):
    """A rank read at a refused draft, from a row the device chose from: the banned tokens rank nowhere."""
    kept, taken = engines
    prompt = list(prompts["code"])
    sampler = Sampler(SamplingConfig(), kept.drafter.model.n_vocab)
    ranks = []
    for eng in (taken, kept):
        drafter: ModelDrafter = eng.drafter
        drafter.reset()
        drafter.prefill(prompt)
        if not ranks:
            order = np.argsort(drafter.draft(prompt, 1, sampler).rows[0])[::-1]
            second, third = int(order[1]), int(order[2])
            drafter.reset()
            drafter.prefill(prompt)
        draft = drafter.draft(prompt, 1, sampler, banned=(second,))
        ranks.append((draft.tokens, draft.rank(0, third), draft.rank(0, second)))
        drafter.reset()
    assert ranks[0] == ranks[1] and ranks[0][0] == [int(order[0])] and ranks[0][1] == 2


@pytest.mark.parametrize("in_time", [True, False], ids=["row held in the verify", "row collected after"])
def test_a_guessing_drafter_drafts_with_its_rows_kept_as_with_them_taken_in(engines, drafter_path, prompts, in_time):
    """The drafter that takes in its last draft during the verify and guesses the outcome (a GPU's
    default): the guess's row stays on the device too, in the first slot of the next round's rows."""
    kept, _ = engines
    steps = replace(DEVICE, overlap_drafter=True)
    drafters = [ModelDrafter(Model(drafter_path, o), o) for o in (steps, replace(steps, keep_draft_rows=False))]
    own, out = kept.drafter, []
    try:
        for drafter in drafters:
            assert drafter.guesses and drafter.ctx.keeps_rows == (drafter is drafters[0])
            drafter._holds_in_time = lambda ends, took: in_time
            kept.swap_drafter(drafter)
            config = GenerationConfig(max_tokens=N_TOKENS, depth=3, ignore_eog=True)
            events = list(kept.stream(prompts["code"], config))
            tokens = [e for e in events if isinstance(e, TokenEvent)]
            drafts = [(e.draft_tokens, e.guessed) for e in events if isinstance(e, RoundEvent)]
            out.append((tokens, drafts, drafter.guesses_made, drafter.guesses_kept))
    finally:
        kept.swap_drafter(own)
        for drafter in drafters:
            drafter.close()
            drafter.model.close()
    (tokens, drafts, made, right), taken = out[0], out[1]
    assert (tokens, drafts, made, right) == taken
    assert made > 0 and 0 < right < made  # guesses came true, and some did not


def test_a_device_that_errs_in_the_first_draft_hands_its_rows_to_the_host(drafter_path, prompts, monkeypatch):
    """A drafter reset rather than prefilled (a reply under Auto) checks the device in its first
    draft's decode; a wrong normaliser there detaches the keeper and the draft goes on from the row."""
    import ctypes

    import llama_cpp.llama_cpp as llama

    model = Model(drafter_path, DEVICE)
    drafters = [ModelDrafter(model, o) for o in (DEVICE, replace(DEVICE, argmax_on_device=False))]
    try:
        prompt, sampler = list(prompts["code"]), Sampler(SamplingConfig(), model.n_vocab)
        with monkeypatch.context() as m:
            m.setattr(llama, "llama_get_sampled_probs_ith", lambda ctx, i: (ctypes.c_float * 1)(0.5))
            drafters[0].reset()
            erred = drafters[0].draft(prompt, 3, sampler)
        assert not drafters[0].ctx.keeps_rows and not drafters[0].ctx.device_argmax
        drafters[1].reset()
        host = drafters[1].draft(prompt, 3, sampler)
        assert erred.tokens == host.tokens and len(host.tokens) == 3
        assert erred.rank(0, host.tokens[0]) == 1 and erred.probs(erred.tokens) == host.probs(host.tokens)
    finally:
        for drafter in drafters:
            drafter.close()
        model.close()


def test_a_state_replayed_in_a_rewind_keeps_its_row_off_the_drafts(tmp_path):
    """A recurrent drafter (a hybrid's one-row steps keep no snapshots) rewinds by decoding the kept
    tokens again: that decode's row goes to the spare slot, and the drafts' rows stay as they were."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from synthetic import hybrid_qwen35

    options = replace(DEVICE, n_ctx=256, n_batch=64)
    model = Model(hybrid_qwen35(tmp_path / "hybrid-qwen35.gguf"), options)
    kept, taken, alone = (Context(model, options, max_rows=1, kept_rows=k) for k in (4, 0, 0))
    try:
        assert kept.has_state and kept.keeps_rows
        rows = _steps(kept, taken, model, model.tokenize("the mill on the river turned", add_special=False), 3)
        last = max(rows)
        kept.rewind(last)  # the last step's token goes: the state is decoded again up to it
        assert kept.rewinds_replayed == 1 and kept.n_past == last
        for position, (_, row) in rows.items():
            assert np.array_equal(kept.kept_row(position, np.empty(model.n_vocab, np.float32)), row)
        replayed = alone.decode(kept.tokens, all_logits=False)[-1]  # the replay's batch, decoded alone
        spare = kept._greedy.keeper.fetch_slot(4, np.empty(model.n_vocab, np.float32))
        assert np.array_equal(spare, replayed)
    finally:
        for ctx in (kept, taken, alone):
            ctx.close()
        model.close()


def test_a_row_asked_for_after_the_keeper_was_detached_is_refused_in_a_sentence(drafter_model, contexts):
    from engine.errors import RuntimeFailure

    kept, _ = contexts
    kept.decode(drafter_model.tokenize("SELECT name FROM", add_special=False), all_logits=False)
    kept._greedy.detach(kept.ptr)
    assert not kept.keeps_rows
    with pytest.raises(RuntimeFailure, match="rows were handed back from the device during a round"):
        kept.kept_row(kept.n_past - 1, np.empty(drafter_model.n_vocab, np.float32))
