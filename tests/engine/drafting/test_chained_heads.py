"""Chained MTP heads (Step 3.5): head j drafts the (j+1)-th token of a round, against llama.cpp.

The target is a tiny step35 model with three heads, written at test time
(tests/engine/synthetic_variants.py): random weights; a variant known by construction, where
head j drafts g_j of the token before it; and that variant with a little noise on every
weight, so hidden states, caches and the rows passed along the chain all count in the drafts.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine import Engine, GenerationConfig, RoundEvent, RuntimeOptions

pytest.importorskip("gguf")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from known import chain, predicted
from speculative_simple import before_the_end, ours, theirs
from synthetic import N_VOCAB
from synthetic_variants import known_tables, step35_mtp

OPTIONS = RuntimeOptions(n_ctx=256, n_batch=256)
PROMPT = "the mill on the river turned; the mill on the river"
N_PREDICT = 24
F = known_tables()
G = [
    [F[x] if x % 2 == 0 else (F[x] + 1) % N_VOCAB for x in range(N_VOCAB)],  # head 0 right after even tokens
    [F[x] if x % 3 else (F[x] + 1) % N_VOCAB for x in range(N_VOCAB)],
    [F[x] if x % 4 != 1 else (F[x] + 1) % N_VOCAB for x in range(N_VOCAB)],
]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    return {
        "random": step35_mtp(folder / "step35.gguf", heads=3),
        "known": step35_mtp(folder / "step35-known.gguf", heads=3, known=(F, G)),
        "noisy": step35_mtp(folder / "step35-noisy.gguf", heads=3, known=(F, G), noise=0.05),
    }


@pytest.fixture(scope="module", params=["random", "known", "noisy"])
def pair(request, files):
    eng = Engine.load(files[request.param], "mtp", OPTIONS)
    yield request.param, eng
    eng.close()


def test_three_heads_draft_at_most_three_tokens_a_round(pair):
    _, eng = pair
    drafter = eng.drafter
    assert drafter.kind == "mtp" and drafter.chained and drafter.n_heads == 3 and drafter.max_depth == 3
    assert drafter.name == "draftlight test step35 with 3 MTP heads 3 chained MTP heads"
    ids = eng.target.tokenize(PROMPT, add_special=True)
    events = list(eng.stream(ids, GenerationConfig(max_tokens=20, depth=5, ignore_eog=True)))
    assert max(e.drafted for e in events if isinstance(e, RoundEvent)) == 3


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_chained_drafts_write_the_plain_text(pair, depth):
    _, eng = pair
    ids = eng.target.tokenize(PROMPT, add_special=True)
    plain = list(eng.stream(ids, GenerationConfig(max_tokens=24, depth=0, ignore_eog=True)))[-1]
    stats = list(eng.stream(ids, GenerationConfig(max_tokens=24, depth=depth, ignore_eog=True)))[-1]
    assert stats.token_ids == plain.token_ids and stats.drafted > 0


@pytest.mark.oracle
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_chained_drafts_equal_llama_cpps_round_by_round(pair, files, depth):
    name, eng = pair
    full = before_the_end(theirs(files[name], "draft-mtp", depth, PROMPT, N_PREDICT, OPTIONS.threads), depth, N_PREDICT)
    assert len(full) >= 6
    if name != "random":
        assert sum(accepted for _, accepted, _ in full) >= 1
    assert ours(eng, depth, PROMPT, N_PREDICT)[: len(full)] == full


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_acceptance_per_position_is_what_the_construction_predicts(files, depth):
    eng = Engine.load(files["known"], "mtp", OPTIONS)
    try:
        stats = list(eng.stream([10, 20, 30], GenerationConfig(max_tokens=30, depth=depth, ignore_eog=True)))[-1]
    finally:
        eng.close()
    tokens, drafted, accepted = predicted(F, chain(*G), [10, 20, 30], depth, 30)
    assert list(stats.token_ids) == tokens
    assert list(stats.drafted_per_position) == drafted
    assert list(stats.accepted_per_position) == accepted
    assert 0 < sum(accepted) < sum(drafted)


def test_auto_never_plans_deeper_than_the_chain(files, tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path))
    eng = Engine.load(files["known"], "mtp", OPTIONS)
    try:
        assert eng.auto_depth(progress=lambda _: None).max_depth == 3
    finally:
        eng.close()
