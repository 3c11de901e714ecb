"""The round's cheaper bookkeeping changes no figure: a draft row chosen in place and copied
later, a softmax into a reused buffer, a late probability set on the event itself."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from engine.drafting.base import Draft, choose_draft
from engine.events import TokenEvent, TokenKind
from engine.reporting import Outbox
from engine.runtime.side import SideWork
from engine.sampling import Sampler, SamplingConfig, softmax_at, softmax_parts

V = 4096
BANNED = (7, 4000)


def logits(seed: int, dtype=np.float32) -> np.ndarray:
    row = np.random.default_rng(seed).standard_normal(V).astype(dtype)
    row[BANNED[0]] = 50.0  # banned: never the draft, whatever its logit
    return row


@pytest.mark.parametrize("p_min", [0.0, 0.5])
def test_a_draft_chosen_in_place_equals_one_chosen_on_a_copy(p_min):
    sampler = Sampler(SamplingConfig(), V)
    for seed in range(20):
        eager_row, late_row = np.empty(V, np.float32), np.full(V, np.nan, np.float32)
        source = logits(seed)
        eager = choose_draft(eager_row, source.copy(), sampler, p_min, BANNED)
        in_place = source.copy()
        late = choose_draft(late_row, in_place, sampler, p_min, BANNED, copy=False)
        assert late == eager and late != BANNED[0]
        assert np.isnan(late_row).all()  # not written: the caller copies it later
        np.copyto(late_row, in_place)  # what the drafter's side work does
        assert np.array_equal(late_row, eager_row)  # banned tokens included


def test_sampling_always_copies_first():
    sampler = Sampler(SamplingConfig(temperature=0.8, seed=3), V)
    row, source = np.empty(V, np.float32), logits(1)
    choose_draft(row, source, sampler, 0.0, BANNED, copy=False)
    assert row[BANNED[0]] == -np.inf and source[BANNED[0]] == 50.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_parts_are_bit_for_bit_the_plain_formula(dtype):
    for seed, size in [(1, V), (2, 151936), (3, V), (4, 17)]:
        row = np.random.default_rng(seed).standard_normal(size).astype(dtype) * 8
        top = row.max()
        assert softmax_parts(row) == (float(top), float(np.exp(row - top).sum()))
    assert softmax_at(row, 3) == math.exp(float(row[3]) - float(top)) / float(np.exp(row - top).sum())


def test_draft_probabilities_after_a_late_copy_equal_the_eager_ones():
    sampler = Sampler(SamplingConfig(), V)
    rows = np.stack([logits(s) for s in range(3)])
    eager = Draft([1, 2, 3], rows.copy(), sampler)
    late_rows = rows.copy()
    late_rows[-1] = 0.0  # the last row arrives through side work, before prepare reads it
    late = Draft([1, 2, 3], late_rows, sampler)
    side = SideWork()
    side.add(lambda: np.copyto(late_rows[-1], rows[-1]))
    side.add(late.prepare)
    side.run()
    assert late.probs([1, 2, 3]) == eager.probs([1, 2, 3])
    assert late.confidences() == eager.confidences()
    assert late.rank(2, 9) == eager.rank(2, 9)


def test_a_late_probability_goes_out_in_the_event_and_no_frozen_event_is_changed():
    from engine.runtime.side import Job

    class Round:
        def __init__(self) -> None:
            self.pending = [Job(lambda: 0.25, may_wait=True)]  # a job a token: its target probability

    event = TokenEvent(token_id=5, text="a", kind=TokenKind.PLAIN, round_index=3, position=0, target_prob=math.nan)
    outbox = Outbox()
    outbox.put([event])
    outbox.wait_for(3, Round())
    (out,) = outbox.release()
    assert out.target_prob == 0.25 and out == dataclasses.replace(event, target_prob=0.25)
    assert math.isnan(event.target_prob)  # the event made before side work is as it was made
    assert outbox.release() == []
