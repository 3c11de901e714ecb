"""The model cache tells the truth about its files and does not keep a killed assembly's leftovers."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from engine.cli import main
from engine.errors import ModelNotAvailable
from engine.models import catalog
from engine.models.housekeeping import remove_stale_partials
from tests.fuzz.tiny_gguf import tiny_llama


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = catalog.models_dir()
    folder.mkdir(parents=True)
    return folder


def listed_state(capsys, key: str) -> str:
    assert main(["models", "--list"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(key + " "))
    return line.split(" MB  ", 1)[1]


def test_models_list_says_a_cut_short_cache_file_is_incomplete(cache, tmp_path, capsys):
    # item 14: a download stopped part-way used to be listed "ready"
    whole = tiny_llama(tmp_path / "tiny.gguf").read_bytes()
    (cache / catalog.SMOLLM2_135M.filename).write_bytes(whole[: len(whole) // 2])
    assert listed_state(capsys, "smollm2-135m") == "incomplete (0 MB of 98): fetch it again"


def test_models_list_says_a_damaged_cache_file_is_damaged(cache, capsys):
    (cache / catalog.GEMMA3_270M.filename).write_bytes(b"GGUF" + (3).to_bytes(4, "little") + b"\xff" * 64)
    assert listed_state(capsys, "gemma3-270m") == "damaged: fetch it again"


def test_models_list_says_ready_only_for_a_checked_file(cache, tmp_path, capsys):
    path = cache / catalog.SMOLLM2_135M.filename
    path.write_bytes(tiny_llama(tmp_path / "tiny.gguf").read_bytes())
    assert listed_state(capsys, "smollm2-135m") == "not the catalog's file (0 MB): fetch it again"
    st = path.stat()
    stamp = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": catalog.SMOLLM2_135M.sha256}
    (cache / (path.name + ".verified")).write_text(json.dumps(stamp))
    assert listed_state(capsys, "smollm2-135m") == "ready"
    assert listed_state(capsys, "qwen3.6-27b-mtp") == "not fetched"


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_killed_assembly_s_partial_file_is_removed_on_the_next_run(cache):
    # item 15: `.partial-PID` files (the model's size each) stayed for ever
    stale = cache / f"{catalog.QWEN36_27B_MTP.filename}.partial-{_dead_pid()}"
    live = cache / f"{catalog.QWEN36_27B_MTP.filename}.partial-{os.getppid()}"  # pytest's parent: alive
    stale.write_bytes(b"half a model")
    live.write_bytes(b"still being written")
    with pytest.raises(ModelNotAvailable):
        catalog.resolve(catalog.QWEN36_27B_MTP, download=False)
    assert not stale.exists()
    assert live.read_bytes() == b"still being written"


def test_only_partial_files_are_touched(cache):
    kept = [cache / "notes.partial-x", cache / "model.gguf", cache / "model.gguf.verified"]
    for path in kept:
        path.write_text("keep")
    assert remove_stale_partials(cache) == []
    assert all(path.exists() for path in kept)
