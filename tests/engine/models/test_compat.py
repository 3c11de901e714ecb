"""A drafter must share the target's vocabulary; when it does not, the refusal says why."""

from __future__ import annotations

import pytest

from engine import Engine, IncompatibleDrafter, Model
from engine.models import check


@pytest.fixture(scope="module")
def vocabs(target_path, drafter_path, smollm_path, gemma_path) -> dict[str, Model]:
    """Vocabulary-only loads: the tokenizer and metadata without the weights."""
    models = {
        "qwen-1.5b": Model(target_path, vocab_only=True),
        "qwen-0.5b": Model(drafter_path, vocab_only=True),
        "smollm2": Model(smollm_path, vocab_only=True),
        "gemma3": Model(gemma_path, vocab_only=True),
    }
    yield models
    for m in models.values():
        m.close()


def test_the_qwen_pair_is_compatible(vocabs):
    verdict = check(vocabs["qwen-1.5b"], vocabs["qwen-0.5b"])
    assert verdict.compatible
    assert verdict.reasons == ()
    assert "shares the target's vocabulary" in verdict.explain()


def test_smollm2_is_refused_for_qwen_with_the_differences_named(vocabs):
    verdict = check(vocabs["qwen-1.5b"], vocabs["smollm2"])
    assert not verdict.compatible
    # both byte-level BPE, neither adds BOS: what differs is the size and the tokens
    assert verdict.reasons == (
        "the target has 151,936 tokens and the drafter 49,152 (102,784 apart; at most 128 allowed)",
        "token 5 is '&' in the target and '<file_sep>' in the drafter",
    )
    explanation = verdict.explain()
    assert explanation.startswith("The drafter cannot draft for this target: ")
    assert explanation.endswith(".")


def test_gemma_is_refused_for_qwen(vocabs):
    verdict = check(vocabs["qwen-1.5b"], vocabs["gemma3"])
    assert not verdict.compatible
    assert verdict.reasons == (
        "the target's vocabulary is byte-level BPE and the drafter's is SentencePiece (SPM)",
        "the target does not add a start-of-text token and the drafter does",
        "the target has 151,936 tokens and the drafter 262,144 (110,208 apart; at most 128 allowed)",
        "token 5 is '&' in the target and '[multimodal]' in the drafter",
    )


def test_the_check_is_symmetric_in_what_it_finds(vocabs):
    """Swapping the roles names the same differences, seen from the other side."""
    verdict = check(vocabs["smollm2"], vocabs["qwen-1.5b"])
    assert not verdict.compatible
    assert verdict.reasons[0].startswith("the target has 49,152 tokens and the drafter 151,936")
    assert "token 5 is '<file_sep>' in the target and '&' in the drafter" in verdict.reasons


def test_a_model_is_compatible_with_itself(vocabs):
    for model in vocabs.values():
        assert check(model, model).compatible


def test_max_reasons_caps_the_explanation(vocabs):
    verdict = check(vocabs["qwen-1.5b"], vocabs["gemma3"], max_reasons=2)
    assert len(verdict.reasons) == 2
    assert not verdict.compatible


def test_engine_load_refuses_an_incompatible_drafter(target_path, smollm_path):
    with pytest.raises(IncompatibleDrafter) as caught:
        Engine.load(target_path, smollm_path)
    message = str(caught.value)
    assert message.startswith("The drafter cannot draft for this target: ")
    assert "151,936 tokens and the drafter 49,152" in message
    assert "token 5 is '&' in the target and '<file_sep>' in the drafter" in message
