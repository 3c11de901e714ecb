"""The MLX catalog without a network: the hub call asked for the right repository and files, and a
snapshot already in the Hugging Face cache found by huggingface_hub's own local-only resolve."""

from __future__ import annotations

import huggingface_hub
import pytest
from huggingface_hub import constants
from huggingface_hub.errors import LocalEntryNotFoundError

from engine.drafting import kinds
from engine.errors import ModelNotAvailable
from engine.models import mlx_catalog
from engine.models.catalog import MLX_CATALOG, QWEN36_27B_4BIT
from engine.models.mlx_catalog import MAC_PAIRS, lookup_mlx, resolve_mlx
from tests.engine.models.mlx_trees import hf_snapshot, mlx_folder


def test_a_download_asks_the_hub_for_the_repository_and_only_the_files_mlx_needs(tmp_path, monkeypatch):
    calls = []

    def snapshot_download(repo_id, allow_patterns, local_files_only):
        calls.append((repo_id, allow_patterns, local_files_only))
        if local_files_only:
            raise LocalEntryNotFoundError("not in the cache")
        return str(mlx_folder(tmp_path / "downloaded"))

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("DRAFTLIGHT_OFFLINE", raising=False)
    assert resolve_mlx(QWEN36_27B_4BIT) == tmp_path / "downloaded"
    files = ["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja"]
    assert calls == [("mlx-community/Qwen3.6-27B-4bit", files, True), ("mlx-community/Qwen3.6-27B-4bit", files, False)]

    calls.clear()
    with pytest.raises(ModelNotAvailable) as refused:
        resolve_mlx(QWEN36_27B_4BIT, download=False)
    assert calls == [("mlx-community/Qwen3.6-27B-4bit", files, True)]
    assert str(refused.value) == (
        "Qwen3.6-27B (MLX 4-bit) is not available. Tried: the Hugging Face cache (not there). Fetch it with "
        "`draftlight models qwen3.6-27b-4bit-mlx` where the hub can be reached, or pass its folder."
    )


def test_a_snapshot_already_cached_is_found_without_the_network(tmp_path, monkeypatch):
    hub = tmp_path / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert mlx_catalog.cached_mlx(QWEN36_27B_4BIT) is None
    snapshot = hf_snapshot(hub, "mlx-community/Qwen3.6-27B-4bit", "0123abcd", mlx_folder, model_type="qwen3_5")
    (hub / "models--mlx-community--Qwen3.6-27B-4bit/refs").mkdir()
    (hub / "models--mlx-community--Qwen3.6-27B-4bit/refs/main").write_text("0123abcd")
    assert resolve_mlx(QWEN36_27B_4BIT, download=False) == snapshot.resolve()
    (snapshot / "config.json").unlink()  # a snapshot cut short is not whole enough to use
    assert mlx_catalog.cached_mlx(QWEN36_27B_4BIT) is None


def test_the_pairs_for_macs_name_their_repositories_and_figures():
    assert lookup_mlx("mlx-community/qwen3.6-27b-4bit") is QWEN36_27B_4BIT and lookup_mlx("nothing") is None
    assert [(p.key, p.kind, p.target.hf_repo, p.drafter.hf_repo if p.drafter else None) for p in MAC_PAIRS] == [
        ("qwen3.6-27b-mtp-mlx", kinds.MTP, "Youssofal/Qwen3.6-27B-MTPLX-Optimized-Speed", None),
        ("gemma-4-26b-a4b-assistant-mlx", kinds.ASSISTANT, "mlx-community/gemma-4-26b-a4b-it-4bit",
         "mlx-community/gemma-4-26B-A4B-it-assistant-bf16"),
        ("qwen3.6-27b-dflash-mlx", kinds.DFLASH, "mlx-community/Qwen3.6-27B-4bit", "z-lab/Qwen3.6-27B-DFlash"),
        ("qwen3-4b-dspark-mlx", kinds.DSPARK, "mlx-community/Qwen3-4B-8bit", "deepseek-ai/dspark_qwen3_4b_block7"),
    ]  # fmt: skip
    figures = [r.figure for p in MAC_PAIRS for r in p.reports]
    assert figures[0].startswith("Qwen3.6-27B 4-bit 28 -> 63 tok/s") and "34.96 -> 60.67" in figures[1]
    assert "33.3 -> 98.1 tok/s" in figures and "3.63x mean" in figures
    assert all(r.url.startswith("https://") for p in MAC_PAIRS for r in p.reports)
    assert {p.target.key for p in MAC_PAIRS} | {p.drafter.key for p in MAC_PAIRS if p.drafter} <= set(MLX_CATALOG)


def test_models_list_shows_the_mlx_catalog_the_pairs_for_macs_and_the_folders_here(tmp_path, monkeypatch, capsys):
    from engine.cli import main

    home, hub = tmp_path / "home", tmp_path / "hub"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub))
    for var in ("OLLAMA_MODELS", "HF_HOME", "LLAMA_CACHE"):
        monkeypatch.delenv(var, raising=False)
    lms = mlx_folder(home / ".lmstudio/models/mlx-community/Qwen3-4B-4bit")
    snapshot = hf_snapshot(hub, "z-lab/Qwen3.6-27B-DFlash", "feed", mlx_folder, bits=None, fmt="pt", tokens=None,
                           extra={"architectures": ["DFlashDraftModel"]})  # fmt: skip
    (hub / "models--z-lab--Qwen3.6-27B-DFlash/refs").mkdir()
    (hub / "models--z-lab--Qwen3.6-27B-DFlash/refs/main").write_text("feed")
    assert main(["models", "--list"]) == 0
    out = capsys.readouterr().out.splitlines()
    mlx = out[
        out.index("MLX models, fetched from the Hugging Face hub by repository id (`draftlight models KEY`):") + 1 :
    ]
    assert [line.split()[-1] for line in mlx[:7]] == ["fetched"] * 2 + ["cache"] + ["fetched"] * 4
    assert (
        mlx[2].startswith("qwen3.6-27b-dflash-mlx ") and "z-lab/Qwen3.6-27B-DFlash  in the Hugging Face cache" in mlx[2]
    )
    assert "Pairs for Macs (MLX), with what their users measured (not us: see the links):" in out
    assert "  reported: 33.3 -> 98.1 tok/s (Apple Silicon, dflash-mlx) https://github.com/bstnxbt/dflash-mlx" in out
    size = (lms / "model.safetensors").stat().st_size
    drafter_size = sum(p.resolve().stat().st_size for p in snapshot.glob("*.safetensors"))
    assert out[-4:] == [  # the drafter folder listed with its kind, under the target it fits
        "",
        "Models on this machine (LM Studio, Ollama, the Hugging Face cache, llama.cpp's cache, and MLX folders), by "
        "the names --target takes:",
        f"  mlx-community/Qwen3-4B-4bit MLX 4-bit, {size / 1e9:.2f} GB (LM Studio): {lms.resolve()}",
        "    a DFlash drafter, 2 layers, drafts for it: z-lab/Qwen3.6-27B-DFlash MLX bf16, "
        f"{drafter_size / 1e9:.2f} GB (Hugging Face cache): {snapshot.resolve()}",
    ]
    assert main(["models", "qwen3.6-27b-dflash-mlx", "--offline"]) == 0
    assert capsys.readouterr().out == f"DFlash drafter for Qwen3.6-27B (z-lab): {snapshot.resolve()}\n"
