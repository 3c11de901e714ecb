"""DFlash2 (a selector lattice) and DSpark (a Markov head): the DFlash drafter's variants, against llama.cpp.

The drafters are tiny files for the synthetic qwen35 target (tests/engine/synthetic_variants.py):
random weights, and variants known by construction. llama.cpp does not log DFlash2's drafts, so
for DFlash2 the comparison is each round's draft count, acceptance and token, and the
construction says which tokens were drafted.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine import Engine, GenerationConfig, RuntimeOptions
from engine.models.discover import drafter_kind

pytest.importorskip("gguf")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from known import chain, predicted
from speculative_simple import before_the_end, ours, theirs
from synthetic import N_VOCAB, hybrid_qwen35
from synthetic_variants import CYCLE, cycle_table, dflash2, dspark, known_tables

OPTIONS = RuntimeOptions(n_ctx=256, n_batch=256)
PROMPT = "the mill on the river turned; the mill on the river"
N_PREDICT = 24
F = known_tables()
H = [F[x] if x % 3 else (F[x] + 1) % N_VOCAB for x in range(N_VOCAB)]  # DSpark's Markov table
F_CYCLE = cycle_table(CYCLE)  # a target that runs into CYCLE, the only tokens DFlash2's candidates hold
CHOICE = [CYCLE.index(F_CYCLE[t]) for t in range(N_VOCAB)]  # DFlash2 picks CYCLE[CHOICE[x]] after x
CHOICE[CYCLE[1]] = 6  # wrong after CYCLE[1], and after every fifth token off the cycle
for t in range(N_VOCAB):
    if t not in CYCLE and t % 5 == 0:
        CHOICE[t] = (CHOICE[t] + 1) % len(CYCLE)
LATTICE = [CYCLE[c] for c in CHOICE]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    return {
        "target": hybrid_qwen35(folder / "hybrid.gguf"),
        "known target": hybrid_qwen35(folder / "hybrid-known.gguf", known=(F, F)),
        "cycle target": hybrid_qwen35(folder / "hybrid-cycle.gguf", known=(F_CYCLE, F_CYCLE)),
        "dflash2": dflash2(folder / "dflash2.gguf"),
        "dspark": dspark(folder / "dspark.gguf"),
        "dflash2 known": dflash2(folder / "dflash2-known.gguf", top_k=len(CYCLE), known=(CYCLE, CHOICE)),
        "dspark known": dspark(folder / "dspark-known.gguf", known=H),
    }


CASES = {  # name: (target, drafter, llama.cpp's --spec-type)
    "dflash2": ("target", "dflash2", "draft-dflash"),
    "dspark": ("target", "dspark", "draft-dspark"),
    "dflash2 known": ("cycle target", "dflash2 known", "draft-dflash"),
    "dspark known": ("known target", "dspark known", "draft-dspark"),
}


@pytest.fixture(scope="module", params=list(CASES))
def pair(request, files):
    target, drafter, _ = CASES[request.param]
    eng = Engine.load(files[target], files[drafter], OPTIONS)
    yield request.param, eng
    eng.close()


def test_each_variant_is_named_and_sized_as_llama_cpp_does(pair, files):
    name, eng = pair
    drafter = eng.drafter
    if name.startswith("dflash2"):
        assert drafter.kind == "dflash" and drafter.variant == "DFlash2" and not drafter.has_distribution
        assert drafter.max_depth == 3  # a block of 4: the last token and 3 masks
    else:  # the anchor drafts too: a block of 4 drafts 4
        assert drafter.kind == "dspark" and drafter.variant == "DSpark" and drafter.max_depth == 4
    target, file, _ = CASES[name]
    assert drafter_kind(files[target], files[file]) == drafter.kind


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_variant_drafts_write_the_plain_text(pair, depth):
    _, eng = pair
    ids = eng.target.tokenize(PROMPT, add_special=True)
    plain = list(eng.stream(ids, GenerationConfig(max_tokens=24, depth=0, ignore_eog=True)))[-1]
    stats = list(eng.stream(ids, GenerationConfig(max_tokens=24, depth=depth, ignore_eog=True)))[-1]
    assert stats.token_ids == plain.token_ids and stats.drafted > 0


@pytest.mark.oracle
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_variant_drafts_equal_llama_cpps_round_by_round(pair, files, depth):
    name, eng = pair
    target, drafter, spec_type = CASES[name]
    rounds = theirs(files[target], spec_type, depth, PROMPT, N_PREDICT, OPTIONS.threads, draft=files[drafter])
    full = before_the_end(rounds, depth, N_PREDICT)
    assert len(full) >= 5
    mine = ours(eng, depth, PROMPT, N_PREDICT)[: len(full)]
    if name.startswith("dflash2"):  # no drafts in llama.cpp's log: compare what it does log
        assert all(drafts == [] for drafts, _, _ in full)
        drafted = [len(drafts) for drafts, _, _ in mine]
        assert [(a, last) for _, a, last in mine] == [(a, last) for _, a, last in full]
        assert drafted == [min(depth, N_PREDICT) for _ in mine]
    else:
        assert mine == full
    if "known" in name:
        assert sum(accepted for _, accepted, _ in full) >= 1


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("name", ["dflash2 known", "dspark known"])
def test_acceptance_per_position_is_what_the_construction_predicts(files, name, depth):
    target, drafter, _ = CASES[name]
    table, rule = (F_CYCLE, chain(LATTICE)) if name.startswith("dflash2") else (F, chain(H))
    prompt = [10, 20, 11]  # a prompt whose reply meets the construction's wrong drafts at every depth
    eng = Engine.load(files[target], files[drafter], OPTIONS)
    try:
        stats = list(eng.stream(prompt, GenerationConfig(max_tokens=30, depth=depth, ignore_eog=True)))[-1]
    finally:
        eng.close()
    tokens, drafted, accepted = predicted(table, rule, prompt, depth, 30)
    assert list(stats.token_ids) == tokens
    assert list(stats.drafted_per_position) == drafted
    assert list(stats.accepted_per_position) == accepted
    assert 0 < sum(accepted) < sum(drafted)


def test_dspark_without_a_confidence_head_stops_on_the_tokens_probability(files, tmp_path):
    bare = dspark(tmp_path / "dspark-bare.gguf", confidence=False)
    eng = Engine.load(files["target"], bare, OPTIONS)
    try:
        assert not eng.drafter.confidence
        ids = eng.target.tokenize(PROMPT, add_special=True)
        runs = [
            list(eng.stream(ids, GenerationConfig(max_tokens=24, depth=3, ignore_eog=True, p_min=p)))[-1]
            for p in (0.0, 1e-9)  # every token's probability is above 1e-9: nothing may stop
        ]
    finally:
        eng.close()
    assert runs[0].drafted == runs[1].drafted > 0
