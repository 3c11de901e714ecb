"""A draft model that takes in its round's last draft while the target verifies the round.

On a GPU (RuntimeOptions.overlap_drafter) the drafter's decode of its last draft is launched
right after the verify's, beside it on the device, so every step of the next round is one row:
no two-row catch-up after a round whose drafts were all kept, one graph for every step. Here
it is forced on: the drafts, tokens and probabilities must be the usual drafter's, and every
drafter batch after the first round's must be one row.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest

from engine import GenerationConfig, Model, RoundEvent, RuntimeOptions, TokenEvent, TokenKind
from engine.drafting import ModelDrafter
from engine.drafting.model import step_plan
from engine.runtime import Context

N_TOKENS = 40


def _drafter(engine, **options):
    opts = replace(engine.options, overlap_drafter=True, **options)
    return ModelDrafter(Model(engine.drafter.model.path, opts), opts)


@pytest.fixture(scope="module")
def overlapping(engine):
    drafter = _drafter(engine, guess_outcome=False)
    yield drafter
    drafter.close()
    drafter.model.close()


@pytest.fixture(scope="module")
def guessing(engine):
    drafter = _drafter(engine)  # guess_outcome None: it guesses wherever it overlaps
    yield drafter
    drafter.close()
    drafter.model.close()


def reply(engine, prompt, depth: int, drafter=None, **kw) -> tuple[list, list[int]]:
    """A reply's events, and the rows of every batch the drafter decoded after its prefill."""
    saved = engine.drafter
    if drafter is not None:
        engine.swap_drafter(drafter)
    batches: list[int] = []

    def seen(tokens: list[int], start: int, _hidden) -> None:
        if start >= len(prompt) - 1:  # not the prompt's own (the prefill)
            batches.append(len(tokens))

    stop = engine.drafter.ctx.observe_batches(seen, hidden_states=False)
    try:
        config = GenerationConfig(max_tokens=N_TOKENS, depth=depth, ignore_eog=True, **kw)
        events = list(engine.stream(prompt, config))
    finally:
        stop()
        engine.swap_drafter(saved)
    return events, batches


def test_the_plan_follows_the_options_and_the_model():
    gpu_like = RuntimeOptions(overlap_drafter=True, steady_draft_shape=True)
    assert step_plan(gpu_like.acceleration(), has_state=False) == (True, 1)
    assert step_plan(gpu_like.acceleration(), has_state=True) == (False, 1)  # a rejected last draft would replay
    assert step_plan(replace(gpu_like, overlap_drafter=False).acceleration(), has_state=False) == (False, 2)
    options = RuntimeOptions(overlap_drafter=False, steady_draft_shape=False)
    assert step_plan(options.acceleration(), has_state=False) == (False, 1)


def test_this_cpu_does_not_overlap_by_default(engine):
    assert (
        not engine.options.acceleration().overlap_drafter and not engine.drafter.overlaps and engine.drafter.shape == 1
    )


@pytest.mark.parametrize("depth", [1, 3])
def test_the_overlapping_drafter_drafts_and_writes_what_the_usual_one_does(engine, prompts, overlapping, depth):
    usual, usual_batches = reply(engine, prompts["code"], depth)
    events, batches = reply(engine, prompts["code"], depth, overlapping)
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    assert tokens == [e for e in usual if isinstance(e, TokenEvent)]  # ids, provenance, probabilities
    rounds = [e for e in events if isinstance(e, RoundEvent) and e.drafted]
    assert [e.draft_tokens for e in rounds] == [
        e.draft_tokens for e in usual if isinstance(e, RoundEvent) and e.drafted
    ]
    # Both ways through a round were taken: every draft kept (the bonus follows the last
    # draft, already in the drafter's cache) and a draft refused (the cache is cut back).
    assert any(e.accepted == e.drafted for e in rounds) and any(e.accepted < e.drafted for e in rounds)
    # The first round catches up on the prompt's last token and the first reply token; every
    # batch after it is one row. The usual drafter catches up with two rows after every round
    # whose drafts were all kept.
    assert batches[0] == 2 and set(batches[1:]) == {1}
    kept_all = sum(e.accepted == e.drafted for e in rounds[:-1])  # the last round has no next
    assert usual_batches.count(2) == 1 + kept_all and set(usual_batches) == {1, 2}
    # One decode more a round (the last draft's, during the verify); in rows, one more for each
    # round that refused a draft (its last draft, decoded and cut back) and for the last round.
    assert len(batches) == len(usual_batches) + len(rounds)
    assert sum(batches) == sum(usual_batches) + (len(rounds) - 1 - kept_all) + 1


def test_a_sampled_reply_draws_the_same_tokens(engine, prompts, overlapping):
    from engine import SamplingConfig

    sampling = SamplingConfig(temperature=0.8, seed=7)
    usual, _ = reply(engine, prompts["prose"], 3, sampling=sampling)
    events, batches = reply(engine, prompts["prose"], 3, overlapping, sampling=sampling)
    assert [e for e in events if isinstance(e, TokenEvent)] == [e for e in usual if isinstance(e, TokenEvent)]
    assert set(batches[1:]) == {1}


def test_a_fed_batch_leaves_the_cache_as_a_decoded_one(engine, prompts):
    """feed() decodes without reading the result; the next decode's row is the same, bit for bit."""
    prompt = prompts["code"]
    fed, decoded = (Context(engine.drafter.model, engine.options) for _ in range(2))
    try:
        for ctx in (fed, decoded):
            ctx.decode(prompt, all_logits=False)
        fed.feed([prompt[-1]])
        decoded.decode([prompt[-1]], all_logits=False)
        assert fed.tokens == decoded.tokens == [*prompt, prompt[-1]]
        after_feed = fed.decode([prompt[0]], all_logits=False)[-1].copy()
        after_decode = decoded.decode([prompt[0]], all_logits=False)[-1]
        assert np.array_equal(after_feed, after_decode)
    finally:
        fed.close()
        decoded.close()


@pytest.mark.parametrize("depth", [1, 3])
@pytest.mark.parametrize("in_time", [True, False], ids=["row held in the verify", "row collected after"])
def test_a_drafter_that_guesses_the_outcome_drafts_and_writes_what_the_usual_one_does(
    engine, prompts, overlapping, guessing, depth, in_time, monkeypatch
):
    """`in_time`: the guess's decode is expected done before the verify (always, on this CPU), so
    its row is copied during the verify into the rows the next round drafts into; or it is not, and
    the next round collects the row when it begins."""
    assert guessing.guesses and not overlapping.guesses and not engine.drafter.guesses
    fed, fed_batches = reply(engine, prompts["code"], depth, overlapping)
    asked: list[bool] = []

    def holds(ends, took) -> bool:
        asked.append(ends is None)  # no limit here: the CPU's decodes are done when they return
        return in_time

    monkeypatch.setattr(guessing, "_holds_in_time", holds)
    made, kept = guessing.guesses_made, guessing.guesses_kept
    events, batches = reply(engine, prompts["code"], depth, guessing)
    made, kept = guessing.guesses_made - made, guessing.guesses_kept - kept
    assert asked == [True] * made
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    assert tokens == [e for e in fed if isinstance(e, TokenEvent)]  # ids, provenance, probabilities
    rounds = [e for e in events if isinstance(e, RoundEvent) and e.drafted]
    assert [e.draft_tokens for e in rounds] == [e.draft_tokens for e in fed if isinstance(e, RoundEvent) and e.drafted]
    # A guess every round (decoded after the last draft's); a round begins from it exactly where
    # the round before kept every draft and the target's token was the guess. Both happened.
    assert made == len(rounds)
    guessed = [e.guessed for e in rounds]
    assert kept == sum(guessed) and 0 < kept < len(rounds) - 1
    assert all(before.accepted == before.drafted for before, e in itertools.pairwise(rounds) if e.guessed)
    bonus = [e for e in tokens if e.kind is TokenKind.BONUS]
    assert kept < len(bonus)  # some full rounds were followed by a target token the drafter did not guess
    # Every guess is one batch of one row more; every guess that came true saves the next round's step.
    assert set(batches[1:]) == {1}
    assert len(batches) == len(fed_batches) + made - kept


def test_a_sampled_reply_makes_no_guess(engine, prompts, guessing):
    from engine import SamplingConfig

    made = guessing.guesses_made
    events, _ = reply(engine, prompts["prose"], 3, guessing, sampling=SamplingConfig(temperature=0.8, seed=7))
    assert guessing.guesses_made == made
    assert not any(e.guessed for e in events if isinstance(e, RoundEvent))


class Alternating:
    """Depth 3, then 0, in turn: a round that drafts nothing follows a guess."""

    setting = 3

    def __init__(self) -> None:
        self.rounds = 0

    def choose(self) -> int:
        self.rounds += 1
        return 3 if self.rounds % 2 else 0

    def observe(self, *args) -> None:
        pass


def test_a_guess_that_a_plain_round_passes_over_is_cut_back(engine, prompts, guessing, monkeypatch):
    """The round after a guess drafts nothing, and keeps the guess's position without checking it:
    the drafter's cache must hold what the reply committed there, not the guess. Every guess is
    made wrong (the drafter's choice, one id on), so the case arises whatever the CPU's kernels make
    of the text: wherever a depth-3 round keeps its drafts, its bonus token is not the guess."""
    import engine.drafting.model as model_module
    from engine.runtime.llama.context import Context as LlamaContext
    from engine.speculative import Prefill, generate

    guesses, guess, choose = [], guessing._guess_outcome, model_module.choose_draft
    n_vocab = guessing.model.n_vocab

    def wrong(*args, **kw) -> int:
        token = choose(*args, **kw)
        return token + 1 if token + 1 < n_vocab else token - 1

    def recorded(*args) -> None:
        with monkeypatch.context() as m:
            m.setattr(model_module, "choose_draft", wrong)
            guess(*args)
        guesses.append(guessing._guess)

    monkeypatch.setattr(guessing, "_guess_outcome", recorded)
    prompt = prompts["code"]
    config = GenerationConfig(max_tokens=N_TOKENS, ignore_eog=True)
    target = LlamaContext(engine.target, engine.options, max_rows=4)
    try:
        replies = []
        for drafter in (engine.drafter, guessing):
            target.clear()
            drafter.reset()
            first_row, _ = target.prefill(prompt)
            drafter.prefill(prompt)
            history = list(prompt)
            policy = Alternating()
            events = list(generate(target, drafter, policy, history, config, prefill=Prefill(first_row=first_row)))
            replies.append([e for e in events if isinstance(e, TokenEvent)])
            held = drafter.ctx.tokens[: len(history) - 1]  # the last position may hold a guess still to be checked
            assert held == history[: len(held)]
        assert replies[1] == replies[0]
        # What this is about happened: a round kept its three drafts, the target's token was not
        # the guess, and the plain round after it passed over the guess's position.
        bonus = {len(prompt) + i for i, e in enumerate(replies[1]) if e.kind is TokenKind.BONUS}
        assert any(at in bonus and history[at] != token for at, token in guesses)
    finally:
        target.close()


def test_a_draft_refused_by_p_min_after_a_guess_is_the_usual_draft(engine, prompts, overlapping, guessing):
    fed, _ = reply(engine, prompts["code"], 3, overlapping, p_min=0.5)
    events, _ = reply(engine, prompts["code"], 3, guessing, p_min=0.5)
    assert [e for e in events if isinstance(e, TokenEvent)] == [e for e in fed if isinstance(e, TokenEvent)]
    rounds = [e for e in events if isinstance(e, RoundEvent) and not e.from_prefill]
    assert [e.draft_tokens for e in rounds] == [
        e.draft_tokens for e in fed if isinstance(e, RoundEvent) and not e.from_prefill
    ]
    assert any(e.drafted < 3 for e in rounds) and any(e.guessed for e in rounds)
    assert not any(e.guessed and not e.drafted for e in rounds)  # a round that drafted nothing took no guess's draft
