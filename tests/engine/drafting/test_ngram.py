"""The n-gram drafter's index must propose exactly what a plain scan of the history would."""

from __future__ import annotations

import random

import pytest

from engine import SamplingConfig
from engine.drafting import NgramDrafter, lookup
from engine.drafting.ngram import NgramMatch, match
from engine.sampling import Sampler

SAMPLER = Sampler(SamplingConfig(), 1000)


def sequences() -> dict[str, list[int]]:
    rng = random.Random(1234)
    phrase = [rng.randrange(1000) for _ in range(7)]
    repetitive = []
    while len(repetitive) < 600:  # a phrase quoted again and again, with edits in between
        repetitive += phrase[: rng.randrange(2, 8)] + [rng.randrange(1000) for _ in range(rng.randrange(0, 3))]
    return {
        "random, large vocabulary": [rng.randrange(50_000) for _ in range(600)],
        "random, tiny vocabulary": [rng.randrange(4) for _ in range(600)],
        "repetitive": repetitive,
        "one token over and over": [7] * 200,
    }


SEQUENCES = sequences()


@pytest.mark.parametrize("name", SEQUENCES)
@pytest.mark.parametrize(("max_ngram", "min_ngram", "k"), [(4, 1, 3), (3, 2, 5), (1, 1, 1)])
def test_index_agrees_with_the_scan_at_every_step(name, max_ngram, min_ngram, k):
    seq = SEQUENCES[name]
    drafter = NgramDrafter(max_ngram=max_ngram, min_ngram=min_ngram)
    history: list[int] = []  # grows in place, as the generation loop's does
    proposed = 0
    for token in seq:
        history.append(token)
        draft = drafter.draft(history, k, SAMPLER)
        assert draft.tokens == lookup(history, k, max_ngram, min_ngram), len(history)
        assert draft.rows is None  # an n-gram table has no distribution
        proposed += bool(draft.tokens)
    if name != "random, large vocabulary":
        assert proposed > len(seq) // 2  # the comparison was not all empty drafts


def test_index_agrees_when_the_history_grows_by_several_tokens_a_round():
    """Accepted drafts arrive several at a time; rejected ones are rewound unseen."""
    rng = random.Random(99)
    seq = SEQUENCES["repetitive"]
    drafter = NgramDrafter()
    history = seq[:5]
    drafter.prefill(history)
    while len(history) < len(seq):
        draft = drafter.draft(history, 4, SAMPLER)
        assert draft.tokens == lookup(history, 4)
        step = rng.randrange(1, 6)
        drafter.rewind(len(history) + rng.randrange(0, 2))  # what a round does after its walk
        history.extend(seq[len(history) : len(history) + step])


def test_an_edited_history_rebuilds_the_index():
    seq = SEQUENCES["repetitive"]
    drafter = NgramDrafter()
    history = list(seq[:300])
    assert drafter.draft(history, 3, SAMPLER).tokens == lookup(history, 3)
    # a new conversation that shares only a short prefix with the old one
    edited = [*seq[:20], *reversed(seq[20:300])]
    drafter.prefill(edited)
    assert drafter.draft(edited, 3, SAMPLER).tokens == lookup(edited, 3)
    # and a shorter one
    short = list(seq[:50])
    drafter.prefill(short)
    assert drafter.draft(short, 3, SAMPLER).tokens == lookup(short, 3)


def test_nothing_is_proposed_without_a_repeat():
    history = list(range(500))
    drafter = NgramDrafter()
    grown: list[int] = []
    for token in history:
        grown.append(token)
        assert drafter.draft(grown, 4, SAMPLER).tokens == []
        assert lookup(grown, 4) == []


def test_a_repeat_proposes_what_followed_its_latest_occurrence():
    history = [1, 2, 3, 9, 1, 2, 3, 8, 5, 1, 2, 3]
    drafter = NgramDrafter()
    assert drafter.draft(history, 3, SAMPLER).tokens == [8, 5, 1]
    assert lookup(history, 3) == [8, 5, 1]
    assert match(history, 3) == NgramMatch(start=4, ngram=(1, 2, 3), follow=(8, 5, 1))  # what teaching mode shows
    # the longest match wins over a more recent shorter one
    history = [4, 5, 6, 7, 0, 6, 1, 4, 5, 6]
    assert NgramDrafter().draft(history, 2, SAMPLER).tokens == [7, 0]
    assert match(history, 2) == NgramMatch(start=0, ngram=(4, 5, 6), follow=(7, 0))
    assert match(list(range(9)), 2) is None
    # a depth of zero drafts nothing
    assert NgramDrafter().draft(history, 0, SAMPLER).tokens == []
