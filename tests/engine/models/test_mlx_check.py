"""The MLX folder check (engine.runtime.mlx_check) on folders written here: exact sentences, no model loaded.

tests/fuzz/test_fuzz_mlx_load.py runs the same kinds of damage through chat and pair as children;
these pin what each check says, in this process, fast.
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import pytest

from engine.errors import IncompatibleDrafter, ModelFileError
from engine.models.listing import print_local_models
from engine.models.local import local_models
from engine.runtime.mlx_check import check_folder
from tests.engine.models.mlx_trees import mlx_folder, quantized_tensors

DFLASH = {"architectures": ["DFlashDraftModel"], "block_size": 16, "dflash_config": {"target_layer_ids": [0, 1]}}


def _with(folder: Path, **fields: object) -> Path:
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **fields}))
    return folder


def _raw(path: Path, header: dict, data_bytes: int) -> None:
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(data_bytes))


def _refused(folder: Path) -> str:
    with pytest.raises(ModelFileError) as caught:
        check_folder(folder)
    return str(caught.value)


def test_a_sound_folder_passes_with_its_tensors_and_bytes(tmp_path):
    checked = check_folder(mlx_folder(tmp_path / "m", layers=1))
    assert [t.name for t in checked.tensors] == [
        "model.embed_tokens.weight", "model.embed_tokens.scales", "model.embed_tokens.biases",
        "model.layers.0.mlp.down_proj.weight", "model.layers.0.mlp.down_proj.scales",
        "model.layers.0.mlp.down_proj.biases", "model.norm.weight",
    ]  # fmt: skip
    assert checked.weight_bytes == sum(t.end - t.begin for t in checked.tensors)


def test_construction_numbers_are_bounded_and_typed(tmp_path):
    folder = mlx_folder(tmp_path / "m", layers=1)
    assert _refused(_with(folder, num_hidden_layers=10**7)) == (
        "m's config.json says num_hidden_layers is 10,000,000, outside 1 to 1,024: not a real model."
    )
    assert _refused(_with(folder, num_hidden_layers=1, hidden_size="64")) == (
        'm\'s config.json gives hidden_size as "64", not a whole number.'
    )
    assert _refused(_with(folder, hidden_size=64, text_config={"mtp_num_hidden_layers": 10**6})) == (
        "m's config.json says mtp_num_hidden_layers is 1,000,000, outside 0 to 64: not a real model."
    )
    assert _refused(_with(folder, text_config={}, num_attention_heads=4, num_key_value_heads=8)) == (
        "m's config.json says 8 key-value heads for 4 attention heads."
    )


def test_a_null_size_a_short_per_layer_list_and_an_untyped_tie_are_refused(tmp_path):
    folder = mlx_folder(tmp_path / "m", layers=1)
    assert _refused(_with(folder, vocab_size=None)) == (
        "m's config.json gives vocab_size as null: no model can be built without it."
    )
    assert _refused(_with(folder, vocab_size=300, num_hidden_layers=2, intermediate_size=[4])) == (
        "m's config.json gives intermediate_size for 1 layer, and the model has 2 layers."
    )
    assert _refused(_with(folder, num_hidden_layers=1, intermediate_size=64, tie_word_embeddings=-1)) == (
        "m's config.json gives tie_word_embeddings as -1, not true or false."
    )
    assert check_folder(_with(folder, tie_word_embeddings=True, intermediate_size=[64])).config[
        "intermediate_size"
    ] == [64]


def test_a_drafters_layers_and_block_are_bounded_and_it_is_refused_as_a_drafter(tmp_path):
    folder = mlx_folder(tmp_path / "d", bits=None, fmt="pt", tokens=None, layers=1, extra=DFLASH)
    check_folder(folder, "a DFlash drafter", IncompatibleDrafter)
    _with(folder, dflash_config={"target_layer_ids": [0, 10**6]})
    with pytest.raises(IncompatibleDrafter) as caught:
        check_folder(folder, "a DFlash drafter", IncompatibleDrafter)
    assert str(caught.value) == "d's config.json gives target_layer_ids as list, not a list of layer numbers."
    assert _refused(_with(folder, dflash_config={"target_layer_ids": [0]}, block_size=10**9)) == (
        "d's config.json says block_size is 1,000,000,000, outside 1 to 1,024: not a real model."
    )


def test_layers_the_weights_do_not_hold_are_refused(tmp_path):
    assert _refused(mlx_folder(tmp_path / "m", layers=2, tensors=quantized_tensors(layers=1))) == (
        "m's config.json says 2 layers and its weights hold 1: the folder is incomplete or its config is wrong."
    )


def test_json_files_are_objects_below_their_caps(tmp_path):
    folder = mlx_folder(tmp_path / "m", layers=1)
    (folder / "generation_config.json").write_text("[]")
    assert _refused(folder) == "m's generation_config.json is a JSON list, not an object."
    (folder / "generation_config.json").write_text("[" * 100_000 + "]" * 100_000)
    assert _refused(folder) == "m's generation_config.json is nested too deep to be a real one."
    (folder / "generation_config.json").unlink()
    with (folder / "tokenizer.json").open("wb") as f:
        f.truncate(1 << 30)  # a hole: no disk
    assert _refused(folder) == "m's tokenizer.json holds 1,073,741,824 bytes, past the 67,108,864 such a file may hold."
    (folder / "tokenizer.json").unlink()
    (folder / "tokenizer_config.json").write_text(json.dumps({"tool_parser_type": "../../os"}))
    assert _refused(folder) == ('m\'s tokenizer_config.json names a tool_parser_type mlx-lm does not have: "../../os".')


def test_every_safetensors_fault_is_a_sentence(tmp_path):
    folder = mlx_folder(tmp_path / "m", layers=1)
    weights = folder / "model.safetensors"
    sound = weights.read_bytes()
    weights.write_bytes(sound[:-3])
    assert _refused(folder) == (
        "m's model.safetensors's tensor 'model.norm.weight' lies at bytes 2,880 to 3,008 of 3,005: "
        "the file is cut short or damaged."
    )
    weights.write_bytes(sound + b"\0")
    assert _refused(folder) == (
        "m's model.safetensors's header accounts for 3,008 bytes of data and the file holds 3,009: "
        "it is cut short or damaged."
    )
    _raw(weights, {"model.layers.0.w": {"dtype": "Q7", "shape": [2], "data_offsets": [0, 2]}}, 2)
    assert (
        _refused(folder) == "m's model.safetensors's tensor 'model.layers.0.w' has dtype \"Q7\", which no loader knows."
    )
    weights.write_bytes(struct.pack("<Q", 2**60) + sound[8:])
    assert _refused(folder) == (
        "m's model.safetensors says its header is 1,152,921,504,606,846,976 bytes, and the file holds 3,664: it is "
        "damaged."
    )
    weights.unlink()
    weights.symlink_to("/dev/zero")
    assert _refused(folder) == "m's model.safetensors is not a regular file (a device, a folder or a pipe)."
    weights.unlink()
    weights.symlink_to(weights.name)
    assert _refused(folder) == "m's model.safetensors cannot be opened: it is a broken link or a link loop."


def test_overlapping_tensors_are_refused(tmp_path):
    folder = mlx_folder(tmp_path / "m", layers=1)
    header = {"model.layers.0.a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
              "model.layers.0.b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}}  # fmt: skip
    _raw(folder / "model.safetensors", header, 6)
    assert (
        _refused(folder)
        == "m's model.safetensors's tensor 'model.layers.0.b' overlaps the one before it: the file is damaged."
    )


def test_the_listing_says_the_width_the_weights_have_not_the_configs(tmp_path):
    folder = mlx_folder(tmp_path / "models" / "liar", layers=1, bits=4, group=64)
    _with(folder, quantization={"bits": 3, "group_size": 64})  # 4-bit weights, a config that says 3
    listed = local_models([tmp_path / "models"], home=tmp_path / "no-home", env={})
    assert [(m.name, m.quantization) for m in listed] == [("liar", "4-bit")]
    assert quantized_tensors(hidden=64, bits=4, group=64)["model.embed_tokens.weight"] == ("U32", [8, 8])


def test_the_listing_says_why_a_folder_will_not_load(tmp_path):
    models = tmp_path / "models"
    mlx_folder(models / "whole")
    mlx_folder(models / "short", layers=3, tensors=quantized_tensors(layers=1))
    said: list[str] = []
    print_local_models(said.append, local_models([models], home=tmp_path / "no-home", env={}))
    header = (
        "\nModels on this machine (LM Studio, Ollama, the Hugging Face cache, llama.cpp's cache, and MLX folders), by "
        "the names --target takes:"
    )
    assert [line.split(": /")[0] for line in said[said.index(header) :]] == [
        header,
        f"  short MLX 4-bit, 0.00 GB ({models})",
        "    It will not load: short's config.json says 3 layers and its weights hold 1: the folder is incomplete or "
        "its config is wrong.",
        f"  whole MLX 4-bit, 0.00 GB ({models})",
    ]


@pytest.mark.slow
def test_a_token_past_the_vocabulary_is_a_sentence_not_a_read_past_the_embedding(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
    from mlx_folders import write_qwen2_folder

    from engine.errors import RuntimeFailure
    from engine.runtime.mlx import MlxModel, MlxOptions

    model = MlxModel.load(write_qwen2_folder(tmp_path / "q", seed=1, layers=1), MlxOptions())
    ctx = model.new_context()
    with pytest.raises(RuntimeFailure) as caught:
        ctx.decode([5, 300], all_logits=False)
    assert str(caught.value) == "token 300 is outside q's vocabulary of 300: its tokenizer and its weights disagree."
    assert ctx.n_past == 0
