"""DFlash and EAGLE-3 drafters whose every draft is known by construction, against the prediction and llama.cpp.

Random weights accept almost nothing, which would hide a drafter that is subtly wrong. Here
every weight that could blur the picture is zero (tests/engine/synthetic.py, `known=`): the
target writes F[x] after x, the DFlash drafter always drafts 47 (its mask token's row), the
EAGLE-3 drafter drafts T[w] at every position of a round whose last two tokens are w, x (it
reads the token x with the target's state at w, the token before). F runs 43, 49, 45, 44, 41
and then stays on 47, so drafts fail, land, and at last all land.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine import Engine, GenerationConfig, RuntimeOptions

pytest.importorskip("gguf")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from known import Drafts, predicted
from speculative_simple import before_the_end, ours, theirs
from synthetic import N_VOCAB, dflash, eagle3, hybrid_qwen35

OPTIONS = RuntimeOptions(n_ctx=256, n_batch=256)
PROMPT = "the mill on the river turned; the mill on the river"
N_PREDICT = 24

F = [(3 * x + 1) % 11 + 40 for x in range(N_VOCAB)]
F[41] = F[47] = 47
T = [F[x] if x % 3 else (F[x] + 1) % N_VOCAB for x in range(N_VOCAB)]
DFLASH_DRAFT = [47] * N_VOCAB  # only row 127 (the mask token) is ever read

# a round's drafts, from the token before the last and the last
DRAFTS: dict[str, Drafts] = {
    "dflash": lambda before, last, k: [47] * k,
    "eagle3": lambda before, last, k: [T[before]] * k,
}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    return {
        "target": hybrid_qwen35(folder / "known.gguf", known=(F, F)),
        "dflash": dflash(folder / "dflash-known.gguf", known=DFLASH_DRAFT),
        "eagle3": eagle3(folder / "eagle3-known.gguf", known=T),
    }


@pytest.fixture(scope="module", params=["dflash", "eagle3"])
def pair(request, files):
    eng = Engine.load(files["target"], files[request.param], OPTIONS)
    yield request.param, eng
    eng.close()


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_acceptance_per_position_is_what_the_construction_predicts(pair, depth):
    kind, eng = pair
    assert eng.drafter.kind == kind
    stats = list(eng.stream([10, 20, 30], GenerationConfig(max_tokens=20, depth=depth, ignore_eog=True)))[-1]
    tokens, drafted, accepted = predicted(F, DRAFTS[kind], [10, 20, 30], depth, 20)
    assert list(stats.token_ids) == tokens
    assert list(stats.drafted_per_position) == drafted
    assert list(stats.accepted_per_position) == accepted
    assert 0 < accepted[0] < drafted[0]  # some first drafts fail, some land
    if depth > 1:
        assert accepted[-1] > 0  # and deep ones land once the target settles on 47


@pytest.mark.oracle
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_known_drafts_equal_llama_cpps_round_by_round(pair, files, depth):
    kind, eng = pair
    rounds = theirs(files["target"], f"draft-{kind}", depth, PROMPT, N_PREDICT, OPTIONS.threads, draft=files[kind])
    full = before_the_end(rounds, depth, N_PREDICT)
    assert ours(eng, depth, PROMPT, N_PREDICT)[: len(full)] == full
    assert sum(accepted for _, accepted, _ in full) > 0
