"""A DFlash drafter for a hybrid target: a block of drafts from the target's layer inputs, against llama.cpp.

Both models are tiny random-weight files written at test time (tests/engine/synthetic.py);
one drafter may only draft three tokens the target writes often, so some drafts land.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine import (
    Engine,
    GenerationConfig,
    IncompatibleDrafter,
    ModelFileError,
    RoundEvent,
    RuntimeOptions,
    TokenEvent,
    TokenKind,
)

pytest.importorskip("gguf")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from speculative_simple import before_the_end, ours, theirs
from synthetic import dflash, hybrid_qwen35, mamba

OPTIONS = RuntimeOptions(n_ctx=256, n_batch=256)
PROMPT = "the mill on the river turned; the mill on the river"
N_PREDICT = 24
OFTEN = (43, 97, 58)  # the target's most frequent tokens on PROMPT (seed 42)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    return {
        "target": hybrid_qwen35(folder / "hybrid.gguf"),
        "dflash": dflash(folder / "dflash.gguf"),
        "narrow": dflash(folder / "dflash-narrow.gguf", vocab=OFTEN),
    }


@pytest.fixture(scope="module", params=["dflash", "narrow"])
def pair(request, files):
    eng = Engine.load(files["target"], files[request.param], OPTIONS)
    yield request.param, eng
    eng.close()


def test_the_drafter_reads_the_layers_its_file_names(pair):
    _, eng = pair
    assert eng.drafter.kind == "dflash" and eng.drafter.layers == [0, 1]
    assert eng.drafter.block == 4 and eng.drafter.max_depth == 3  # a block of 4: the last token and 3 masks


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_dflash_drafts_write_the_plain_text(pair, depth):
    name, eng = pair
    ids = eng.target.tokenize(PROMPT, add_special=True)
    plain = list(eng.stream(ids, GenerationConfig(max_tokens=32, depth=0, ignore_eog=True)))[-1]
    events = list(eng.stream(ids, GenerationConfig(max_tokens=32, depth=depth, ignore_eog=True)))
    assert events[-1].token_ids == plain.token_ids and events[-1].drafted > 0
    assert all(r.drafted <= depth for r in events if isinstance(r, RoundEvent))
    kinds = {e.kind for e in events if isinstance(e, TokenEvent)}
    assert TokenKind.REPLACED in kinds
    if name == "narrow":
        assert TokenKind.ACCEPTED in kinds or TokenKind.BONUS in kinds


@pytest.mark.oracle
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_dflash_drafts_equal_llama_cpps_round_by_round(pair, files, depth):
    name, eng = pair
    rounds = theirs(files["target"], "draft-dflash", depth, PROMPT, N_PREDICT, OPTIONS.threads, draft=files[name])
    full = before_the_end(rounds, depth, N_PREDICT)
    assert len(full) >= 6
    if name == "narrow":
        assert sum(accepted for _, accepted, _ in full) >= 1
    assert ours(eng, depth, PROMPT, N_PREDICT)[: len(full)] == full


def test_a_dflash_drafter_for_another_target_is_refused_in_a_sentence(files, tmp_path):
    other = mamba(tmp_path / "mamba.gguf")  # as wide, as many layers, but none of them hand out their inputs
    with pytest.raises(IncompatibleDrafter) as refused:
        Engine.load(other, files["dflash"], OPTIONS)
    assert str(refused.value) == (
        "The drafter cannot draft for this target: it is a DFlash drafter reading the target's layers, which "
        "llama.cpp does not hand out for draftlight test mamba's architecture (mamba): it was trained for "
        "another target."
    )


def test_a_truncated_drafter_file_is_refused_in_one_sentence(files, tmp_path):
    cut = tmp_path / "dflash-cut.gguf"
    cut.write_bytes(files["dflash"].read_bytes()[:-4096])
    with pytest.raises(ModelFileError) as refused:
        Engine.load(files["target"], cut, OPTIONS)
    assert "dflash-cut.gguf" in str(refused.value) and "\n" not in str(refused.value)
