"""The models already on a machine: LM Studio, Ollama, the Hugging Face cache, llama.cpp's cache and a chosen
folder, laid out as those tools lay them out in a temporary home, with real (tiny) GGUF files."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np

from engine.models.local import LocalModel, local_models


def tiny_gguf(path: Path, name: str, file_type: int | None = 15) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(name)
    if file_type is not None:
        w.add_file_type(file_type)
    w.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def ollama(models: Path, namespace: str, model: str, tag: str, digest: str) -> Path:
    blob = tiny_gguf(models / "blobs" / f"sha256-{digest}", model)
    manifest = models / "manifests" / "registry.ollama.ai" / namespace / model / tag
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({"layers": [
        {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "1" * 64},
        {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}"},
    ]}))  # fmt: skip
    return blob


def test_every_source_is_found_once_and_read_from_its_header(tmp_path):
    home = tmp_path / "home"
    lms = tiny_gguf(home / ".lmstudio/models/lmstudio-community/Qwen3-4B-GGUF/Qwen3-4B-Q4_K_M.gguf", "Qwen3 4B")
    tiny_gguf(home / ".lmstudio/models/lmstudio-community/Qwen3-4B-GGUF/mmproj-Qwen3-4B-F16.gguf", "projector")
    o1 = ollama(home / ".ollama/models", "library", "qwen2.5-coder", "1.5b", "a" * 64)
    o2 = ollama(home / ".ollama/models", "someone", "tiny", "latest", "b" * 64)
    blob = tiny_gguf(home / ".cache/huggingface/hub/models--Qwen--Qwen2.5-0.5B-GGUF/blobs/c0ffee", "hf", 7)
    link = home / ".cache/huggingface/hub/models--Qwen--Qwen2.5-0.5B-GGUF/snapshots/abc123/qwen2.5-0.5b-q8_0.gguf"
    link.parent.mkdir(parents=True)
    link.symlink_to(blob)
    cpp = tiny_gguf(home / ".cache/llama.cpp/ggml-org_gemma-3-1b-it-GGUF_gemma-3-1b-it-Q4_K_M.gguf", "g", None)
    mine = tmp_path / "my models"
    split = tiny_gguf(mine / "big" / "Big-Q4_K_M-00001-of-00002.gguf", "big")
    tiny_gguf(mine / "big" / "Big-Q4_K_M-00002-of-00002.gguf", "big, second part")
    (mine / "notes.gguf").write_text("not a model")  # hostile or broken files are left out, silently
    (mine / "truncated.gguf").write_bytes(lms.read_bytes()[:100])
    (mine / "again.gguf").symlink_to(lms)  # the same file twice: listed once

    found = local_models([mine], home=home, env={})
    assert [(m.name, m.source, m.quantization) for m in found] == [
        ("big/Big-Q4_K_M-00001-of-00002.gguf", str(mine), "Q4_K_M"),
        ("ggml-org_gemma-3-1b-it-GGUF_gemma-3-1b-it-Q4_K_M.gguf", "llama.cpp cache", ""),
        ("lmstudio-community/Qwen3-4B-GGUF/Qwen3-4B-Q4_K_M.gguf", "LM Studio", "Q4_K_M"),
        ("Qwen/Qwen2.5-0.5B-GGUF/qwen2.5-0.5b-q8_0.gguf", "Hugging Face cache", "Q8_0"),
        ("qwen2.5-coder:1.5b", "Ollama", "Q4_K_M"),
        ("someone/tiny:latest", "Ollama", "Q4_K_M"),
    ]
    paths = {m.name: m.path for m in found}
    assert paths["qwen2.5-coder:1.5b"] == o1.resolve() and paths["someone/tiny:latest"] == o2.resolve()
    assert paths["Qwen/Qwen2.5-0.5B-GGUF/qwen2.5-0.5b-q8_0.gguf"] == blob.resolve()  # used in place
    assert paths["ggml-org_gemma-3-1b-it-GGUF_gemma-3-1b-it-Q4_K_M.gguf"] == cpp.resolve()
    assert paths["big/Big-Q4_K_M-00001-of-00002.gguf"] == split.resolve()
    assert all(m.architecture == "llama" and m.size == m.path.stat().st_size for m in found)
    model = next(m for m in found if m.source == "Ollama")
    assert model.label() == f"qwen2.5-coder:1.5b Q4_K_M, {model.size / 1e9:.2f} GB (Ollama)"


def test_the_places_follow_the_tools_own_settings(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    o = ollama(elsewhere / "ollama", "library", "m", "q4", "d" * 64)
    h = tiny_gguf(elsewhere / "hub/models--a--b/snapshots/r/b.gguf", "b")
    c = tiny_gguf(elsewhere / "llama-cache/c.gguf", "c")
    env = {"OLLAMA_MODELS": str(elsewhere / "ollama"), "HF_HUB_CACHE": str(elsewhere / "hub"),
           "LLAMA_CACHE": str(elsewhere / "llama-cache")}  # fmt: skip
    found = local_models(home=tmp_path / "empty-home", env=env)
    assert [(m.name, m.path) for m in found] == [
        ("a/b/b.gguf", h.resolve()),
        ("c.gguf", c.resolve()),
        ("m:q4", o.resolve()),
    ]
    assert local_models(home=tmp_path / "nothing-here", env={}) == []
    assert isinstance(found[0], LocalModel)


def test_links_that_lead_out_of_a_searched_folder_are_not_read(tmp_path):
    home, outside = tmp_path / "home", tmp_path / "elsewhere"
    stray = tiny_gguf(outside / "stray.gguf", "stray")
    tiny_gguf(outside / "deeper" / "hidden.gguf", "hidden")
    mine = tmp_path / "mine"
    kept = tiny_gguf(mine / "kept.gguf", "kept")
    (mine / "link.gguf").symlink_to(stray)  # a file link out of the folder
    (mine / "away").symlink_to(outside / "deeper")  # a folder link out of it
    (mine / "alias.gguf").symlink_to(kept)  # a link that stays inside: the same file, once
    lms = home / ".lmstudio/models/pub"
    lms.mkdir(parents=True)
    (lms / "out.gguf").symlink_to(stray)

    found = local_models([mine], home=home, env={})
    assert [(m.name, m.path) for m in found] == [("alias.gguf", kept.resolve())]  # the first name seen
    # the folder the link led to is searched once the user names it
    assert [m.name for m in local_models([outside], home=home, env={})] == ["deeper/hidden.gguf", "stray.gguf"]
