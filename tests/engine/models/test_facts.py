"""One description of a model, whatever its format (engine.models.facts): the exact facts of GGUF files and
MLX folders written here (tests/engine/synthetic.py, tests/engine/models/mlx_trees.py), and a sentence for
a file or folder that is neither. Fast: headers alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.drafting import kinds
from engine.errors import ModelFileError
from engine.models.facts import ModelFacts, facts_of
from engine.models.rules import fits, made_for, made_for_rule
from engine.runtime.llama import RUNTIME as LLAMA_RUNTIME
from engine.runtime.mlx import RUNTIME as MLX_RUNTIME
from tests.engine import synthetic
from tests.engine.models.mlx_trees import mlx_folder

pytest.importorskip("gguf")
DFLASH = {"architectures": ["DFlashDraftModel"], "dflash_config": {"target_layer_ids": [0, 1]}, "num_target_layers": 2}
EAGLE3 = {"model_type": "eagle3", "target_layer_ids": [0, 1, 1], "target_hidden_size": 64, "draft_vocab_size": 4,
          "transformer_layer_config": {"vocab_size": 8, "num_hidden_layers": 1}}  # fmt: skip


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("facts")
    return {
        "hybrid": synthetic.hybrid_qwen35(folder / "hybrid.gguf"),
        "dflash": synthetic.dflash(folder / "dflash.gguf"),
        "eagle3": synthetic.eagle3(folder / "eagle3.gguf", vocab=(3, 4, 5, 6, 7)),
        "mlx": mlx_folder(folder / "Qwen3-4bit"),
        "mlx-dflash": mlx_folder(folder / "Qwen3-DFlash", bits=None, fmt="pt", tokens=None, extra=DFLASH),
        "mlx-eagle3": mlx_folder(folder / "Qwen3-EAGLE3", bits=None, fmt="pt", tokens=None, extra=EAGLE3),
    }


def test_a_gguf_chat_model_is_described_from_its_header(made):
    facts = facts_of(made["hybrid"])
    assert facts == ModelFacts(
        path=made["hybrid"],
        runtime=LLAMA_RUNTIME,
        name="hybrid.gguf",
        called="draftlight test hybrid",
        architecture="qwen35",
        kind=kinds.MODEL,
        said="a draft model",
        size=made["hybrid"].stat().st_size,
        quantization="",
        vocab_size=128,
        bos=None,
        eos=frozenset(),
        hidden_size=256,
        layers=2,
        mtp_heads=0,
        cache_shape=(2, 128),
        kv_heads=2,
        key_dim=128,
        value_dim=128,
        attention_interval=2,  # every second layer keeps a KV cache, the other a recurrent state
    )


def test_gguf_drafters_say_what_they_read_of_their_target(made):
    dflash, eagle3 = facts_of(made["dflash"]), facts_of(made["eagle3"])
    assert (dflash.kind, dflash.said, dflash.reads_width, dflash.target_layers, dflash.reads_final_state) == (
        kinds.DFLASH, "a DFlash drafter", 256, (0, 1), False,
    )  # fmt: skip
    assert (eagle3.kind, eagle3.said, eagle3.reads_width, eagle3.target_layers, eagle3.reads_final_state) == (
        kinds.EAGLE3, "an EAGLE-3 drafter", 256, (0, 1, 2), True,
    )  # fmt: skip
    assert eagle3.vocab_map == (None, 5, 5)  # five draft tokens, a d2t of five into the target's: no full head
    assert not dflash.layers_handed_out  # as a target: llama.cpp hands out no layers of a dflash model


def test_an_mlx_folder_is_described_in_the_same_words(made):
    target, dflash, eagle3 = (facts_of(made[k]) for k in ("mlx", "mlx-dflash", "mlx-eagle3"))
    assert target == ModelFacts(
        path=made["mlx"],
        runtime=MLX_RUNTIME,
        name="Qwen3-4bit",
        called="the target",
        architecture="qwen3",
        kind=kinds.MODEL,
        said="a draft model",
        size=sum(p.stat().st_size for p in made["mlx"].glob("*.safetensors")),
        quantization="4-bit",
        vocab_size=8,
        bos=None,
        eos=frozenset({0}),
        hidden_size=64,
        layers=2,
        mtp_heads=0,
    )
    assert (dflash.kind, dflash.said, dflash.reads_width, dflash.target_layers, dflash.trained_layers) == (
        kinds.DFLASH, "a DFlash drafter", 64, (0, 1), 2,
    )  # fmt: skip
    assert (eagle3.kind, eagle3.target_layers, eagle3.vocab_map) == (kinds.EAGLE3, (0, 1, 1), (8, 4, None))


def test_an_mlx_folder_says_the_shape_of_its_kv_cache(tmp_path):
    shaped = {"num_attention_heads": 4, "num_key_value_heads": 2, "full_attention_interval": 4}
    facts = facts_of(mlx_folder(tmp_path / "hybrid", layers=8, extra=shaped))
    assert (facts.kv_heads, facts.key_dim, facts.value_dim, facts.attention_interval) == (2, 16, 16, 4)


def test_the_rules_read_the_facts_alike_for_both_formats(made):
    gguf_target, mlx_target = facts_of(made["hybrid"]), facts_of(made["mlx"])
    assert fits(gguf_target, facts_of(made["dflash"])) == ("a DFlash drafter", "")
    assert fits(mlx_target, facts_of(made["mlx-dflash"])) == ("a DFlash drafter", "")
    assert made_for(mlx_target, facts_of(made["mlx-dflash"])) and not made_for(gguf_target, facts_of(made["dflash"]))
    assert fits(mlx_target, facts_of(made["mlx-eagle3"])) == (
        "an EAGLE-3 drafter",
        "is an EAGLE-3 drafter with a draft vocabulary of 4 tokens and no map (d2t) of as many into the target's: "
        "it was trained for another target",
    )
    rule = made_for_rule(mlx_target, facts_of(made["mlx-dflash"]))
    assert (
        rule is not None and rule.holds and rule.sentence == "Qwen3-DFlash is a DFlash drafter, as wide as the target."
    )
    assert made_for_rule(gguf_target, facts_of(made["hybrid"])) is None  # a draft model of its own needs neither


def test_a_file_or_folder_that_is_no_model_gets_a_sentence(tmp_path):
    text = tmp_path / "notes.gguf"
    text.write_text("hello")
    with pytest.raises(ModelFileError, match=r"^notes.gguf is not a GGUF model file \(it starts with 'hell'"):
        facts_of(text)
    with pytest.raises(ModelFileError, match=r"^No model file at "):
        facts_of(tmp_path / "missing.gguf")


def test_an_mlx_target_refuses_a_gguf_drafter_file_by_its_kind(made):
    from engine.models.drafterfiles import DRAFTER_FILES

    refusal = DRAFTER_FILES[MLX_RUNTIME].refusal
    assert refusal(made["dflash"], "Qwen3-4bit") == (
        "dflash.gguf is a DFlash file for llama.cpp, and Qwen3-4bit runs on MLX: pick the MLX build of that "
        "drafter, or load the pair with --runtime llama."
    )
    assert refusal(made["hybrid"], "Qwen3-4bit") == ""  # a whole model converts as a target does
