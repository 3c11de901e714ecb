"""MTP heads in a file of their own beside the target (`mtp-*.gguf`), and the files that must be refused."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine import Engine, GenerationConfig, IncompatibleDrafter, ModelFileError, RuntimeOptions

pytest.importorskip("gguf")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from speculative_simple import before_the_end, ours, theirs
from synthetic import hybrid_qwen35
from synthetic_variants import step35_mtp

OPTIONS = RuntimeOptions(n_ctx=256, n_batch=256)
PROMPT = "the mill on the river turned; the mill on the river"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    return {  # the sidecar holds the very heads of the full file (its trunk is the target)
        "target": hybrid_qwen35(folder / "hybrid-mtp.gguf", nextn=True),
        "sidecar": hybrid_qwen35(folder / "mtp-hybrid.gguf", nextn=True, heads_only=True),
    }


@pytest.mark.parametrize("depth", [1, 3])
def test_a_sidecar_drafts_what_the_same_heads_in_the_target_file_draft(files, depth):
    inside = Engine.load(files["target"], "mtp", OPTIONS)
    beside = Engine.load(files["target"], files["sidecar"], OPTIONS)
    try:
        assert beside.drafter.kind == "mtp" and beside.drafter.name.endswith("(mtp-hybrid.gguf)")
        config = GenerationConfig(max_tokens=24, depth=depth, ignore_eog=True)
        ids = inside.target.tokenize(PROMPT, add_special=True)
        a, b = list(inside.stream(ids, config)), list(beside.stream(ids, config))
    finally:
        inside.close()
        beside.close()
    assert a[-1].token_ids == b[-1].token_ids and a[-1].drafted > 0
    assert [r.draft_tokens for r in a if hasattr(r, "draft_tokens")] == [
        r.draft_tokens for r in b if hasattr(r, "draft_tokens")
    ]


@pytest.mark.oracle
def test_sidecar_drafts_equal_llama_cpps(files):
    engine = Engine.load(files["target"], files["sidecar"], OPTIONS)
    try:
        rounds = theirs(files["target"], "draft-mtp", 3, PROMPT, 24, OPTIONS.threads, draft=files["sidecar"])
        full = before_the_end(rounds, 3, 24)
        assert len(full) >= 6 and ours(engine, 3, PROMPT, 24)[: len(full)] == full
    finally:
        engine.close()


def test_a_truncated_sidecar_is_refused_in_one_sentence(files, tmp_path):
    cut = tmp_path / "mtp-cut.gguf"
    cut.write_bytes(files["sidecar"].read_bytes()[:-8192])
    with pytest.raises(ModelFileError) as refused:
        Engine.load(files["target"], cut, OPTIONS)
    said = str(refused.value)
    assert said.startswith("mtp-cut.gguf is truncated") and "\n" not in said


def test_heads_for_another_target_are_refused_in_a_sentence(files, tmp_path):
    other = step35_mtp(tmp_path / "step35.gguf", heads=2)  # 128 wide, chained heads
    with pytest.raises(IncompatibleDrafter) as refused:
        Engine.load(other, files["sidecar"], OPTIONS)
    assert str(refused.value) == (
        "mtp-hybrid.gguf holds multi-token-prediction heads for a qwen35 model, and draftlight test step35 "
        "with 2 MTP heads is step35: it was trained for another target."
    )


def test_a_whole_model_with_heads_of_its_own_drafts_as_a_model(files, tmp_path):
    from engine.models.discover import drafter_kind

    whole = hybrid_qwen35(tmp_path / "small-with-heads.gguf", nextn=True, seed=3)  # a trunk, and heads
    assert drafter_kind(files["target"], whole) == "model"
    engine = Engine.load(files["target"], whole, OPTIONS)
    try:
        assert engine.drafter.kind == "model"  # its heads read its own states, not this target's
    finally:
        engine.close()
