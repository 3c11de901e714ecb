"""The recommended self-drafting pairs: hub files checked by size and header, reports with their links."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import huggingface_hub
import huggingface_hub.constants
import pytest
from huggingface_hub.errors import LocalEntryNotFoundError

from engine import ModelNotAvailable, catalog
from engine.models.discover import drafter_kind
from engine.models.pairs import PAIRS, lookup_pair

pytest.importorskip("gguf")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from synthetic import dflash, hybrid_qwen35


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path / "draftlight"))
    hf = tmp_path / "hf-hub"
    hf.mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hf))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("DRAFTLIGHT_OFFLINE", raising=False)
    return tmp_path


def test_every_pair_is_fetched_by_catalog_name_and_cites_its_sources():
    assert [p.key for p in PAIRS] == [
        "qwen3.6-27b-mtp",
        "qwen3.6-35b-a3b-mtp",
        "gemma-4-31b-assistant",
        "qwen3.6-27b-dflash",
    ]
    assert {p.kind.name for p in PAIRS} == {"mtp", "assistant", "dflash"}
    for pair in PAIRS:
        for model in (pair.target, pair.drafter):
            if model is not None:
                assert catalog.lookup(model.key) is model and model.hf_repo and model.sha256 == ""
        assert pair.reports and all(r.url.startswith("https://") for r in pair.reports)
    gemma = lookup_pair("gemma-4-31b-assistant")
    assert gemma.download_bytes == 17_992_313_088 + 514_687_104
    assert gemma.describe().splitlines()[1] == "  draftlight chat --target gemma-4-31b --drafter gemma-4-31b-assistant"


def _hub(monkeypatch, served: Path, calls: list):
    def fake_download(repo_id, filename, local_files_only=False, tqdm_class=None, **kwargs):
        calls.append((repo_id, filename, local_files_only))
        if local_files_only:
            raise LocalEntryNotFoundError("not in the cache")
        return str(served)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)


def test_a_pairs_drafter_comes_from_the_hub_checked_by_size_and_header(private_cache, monkeypatch):
    served = (
        dflash(private_cache / "served" / "dflash-Qwen3.6-27B-Q8_0.gguf")
        if (private_cache / "served").mkdir() is None
        else None
    )
    model = replace(catalog.CATALOG["qwen3.6-27b-dflash"], size=served.stat().st_size)  # the real one is 1.8 GB
    calls: list = []
    _hub(monkeypatch, served, calls)
    path = catalog.resolve(model)
    assert path == served and calls[-1] == ("ggml-org/Qwen3.6-27B-GGUF", "dflash-Qwen3.6-27B-Q8_0.gguf", False)
    target = hybrid_qwen35(private_cache / "target.gguf")
    assert drafter_kind(target, path) == "dflash"


def test_a_download_of_the_right_size_that_is_no_gguf_is_refused(private_cache, monkeypatch):
    served = private_cache / "junk.gguf"
    served.write_bytes(b"\0" * 4096)
    model = replace(catalog.CATALOG["gemma-4-31b-assistant"], size=4096)
    _hub(monkeypatch, served, [])
    with pytest.raises(ModelNotAvailable, match="the Hugging Face hub \\(the download is not a whole GGUF file\\)"):
        catalog.resolve(model)
