"""MLX model folders on a machine: LM Studio's, the Hugging Face cache's (symlinked snapshots), a folder the
user named; each listed once, told from transformers checkpoints, read from its own headers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.models.local import LocalModel, local_models
from engine.models.mlx_folders import read_folder
from tests.engine.models.mlx_trees import hf_snapshot, mlx_folder, plain_tensors, quantized_tensors, write_safetensors
from tests.engine.models.test_local import tiny_gguf


def weights_size(folder: Path) -> int:
    return sum(p.resolve().stat().st_size for p in folder.glob("*.safetensors"))


def test_mlx_folders_are_listed_beside_gguf_files_each_once(tmp_path):
    home = tmp_path / "home"
    lms = mlx_folder(home / ".lmstudio/models/mlx-community/Qwen3-4B-4bit", shards=2, group=64)
    gguf = tiny_gguf(home / ".lmstudio/models/lmstudio-community/Qwen3-4B-GGUF/Qwen3-4B-Q4_K_M.gguf", "Qwen3 4B")
    old = mlx_folder(home / ".cache/lm-studio/models/mlx-community/SmolLM2-135M-bf16", "llama", bits=None)
    hub = home / ".cache/huggingface/hub"
    first = hf_snapshot(hub, "mlx-community/Qwen3-0.6B-8bit", "aaa111", mlx_folder, bits=8)
    hf_snapshot(hub, "mlx-community/Qwen3-0.6B-8bit", "bbb222", mlx_folder, bits=8)  # the same blobs again
    hf_snapshot(hub, "Qwen/Qwen3-0.6B", "ccc333", mlx_folder, bits=None, fmt="pt")  # transformers: left out
    dflash = hf_snapshot(
        hub, "z-lab/Qwen3-4B-DFlash-b16", "ddd444", mlx_folder, bits=None, fmt="pt", tokens=None,
        extra={"architectures": ["DFlashDraftModel"], "dflash_config": {"target_layer_ids": [1, 2]}},
    )  # fmt: skip
    mine = tmp_path / "my models"
    triplets = mlx_folder(mine / "tiny-mlx", "qwen2", bits=None, fmt=None, tensors=quantized_tensors())
    (mine / "broken").mkdir()
    (mine / "broken/config.json").write_text("[1, 2, 3]")  # not an object
    write_safetensors(mine / "broken/model.safetensors", plain_tensors(), {"format": "mlx"})
    cut = mlx_folder(mine / "cut")
    (cut / "model.safetensors").write_bytes((cut / "model.safetensors").read_bytes()[:40])

    found = local_models([mine, home / ".lmstudio/models/mlx-community"], home=home, env={})
    assert found == [
        LocalModel(gguf.resolve(), "lmstudio-community/Qwen3-4B-GGUF/Qwen3-4B-Q4_K_M.gguf", "LM Studio",
                   gguf.stat().st_size, "Q4_K_M", "llama"),
        LocalModel(first.resolve(), "mlx-community/Qwen3-0.6B-8bit", "Hugging Face cache", weights_size(first),
                   "8-bit", "qwen3", "mlx", 32),
        LocalModel(lms.resolve(), "mlx-community/Qwen3-4B-4bit", "LM Studio", weights_size(lms), "4-bit", "qwen3",
                   "mlx", 64),
        LocalModel(old.resolve(), "mlx-community/SmolLM2-135M-bf16", "LM Studio", weights_size(old), "bf16", "llama",
                   "mlx", None),
        LocalModel(triplets.resolve(), "tiny-mlx", str(mine), weights_size(triplets), "", "qwen2", "mlx", None),
        LocalModel(dflash.resolve(), "z-lab/Qwen3-4B-DFlash-b16", "Hugging Face cache", weights_size(dflash), "bf16",
                   "qwen3", "mlx", None, "a DFlash drafter, 2 layers"),
    ]  # fmt: skip
    assert found[2].label() == f"mlx-community/Qwen3-4B-4bit MLX 4-bit, {found[2].size / 1e9:.2f} GB (LM Studio)"
    assert found[4].label() == f"tiny-mlx MLX, {found[4].size / 1e9:.2f} GB ({mine})"
    assert found[0].label().startswith("lmstudio-community/Qwen3-4B-GGUF/Qwen3-4B-Q4_K_M.gguf Q4_K_M, ")
    assert found[2].size == sum(p.stat().st_size for p in lms.glob("*.safetensors")) > 3_000  # both shards


def test_a_snapshot_file_that_leads_outside_the_cache_is_not_read(tmp_path):
    home = tmp_path / "home"
    hub = home / ".cache/huggingface/hub"
    elsewhere = mlx_folder(tmp_path / "elsewhere")
    snapshot = hub / "models--someone--escape/snapshots/r1"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").symlink_to(elsewhere / "config.json")
    (snapshot / "model.safetensors").symlink_to(elsewhere / "model.safetensors")
    (hub / "models--someone--loop/snapshots").mkdir(parents=True)
    (hub / "models--someone--loop/snapshots/r1").symlink_to(tmp_path)  # a folder link out of the cache
    assert read_folder(snapshot, hub) is None
    assert read_folder(elsewhere, tmp_path) is not None  # the same files, read inside their own root
    assert local_models(home=home, env={}) == []


def test_the_rule_tells_an_mlx_folder_from_a_transformers_checkpoint(tmp_path):
    def rule(**kwargs) -> bool:
        folder = mlx_folder(tmp_path / str(len(list(tmp_path.iterdir()))), **kwargs)
        return read_folder(folder, tmp_path) is not None

    assert rule(bits=4, fmt=None)  # 1: config.json's `quantization`
    assert rule(bits=None, fmt="mlx")  # 2: the header's format
    assert rule(bits=None, fmt=None, tensors=quantized_tensors())  # 3: weight, scales and biases
    assert rule(bits=None, fmt="pt", extra={"model_type": "gemma4_assistant"})  # 4: a drafter MLX loads as published
    assert not rule(bits=None, fmt="pt")  # a transformers checkpoint
    assert not rule(bits=None, fmt=None)  # no word of MLX anywhere
    assert not rule(bits=None, fmt="pt", extra={"quantization_config": {"bits": 4, "group_size": 128}})  # GPTQ


def test_what_the_headers_say_of_a_vision_language_model_with_heads(tmp_path):
    folder = mlx_folder(
        tmp_path / "Qwen3.6-27B-4bit",
        tensors={**quantized_tensors(), "mtp.fc.weight": ("BF16", [64, 128])},
        extra={"model_type": "qwen3_5", "text_config": {"model_type": "qwen3_5_text", "mtp_num_hidden_layers": 1}},
    )
    info = read_folder(folder, tmp_path)
    assert (info.architecture, info.mtp_layers, info.mtp_weights, info.drafter) == ("qwen3_5", 1, True, "")
    config = json.loads((folder / "config.json").read_text())
    del config["model_type"], config["vocab_size"]
    config["text_config"]["vocab_size"] = 151_936
    (folder / "config.json").write_text(json.dumps(config))
    info = read_folder(folder, tmp_path)
    assert (info.architecture, info.vocab_size) == ("qwen3_5_text", 151_936)


def test_a_folder_mlx_itself_saved_is_read(tmp_path):
    mx = pytest.importorskip("mlx.core")
    folder = tmp_path / "saved-by-mlx"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen2", "vocab_size": 8}))
    mx.save_safetensors(str(folder / "model.safetensors"), {"w": mx.zeros((8, 4))}, metadata={"format": "mlx"})
    info = read_folder(folder, tmp_path)
    assert (info.architecture, info.vocab_size, info.size) == (
        "qwen2",
        8,
        (folder / "model.safetensors").stat().st_size,
    )
    mx.save_safetensors(str(folder / "model.safetensors"), {"w": mx.zeros((8, 4))})  # no format: not MLX's word
    assert read_folder(folder, tmp_path) is None
