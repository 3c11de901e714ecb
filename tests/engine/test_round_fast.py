"""The round against a fake runtime that returns fixed rows: draft, verify, walk, rewind, provenance
and every acceleration, in the fast lane. The real-model tests (test_speculative.py, the oracles)
stay the truth; these say in seconds whether a change to the round keeps its contract."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.depth import FixedDepth
from engine.drafting import Draft, ModelDrafter, NgramDrafter
from engine.events import RoundEvent, RunStats, TokenEvent, TokenKind
from engine.rounds import GenerationConfig, Prefill
from engine.runtime.protocol import Acceleration
from engine.sampling import Sampler, SamplingConfig
from engine.speculative import generate, provenance, speculative_round, walk
from tests.engine.fake_runtime import VOCAB, FakeModel, drafter_rule, plain_reply, rows_for, target_rule

PROMPT = [4, 9, 2]
N_TOKENS = 24
A, R, B, P = TokenKind.ACCEPTED, TokenKind.REPLACED, TokenKind.BONUS, TokenKind.PLAIN

# Each acceleration alone, the draft model's steps each way, and everything at once.
ACCELERATIONS = {
    "none": Acceleration(),
    "device argmax": Acceleration(argmax_on_device=True),
    "kept rows": Acceleration(argmax_on_device=True, keep_draft_rows=True),
    "overlapped probabilities": Acceleration(overlap_probabilities=True),
    "steady shape": Acceleration(steady_draft_shape=True),
    "drafter overlaps": Acceleration(overlap_drafter=True),
    "drafter guesses": Acceleration(overlap_drafter=True, guess_outcome=True),
    "all": Acceleration(True, True, True, True, True, False),
}


def greedy() -> Sampler:
    return Sampler(SamplingConfig(), VOCAB)


def reply(depth: int, acceleration: Acceleration, drafter_kind: str = "model", caches: list | None = None, **config):
    """One reply's events on the fake pair, as Engine.stream runs it: prefill, then the rounds.
    With `caches`, what each cache holds at the end is appended to it: the target's, the drafter's."""
    target_model = FakeModel("target", target_rule, acceleration)
    target = target_model.new_context(max_rows=7)
    if drafter_kind == "model":
        drafter = ModelDrafter(FakeModel("drafter", drafter_rule, acceleration), max_depth=6)
    else:
        drafter = NgramDrafter()
    first_row, prefilled = target.prefill(PROMPT)
    drafter.prefill(PROMPT)
    cfg = GenerationConfig(max_tokens=N_TOKENS, depth=depth, **config)
    events = list(
        generate(target, drafter, FixedDepth(depth), list(PROMPT), cfg, prefill=Prefill(prefilled, 0.0, first_row))
    )
    if caches is not None and drafter_kind == "model":
        caches += [list(target.tokens), list(drafter.ctx.tokens)]
    return events


def tokens(events: list) -> list[TokenEvent]:
    return [e for e in events if isinstance(e, TokenEvent)]


def test_walk_keeps_drafts_while_the_target_agrees_and_names_each_token():
    draft = Draft([5, 16, 30])
    rows = rows_for([1, 5, 16, 20], target_rule)  # the target's choices: 4, 16, 17, 29
    rows[0, 5], rows[1, 16] = 9.0, 9.0  # it agrees with the first two drafts
    verdict = walk(draft, rows, greedy())
    assert (verdict.accepted, verdict.token) == (2, int(rows[2].argmax()))
    emitted = provenance(draft, verdict, 0, want_probs=True)
    assert [(e.token, e.kind, e.rejected) for e in emitted] == [(5, A, None), (16, A, None), (17, R, 30)]


def test_a_draft_kept_whole_ends_with_the_bonus_and_no_draft_with_a_plain_token():
    rows = rows_for([1, 4], target_rule)  # the target's choices: 4, then 13
    kept = walk(Draft([4]), rows, greedy())
    assert [(e.token, e.kind) for e in provenance(Draft([4]), kept, 0, True)] == [(4, A), (13, B)]
    plain = walk(Draft(), rows[:1], greedy())
    assert [(e.token, e.kind) for e in provenance(Draft(), plain, 0, True)] == [(4, P)]


def test_one_round_rewinds_both_caches_to_what_was_kept():
    target = FakeModel("target", target_rule).new_context(max_rows=7)
    drafter = ModelDrafter(FakeModel("drafter", drafter_rule), max_depth=6)
    history = [4, 9, 2, 7]  # the target's cache holds all but the last
    target.sync(history[:-1])
    drafter.prefill(history)
    r = speculative_round(target, drafter, history, 3, greedy(), GenerationConfig())
    # 7 -> 22 -> 3 -> 10 by the target's rule; the drafter agrees at 7 and 22, and at 3 (no multiple of 5)
    assert r.draft.tokens == [22, 3, 10] and (r.verdict.accepted, r.verdict.token) == (3, 31)
    assert [e.kind for e in r.emitted] == [A, A, A, B]
    assert target.tokens == [*history, 22, 3, 10] and target.decodes[-1] == [7, 22, 3, 10]
    assert drafter.ctx.n_past <= len(history) + 3


def test_a_refused_draft_is_rewound_from_both_caches():
    target = FakeModel("target", target_rule).new_context(max_rows=7)
    drafter = ModelDrafter(FakeModel("drafter", drafter_rule), max_depth=6)
    history = [4, 9, 2, 5]  # 5 is a multiple of 5: the drafter's first draft is one past the target's
    target.sync(history[:-1])
    drafter.prefill(history)
    r = speculative_round(target, drafter, history, 3, greedy(), GenerationConfig())
    assert r.draft.tokens[0] == 17 and r.verdict.accepted == 0  # the target's is 16
    assert [(e.token, e.kind, e.rejected) for e in r.emitted] == [(16, R, 17)]
    assert target.tokens == history and drafter.ctx.n_past <= len(history)


@pytest.mark.parametrize("depth", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("name", list(ACCELERATIONS))
def test_greedy_speculation_writes_what_the_target_alone_writes(name, depth):
    caches: list = []
    events = reply(depth, ACCELERATIONS[name], caches=caches)
    written = plain_reply(PROMPT[-1], N_TOKENS)
    assert [t.token_id for t in tokens(events)] == written
    # both caches rewound to what was kept: the target's holds all but the reply's last token, the
    # drafter's a prefix of that (a guess past it, at most, where it guesses)
    history = [*PROMPT, *written]
    target_cache, drafter_cache = caches
    assert target_cache == history[:-1]
    assert drafter_cache == history[: len(drafter_cache)] and len(drafter_cache) <= len(history)
    stats = events[-1]
    assert isinstance(stats, RunStats) and stats.generated_tokens == N_TOKENS
    assert all(math.isfinite(t.target_prob) and 0.0 < t.target_prob <= 1.0 for t in tokens(events))


def test_depth_two_drafts_and_provenance_round_by_round():
    """Known by construction: the drafter is wrong exactly after a multiple of 5."""
    events = reply(2, Acceleration())
    rounds = [e for e in events if isinstance(e, RoundEvent)]
    kinds = [t.kind for t in tokens(events)]
    # round 0 is the prompt's own row (plain), then the rounds' drafts as the walk saw them
    assert kinds[0] is P and rounds[0].from_prefill
    written = plain_reply(PROMPT[-1], N_TOKENS)
    expected: list[TokenKind] = [P]
    drafts: list[tuple[int, ...]] = []
    pos, last = 1, written[0]
    while pos < N_TOKENS:
        k = min(2, N_TOKENS - pos - 1)
        proposed, t = [], last
        for _ in range(k):  # the drafter's own chain: it drafts on from its own proposals
            t = drafter_rule(t)
            proposed.append(t)
        drafts.append(tuple(proposed))
        kept = 0
        for i, d in enumerate(proposed):
            if d != written[pos + i]:
                break
            kept += 1
        expected += [A] * kept + ([B] if kept == len(proposed) and proposed else [R] if proposed else [P])
        pos += kept + 1
        last = written[pos - 1]
    assert kinds == expected[:N_TOKENS]
    assert [r.draft_tokens for r in rounds[1:]] == drafts[: len(rounds) - 1]
    assert kinds.count(R) >= 3 and kinds.count(B) >= 3  # both outcomes happen in this reply


@pytest.mark.parametrize("name", [n for n in ACCELERATIONS if n != "none"])
def test_every_acceleration_keeps_the_drafts_the_provenance_and_the_probabilities(name):
    base, fast = reply(3, Acceleration()), reply(3, ACCELERATIONS[name])
    assert [(t.token_id, t.kind, t.rejected_id) for t in tokens(fast)] == [
        (t.token_id, t.kind, t.rejected_id) for t in tokens(base)
    ]
    base_rounds = [e.draft_tokens for e in base if isinstance(e, RoundEvent)]
    assert [e.draft_tokens for e in fast if isinstance(e, RoundEvent)] == base_rounds
    for a, b in zip(tokens(fast), tokens(base)):
        assert a.target_prob == pytest.approx(b.target_prob, rel=1e-6)
        assert (a.draft_prob is None) == (b.draft_prob is None)
        if a.draft_prob is not None:
            assert a.draft_prob == pytest.approx(b.draft_prob, rel=1e-6)


def test_a_guess_that_comes_true_saves_the_next_rounds_first_step():
    events = reply(2, ACCELERATIONS["drafter guesses"])
    guessed = [e for e in events if isinstance(e, RoundEvent) and e.guessed]
    assert guessed  # the drafter guessed the target's token after a fully kept draft at least once
    assert all(e.drafted > 0 for e in guessed)


def test_overlapped_probabilities_arrive_with_the_events():
    """Side work computes the target's probabilities in the next decode's wait: every event that goes
    out carries its number, and the numbers are the ones computed at once."""
    late = reply(2, ACCELERATIONS["overlapped probabilities"])
    eager = reply(2, Acceleration())
    assert [t.target_prob for t in tokens(late)] == pytest.approx([t.target_prob for t in tokens(eager)])


def test_ngram_drafts_need_no_runtime_of_their_own():
    events = reply(3, Acceleration(), drafter_kind="ngram")
    assert [t.token_id for t in tokens(events)] == plain_reply(PROMPT[-1], N_TOKENS)
    assert any(t.kind is A for t in tokens(events))  # the rule cycles: text repeats, and n-grams find it


def test_rejection_sampling_draws_from_the_target_and_names_replacements():
    """Sampling: each emitted token's provenance follows min(1, p/q) acceptance; the reply is seeded."""
    config = {"sampling": SamplingConfig(temperature=1.0, seed=7)}
    first, again = reply(2, Acceleration(), **config), reply(2, Acceleration(), **config)
    assert [(t.token_id, t.kind) for t in tokens(first)] == [(t.token_id, t.kind) for t in tokens(again)]
    kinds = {t.kind for t in tokens(first)}
    assert A in kinds and (R in kinds or B in kinds)
    assert all(np.isfinite(t.target_prob) for t in tokens(first))
