"""Greedy speculation must write exactly what the target alone writes."""

from __future__ import annotations

import time

import pytest

from engine import AUTO, BoxProfile, GenerationConfig, RoundEvent, RunStats, TokenEvent, TokenKind
from engine.depth import FixedDepth
from engine.drafting import NgramDrafter, VerifyBatch
from engine.measure.profile import machine_id, save_profile

N_TOKENS = 48

# The target's first tokens for the code prompt at depth 0: pins template rendering and
# tokenization ("Certainly! Below is a simple implementation of the bubble sort").
CODE_GOLDEN = [95456, 0, 21193, 374, 264, 4285, 8129, 315, 279, 23611, 3378, 12111]


def run(engine, prompt, depth, **kw):
    events = list(engine.stream(prompt, GenerationConfig(max_tokens=N_TOKENS, depth=depth, ignore_eog=True, **kw)))
    return events, events[-1]


@pytest.fixture(scope="module")
def reference(engine, prompts):
    return {name: run(engine, p, 0)[1].token_ids for name, p in prompts.items()}


def test_code_prompt_starts_with_the_known_tokens(engine, reference):
    assert list(reference["code"][: len(CODE_GOLDEN)]) == CODE_GOLDEN
    text = "".join(engine.target.piece(t).decode() for t in reference["code"][:12])
    assert text.startswith("Certainly! Below is")


@pytest.mark.parametrize("name", ["code", "prose", "arithmetic", "json", "long"])
@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_draft_model_depths_match_depth_zero(engine, prompts, reference, name, depth):
    events, stats = run(engine, prompts[name], depth)
    assert stats.token_ids == reference[name]
    assert [e.token_id for e in events if isinstance(e, TokenEvent)] == list(reference[name])
    assert stats.drafted > 0


@pytest.mark.parametrize("name", ["code", "prose", "arithmetic", "json", "long"])
def test_ngram_drafter_matches_depth_zero(engine, prompts, reference, name):
    saved = engine.drafter
    engine.swap_drafter(NgramDrafter())  # swapped, not set_drafter(): that would close the model drafter
    try:
        _, stats = run(engine, prompts[name], 3)
    finally:
        engine.swap_drafter(saved)
    assert stats.token_ids == reference[name]


def test_depth_zero_yields_only_plain_tokens(engine, prompts):
    events, stats = run(engine, prompts["code"], 0)
    kinds = {e.kind for e in events if isinstance(e, TokenEvent)}
    assert kinds == {TokenKind.PLAIN}
    # the first token comes from the prompt's pass, as in llama.cpp; every other from a round
    assert stats.from_prefill == 1 and stats.rounds == stats.generated_tokens - 1 == N_TOKENS - 1
    assert stats.drafted == 0


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_provenance_grammar_and_statistics(engine, prompts, depth):
    events, stats = run(engine, prompts["prose"], depth)
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    rounds = [e for e in events if isinstance(e, RoundEvent)]
    assert rounds[0].from_prefill and not any(r.from_prefill for r in rounds[1:])
    assert [t.kind for t in tokens if t.round_index == 0] == [TokenKind.PLAIN]
    rounds = rounds[1:]
    assert len(rounds) == stats.rounds
    drafted_at = [0] * depth
    accepted_at = [0] * depth
    for r in rounds:
        kinds = [t.kind for t in tokens if t.round_index == r.round_index]
        positions = [t.position for t in tokens if t.round_index == r.round_index]
        assert positions == list(range(len(kinds)))
        if r.drafted == 0:
            assert kinds == [TokenKind.PLAIN]
            continue
        # zero or more accepted, then exactly one replaced or bonus
        assert kinds[:-1] == [TokenKind.ACCEPTED] * (len(kinds) - 1)
        assert kinds[-1] is (TokenKind.BONUS if r.accepted == r.drafted else TokenKind.REPLACED)
        assert len(kinds) == r.accepted + 1
        for i in range(r.drafted):
            drafted_at[i] += 1
        for i in range(r.accepted):
            accepted_at[i] += 1
        replaced = [t for t in tokens if t.round_index == r.round_index and t.kind is TokenKind.REPLACED]
        for t in replaced:
            assert t.rejected_id == r.draft_tokens[t.position] != t.token_id
    assert list(stats.drafted_per_position) == drafted_at
    assert list(stats.accepted_per_position) == accepted_at
    assert list(stats.acceptance_per_position) == [a / d for a, d in zip(accepted_at, drafted_at)]
    assert stats.generated_tokens == len(tokens) == N_TOKENS
    assert stats.mean_accepted_length == pytest.approx((N_TOKENS - 1) / stats.rounds)


def test_probabilities_are_reported(engine, prompts):
    events, _ = run(engine, prompts["code"], 2)
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    assert all(0.0 < t.target_prob <= 1.0 for t in tokens)
    for t in tokens:
        if t.kind in (TokenKind.ACCEPTED, TokenKind.REPLACED):
            assert t.draft_prob is not None and 0.0 <= t.draft_prob <= 1.0
        else:
            assert t.draft_prob is None
    # greedy: an accepted token is the drafter's argmax and the target's argmax
    assert any(t.kind is TokenKind.ACCEPTED and t.draft_prob > 0.5 for t in tokens)


def test_top_candidates_explain_the_verdict(engine, prompts):
    events, _ = run(engine, prompts["prose"], 2, top_candidates=5)
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    for t in tokens:
        assert len(t.target_top) == 5
        assert t.target_top[0][0] == t.token_id  # greedy: the emitted token is the target's first choice
        if t.kind is TokenKind.REPLACED:
            assert t.draft_top[0][0] == t.rejected_id  # and the drafter's first choice was the draft
        if t.kind is TokenKind.BONUS:
            assert t.draft_top == ()


def test_stats_are_consistent(engine, prompts):
    _, stats = run(engine, prompts["json"], 2)
    assert isinstance(stats, RunStats)
    assert stats.decode_s >= stats.draft_s + stats.verify_s
    assert stats.decode_tps > 0 and stats.end_to_end_tps < stats.decode_tps
    assert 0 <= stats.overhead_s < stats.decode_s


def test_a_rounds_time_is_the_engines_work_since_the_last_round_not_the_consumers(engine, prompts, monkeypatch):
    """A round's time runs from the end of the last round's work (its tail too: the policy told,
    its events handed over) to its tokens made; the time the consumer holds an event is no
    round's. The clock jumps while the consumer holds each event, and while the policy is told."""
    real, jump = time.perf_counter, [0.0]
    monkeypatch.setattr(time, "perf_counter", lambda: real() + jump[0])
    hold, tail = 1000.0, 100.0

    class Told(FixedDepth):
        def observe(self, drafted, accepted, seconds=None) -> None:
            jump[0] += tail  # the round's tail: engine time after its tokens are made

    monkeypatch.setattr(engine, "depth_policy", lambda depth, progress=None: Told(2))
    engine.forget()
    events = []
    for event in engine.stream(prompts["code"], GenerationConfig(max_tokens=12, depth=2, ignore_eog=True)):
        events.append(event)
        jump[0] += hold
    stats = events[-1]
    rounds = [e for e in events if isinstance(e, RoundEvent) and not e.from_prefill]
    assert len(rounds) >= 3
    # the first decode round follows the prefill's, whose policy is not told: no tail before it
    assert rounds[0].round_ms < tail * 1e3
    assert all(tail * 1e3 <= r.round_ms < (tail + hold) * 1e3 for r in rounds[1:])
    assert tail * (len(rounds) - 1) <= stats.decode_s < tail * len(rounds)


def test_a_confidence_cut_off_drafts_less_and_changes_nothing(engine, prompts, reference):
    _, full = run(engine, prompts["prose"], 3)
    _, cut = run(engine, prompts["prose"], 3, p_min=0.9)
    assert cut.token_ids == full.token_ids == reference["prose"]
    assert cut.drafted < full.drafted
    assert cut.acceptance > full.acceptance  # the drafts it keeps are the confident ones


class RecordingNgram(NgramDrafter):
    """The n-gram drafter, keeping every verify batch the round hands it."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[VerifyBatch] = []

    def verified(self, batch: VerifyBatch) -> None:
        self.batches.append(batch)


def test_the_drafter_sees_every_verify_batch_it_drafted_for(engine, prompts, reference):
    drafter = RecordingNgram()
    saved = engine.drafter
    engine.swap_drafter(drafter)
    try:
        events, stats = run(engine, prompts["code"], 3)
    finally:
        engine.swap_drafter(saved)
    assert stats.token_ids == reference["code"]
    decode_rounds = [e for e in events if isinstance(e, RoundEvent) and not e.from_prefill]
    assert len(drafter.batches) == len(decode_rounds)  # the prefill's round verifies nothing
    position = len(prompts["code"])  # the reply's first token sits here
    for batch, r, token_ids in zip(drafter.batches, decode_rounds, _tokens_by_round(events)):
        assert batch.start == position
        assert batch.tokens[1:] == r.draft_tokens and batch.accepted == r.accepted
        assert batch.hidden is None  # the n-gram drafter asks for no hidden states
        position += len(token_ids)
    assert any(b.accepted for b in drafter.batches)


def _tokens_by_round(events) -> list[list[int]]:
    rounds: dict[int, list[int]] = {}
    for e in events:
        if isinstance(e, TokenEvent) and e.round_index > 0:
            rounds.setdefault(e.round_index, []).append(e.token_id)
    return [rounds[k] for k in sorted(rounds)]


@pytest.mark.parametrize("depth", [3, AUTO])
def test_no_drafter_means_plain_rounds_whatever_was_asked(engine, prompts, reference, depth):
    saved = engine.drafter
    engine.swap_drafter(None)
    try:
        events, stats = run(engine, prompts["code"], depth)
    finally:
        engine.swap_drafter(saved)
    assert stats.depth == 0 and stats.drafted == 0
    assert {e.kind for e in events if isinstance(e, TokenEvent)} == {TokenKind.PLAIN}
    assert stats.token_ids == reference["code"]


def test_auto_chooses_each_round_from_the_saved_profile(engine, prompts, reference, tmp_path, monkeypatch):
    """Rows nearly free and a free drafter (n-gram): Auto drafts as deep as the cap lets it."""
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path))
    options = engine.options
    save_profile(
        BoxProfile(
            key="auto-test", machine=machine_id(), target=engine.target.path.name, drafter="drafter.gguf",
            runtime=options.runtime_version(), mode=options.mode, threads=options.threads,
            target_rows_s=[0.03 + 0.0001 * k for k in range(8)], drafter_step_s=0.01, overhead_s=0.0,
            acceptance_prior=[0.9] * 7,
        )
    )  # fmt: skip
    saved = engine.drafter
    engine.swap_drafter(NgramDrafter())
    try:
        events, stats = run(engine, prompts["code"], AUTO)
        auto = engine.auto
    finally:
        engine.swap_drafter(saved)
    assert stats.depth == AUTO and auto is not None and auto.in_situ  # n-grams start free, then are timed
    depths = [e.depth for e in events if isinstance(e, RoundEvent) and not e.from_prefill]
    assert depths[0] == 6  # the calibration says deep drafts pay here
    assert stats.token_ids == reference["code"]


@pytest.mark.parametrize("depth", [2, 3])
def test_a_draft_model_at_one_steady_shape_drafts_the_same_tokens(engine, prompts, reference, depth):
    """On a GPU every drafter batch is two rows (a cached row decoded again): same drafts, same text."""
    from dataclasses import replace

    from engine import Model
    from engine.drafting import ModelDrafter

    options = replace(engine.options, steady_draft_shape=True)
    steady = ModelDrafter(Model(engine.drafter.model.path, options), options)
    assert steady.shape == 2 and engine.drafter.shape == 1  # this CPU keeps one row
    saved = engine.drafter
    try:
        usual, _ = run(engine, prompts["code"], depth)
        engine.swap_drafter(steady)
        events, stats = run(engine, prompts["code"], depth)
    finally:
        engine.swap_drafter(saved)
        steady.close()
        steady.model.close()
    assert stats.token_ids == reference["code"]
    drafts = [e.draft_tokens for e in events if isinstance(e, RoundEvent)]
    assert drafts == [e.draft_tokens for e in usual if isinstance(e, RoundEvent)] and any(drafts)
