"""Gemma 4's assistant: a drafter that reads the target's memory instead of keeping its own.

The files are tiny Gemma 4 models written at test time (tests/engine/synthetic_gemma4.py):
random weights, compared with llama.cpp's draft-mtp driver round by round, and a pair known by
construction, where the assistant drafts g[x] after x (or reads the target's hidden state and
drafts g[f[x]]) and the target writes f[x].
"""

from __future__ import annotations

import sys
from pathlib import Path

import llama_cpp.llama_cpp as llama
import pytest

from engine import Engine, GenerationConfig, IncompatibleDrafter, RuntimeOptions, TokenKind

pytest.importorskip("gguf")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from known import chain, predicted
from speculative_simple import before_the_end, ours, theirs
from synthetic import hybrid_qwen35
from synthetic_gemma4 import gemma4, gemma4_assistant, known_tables

OPTIONS = RuntimeOptions(n_ctx=256, n_batch=256)
PROMPT = "the mill on the river turned; the mill on the river"
N_PREDICT = 24
F, G = known_tables()


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    return {
        "target": gemma4(folder / "gemma4.gguf"),
        "assistant": gemma4_assistant(folder / "mtp-gemma4.gguf"),
        "known": gemma4(folder / "gemma4-known.gguf", known=(F, G)),
        "known assistant": gemma4_assistant(folder / "mtp-known.gguf", known=(F, G)),
        "hidden assistant": gemma4_assistant(folder / "mtp-known-hidden.gguf", known=(F, G), reads="hidden"),
    }


@pytest.fixture(scope="module")
def engine(files):
    eng = Engine.load(files["target"], files["assistant"], OPTIONS)
    yield eng
    eng.close()


def test_the_assistant_is_its_own_kind_and_keeps_no_cache(engine, files):
    drafter = engine.drafter
    assert drafter.kind == "assistant" and drafter.shared and not drafter.chained
    assert drafter.name == "draftlight test gemma4 assistant (mtp-gemma4.gguf)"
    ids = engine.target.tokenize(PROMPT, add_special=True)
    list(engine.stream(ids, GenerationConfig(max_tokens=8, depth=3, ignore_eog=True)))
    held = int(llama.llama_memory_seq_pos_max(engine.ctx.memory, 0))
    drafter.reset()  # its memory is the target's: resetting the drafter must not empty the target's cache
    drafter.rewind(0)
    assert held == len(engine.ctx.tokens) - 1 == int(llama.llama_memory_seq_pos_max(engine.ctx.memory, 0))


@pytest.mark.oracle
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_assistant_drafts_equal_llama_cpps_round_by_round(engine, files, depth):
    rounds = theirs(files["target"], "draft-mtp", depth, PROMPT, N_PREDICT, OPTIONS.threads, draft=files["assistant"])
    full = before_the_end(rounds, depth, N_PREDICT)
    assert len(full) >= 8
    assert ours(engine, depth, PROMPT, N_PREDICT)[: len(full)] == full


@pytest.mark.parametrize("reads", ["known assistant", "hidden assistant"])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_acceptance_per_position_is_what_the_construction_predicts(files, reads, depth):
    eng = Engine.load(files["known"], files[reads], OPTIONS)
    try:
        plain = list(eng.stream([10, 20, 30], GenerationConfig(max_tokens=24, depth=0, ignore_eog=True)))[-1]
        events = list(eng.stream([10, 20, 30], GenerationConfig(max_tokens=24, depth=depth, ignore_eog=True)))
    finally:
        eng.close()
    stats = events[-1]
    # after the prompt's pass the last token is always f of the one before, so reading the
    # token and reading the target's state before it draft alike: the g-chain from the last token
    tokens, drafted, accepted = predicted(F, chain(G), [10, 20, 30], depth, 24)
    assert list(stats.token_ids) == tokens == list(plain.token_ids)
    assert list(stats.drafted_per_position) == drafted
    assert list(stats.accepted_per_position) == accepted
    assert 0 < sum(accepted) < sum(drafted)
    kinds = {e.kind for e in events if hasattr(e, "kind")}
    assert TokenKind.ACCEPTED in kinds and TokenKind.REPLACED in kinds


@pytest.mark.oracle
@pytest.mark.parametrize("reads", ["known assistant", "hidden assistant"])
def test_known_drafts_equal_llama_cpps_where_the_rows_fed_matter(files, reads):
    # In llama.cpp's flow the first round drafts from the prompt's last token, which is not f
    # of the one before it: the hidden-reading assistant drafts otherwise there, and only a
    # driver feeding it the right rows agrees with llama.cpp.
    eng = Engine.load(files["known"], files[reads], OPTIONS)
    try:
        rounds = theirs(files["known"], "draft-mtp", 3, PROMPT, N_PREDICT, OPTIONS.threads, draft=files[reads])
        full = before_the_end(rounds, 3, N_PREDICT)
        assert ours(eng, 3, PROMPT, N_PREDICT)[: len(full)] == full
    finally:
        eng.close()
    assert 0 < sum(accepted for _, accepted, _ in full) < sum(len(d) for d, _, _ in full)


def test_an_assistant_for_another_target_is_refused_in_a_sentence(files, tmp_path):
    other = hybrid_qwen35(tmp_path / "qwen35.gguf")  # 256 wide; the assistant reads states 128 wide
    with pytest.raises(IncompatibleDrafter) as refused:
        Engine.load(other, files["assistant"], OPTIONS)
    assert str(refused.value) == (
        "The drafter cannot draft for this target: it is a Gemma 4 assistant model for a model 128 wide, and "
        "draftlight test hybrid is 256 wide: it was trained for another target."
    )


@pytest.mark.parametrize(
    ("setting", "value", "said"),
    [
        ("N_HEAD", 1, "reading a cache of 1 key/value heads, and draftlight test gemma4's has 2"),
        ("HEAD_DIM", 32, "reading keys 32 wide, and draftlight test gemma4's are 64 wide"),
    ],
)
def test_an_assistant_for_another_cache_shape_is_refused_in_a_sentence(
    files, tmp_path, monkeypatch, setting, value, said
):
    import synthetic_gemma4

    monkeypatch.setattr(synthetic_gemma4, setting, value)  # an assistant made for a model of another shape
    other = gemma4_assistant(tmp_path / "mtp-other.gguf")
    with pytest.raises(IncompatibleDrafter) as refused:
        Engine.load(files["target"], other, OPTIONS)
    assert str(refused.value) == (
        f"The drafter cannot draft for this target: it is a Gemma 4 assistant model {said}: it was trained for "
        "another target."
    )
