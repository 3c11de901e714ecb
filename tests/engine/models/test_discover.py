"""`--drafter auto`: the target's own heads, a drafter file beside it, else a smaller model of its family."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine import Engine, GenerationConfig, RoundEvent, RuntimeOptions
from engine.models.discover import discover

pytest.importorskip("gguf")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from synthetic import dflash, eagle3, hybrid_qwen35, mamba

OPTIONS = RuntimeOptions(n_ctx=256, n_batch=256)


def test_a_target_with_heads_drafts_for_itself(tmp_path):
    found = discover(hybrid_qwen35(tmp_path / "with-heads.gguf", nextn=True))
    assert found.spec == "mtp"
    assert found.said == "draftlight test hybrid with MTP carries 1 multi-token-prediction head: it drafts for itself."


def test_a_drafter_file_beside_the_target_is_found(tmp_path):
    target = hybrid_qwen35(tmp_path / "hybrid.gguf")
    assert discover(target).spec is None
    side = dflash(tmp_path / "dflash-hybrid.gguf")
    found = discover(target)
    assert found.spec == str(side)
    assert (
        found.said == "Found dflash-hybrid.gguf beside the target: a DFlash drafter, as wide as draftlight test hybrid."
    )


def test_a_file_for_another_target_is_passed_over_with_the_reason(tmp_path):
    target = mamba(tmp_path / "mamba.gguf")
    (tmp_path / "eagle3-junk.gguf").write_bytes(b"not a model")
    hybrid_qwen35(tmp_path / "mtp-hybrid.gguf", nextn=True, heads_only=True)  # heads for a qwen35, not this mamba
    found = discover(target)
    assert found.spec is None
    assert found.said.startswith("No drafter found for draftlight test mamba: it carries no MTP heads")
    assert "mtp-hybrid.gguf is a qwen35 model, not a drafter this target can use" in found.said
    assert "eagle3-junk.gguf: " in found.said


def test_auto_loads_what_it_found_and_says_so(tmp_path):
    target = hybrid_qwen35(tmp_path / "hybrid.gguf")
    eagle3(tmp_path / "eagle3-hybrid.gguf")
    engine = Engine.load(target, "auto", OPTIONS)
    try:
        assert engine.drafter.kind == "eagle3"
        assert engine.verdict.explain() == (
            "Found eagle3-hybrid.gguf beside the target: an EAGLE-3 drafter, as wide as draftlight test hybrid. "
            "The drafter shares the target's vocabulary: it can draft for it."
        )
    finally:
        engine.close()


def test_auto_with_nothing_found_decodes_plainly_and_says_why(tmp_path):
    engine = Engine.load(hybrid_qwen35(tmp_path / "alone.gguf"), "auto", OPTIONS)
    try:
        assert engine.drafter is None and not engine.can_speculate
        assert engine.verdict.explain().startswith("No drafter found for draftlight test hybrid")
    finally:
        engine.close()


def test_a_file_of_heads_alone_is_found_and_drafts_as_the_heads_inside_the_target_do(tmp_path):
    """The sidecar holds the same head as the full file: the same drafts, round by round."""
    full = hybrid_qwen35(tmp_path / "full.gguf", nextn=True)
    sidecar = hybrid_qwen35(tmp_path / "mtp-full.gguf", nextn=True, heads_only=True)
    trunk = hybrid_qwen35(tmp_path / "trunk.gguf")
    assert discover(trunk).spec == str(sidecar)  # a qwen35 without heads finds them beside it
    rounds = []
    for drafter in ("mtp", str(sidecar)):
        engine = Engine.load(full, drafter, OPTIONS)
        try:
            assert engine.drafter.kind == "mtp"
            ids = engine.target.tokenize("the mill on the river turned; the mill on the river", add_special=True)
            events = list(engine.stream(ids, GenerationConfig(max_tokens=24, depth=3, ignore_eog=True)))
            rounds.append([(e.draft_tokens, e.accepted) for e in events if isinstance(e, RoundEvent)])
        finally:
            engine.close()
    assert rounds[0] == rounds[1] and any(drafts for drafts, _ in rounds[0])


def test_gemma_4s_assistant_beside_its_target_is_found_and_loaded(tmp_path):
    from synthetic_gemma4 import gemma4, gemma4_assistant

    target = gemma4(tmp_path / "gemma-4.gguf")
    gemma4_assistant(tmp_path / "mtp-gemma-4.gguf")
    found = discover(target)
    assert found.said == (
        "Found mtp-gemma-4.gguf beside the target: a Gemma 4 assistant model, as wide as draftlight test gemma4."
    )
    engine = Engine.load(target, "auto", OPTIONS)
    try:
        assert engine.drafter.kind == "assistant"
    finally:
        engine.close()


def test_an_assistant_for_a_wider_target_is_passed_over(tmp_path):
    from synthetic_gemma4 import gemma4_assistant

    target = hybrid_qwen35(tmp_path / "hybrid.gguf")
    gemma4_assistant(tmp_path / "mtp-gemma-4.gguf")
    found = discover(target)
    assert found.spec is None
    assert (
        "mtp-gemma-4.gguf is a Gemma 4 assistant model for a model 128 wide, and draftlight test hybrid is 256 "
        "wide: it was trained for another target" in found.said
    )
