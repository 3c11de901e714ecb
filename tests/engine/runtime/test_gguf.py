"""A bad model file is refused with a sentence that says what is wrong with it."""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from engine import Engine, Model, ModelFileError
from engine.runtime.gguf import read_gguf

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def text_file(tmp_path) -> Path:
    path = tmp_path / "notes.gguf"
    path.write_text("These are my shopping notes, not a model.\n")
    return path


@pytest.fixture
def truncated(tmp_path, smollm_path) -> Path:
    """The first 4 MB of SmolLM2: the whole header, almost none of the tensors."""
    path = tmp_path / "SmolLM2-cut.gguf"
    with smollm_path.open("rb") as f:
        path.write_bytes(f.read(4_000_000))
    return path


def test_every_real_model_has_exactly_the_size_its_header_promises(target_path, drafter_path, smollm_path, gemma_path):
    for path in (target_path, drafter_path, smollm_path, gemma_path):
        info = read_gguf(path)
        assert info.expected_size == info.actual_size == path.stat().st_size


def test_a_text_file_named_gguf_is_not_a_gguf(text_file):
    with pytest.raises(ModelFileError) as caught:
        Model(text_file)
    assert str(caught.value) == (
        "notes.gguf is not a GGUF model file (it starts with 'Thes', not 'GGUF'). "
        "Choose a .gguf file made for llama.cpp."
    )


def test_an_empty_file_is_not_a_gguf(tmp_path):
    path = tmp_path / "empty.gguf"
    path.touch()
    with pytest.raises(ModelFileError, match=r"^empty\.gguf is not a GGUF model file"):
        Model(path)


def test_a_truncated_download_says_how_much_is_there(truncated):
    with pytest.raises(ModelFileError) as caught:
        Model(truncated)
    assert str(caught.value) == (
        "SmolLM2-cut.gguf is truncated: it holds 4,000,000 bytes but its tensors need 98,362,432 "
        "(4.1% present). Fetch the file again."
    )


def test_a_file_cut_inside_its_header_is_caught_too(tmp_path, smollm_path):
    path = tmp_path / "SmolLM2-header.gguf"
    with smollm_path.open("rb") as f:
        path.write_bytes(f.read(100_000))
    with pytest.raises(ModelFileError) as caught:
        Model(path)
    message = str(caught.value)
    assert "is cut short" in message
    assert "Fetch the file again." in message


def test_an_unknown_gguf_version_is_named(tmp_path):
    path = tmp_path / "future.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 9, 0, 0))
    with pytest.raises(ModelFileError, match=r"future.gguf is GGUF version 9; versions 2 and 3 are supported\."):
        Model(path)


def test_a_corrupt_header_is_named(tmp_path):
    # one key whose string claims to be far longer than the file
    path = tmp_path / "corrupt.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 1 << 40) + b"x" * 64)
    with pytest.raises(ModelFileError, match="has a corrupt header"):
        Model(path)


def test_a_missing_path(tmp_path):
    missing = tmp_path / "nowhere" / "model.gguf"
    with pytest.raises(ModelFileError, match=f"^No model file at {re.escape(str(missing))}\\.$"):
        Model(missing)


def test_a_missing_path_given_to_engine_load_also_names_the_catalog(tmp_path):
    missing = tmp_path / "model.gguf"
    with pytest.raises(ModelFileError) as caught:
        Engine.load(missing, "none")
    message = str(caught.value)
    assert message.startswith(f"No model file at {missing}, and no catalog model of that name")
    assert "qwen2.5-coder-1.5b" in message


def test_a_directory(tmp_path):
    with pytest.raises(ModelFileError, match=r"is a folder; choose a \.gguf file inside it\."):
        Model(tmp_path)


def cli(*args: str, cache: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DRAFTLIGHT_CACHE": str(cache),
        "HF_HUB_OFFLINE": "1",
        "NO_COLOR": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )


def _one_line_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("draftlight: ")
    return lines[0]


def test_cli_refuses_a_text_file_in_one_line(tmp_path, text_file):
    line = _one_line_error(cli("chat", "hi", "--target", str(text_file), cache=tmp_path / "cache"))
    assert "notes.gguf is not a GGUF model file" in line


def test_cli_refuses_a_truncated_file_in_one_line(tmp_path, truncated):
    line = _one_line_error(cli("chat", "hi", "--target", str(truncated), cache=tmp_path / "cache"))
    assert "SmolLM2-cut.gguf is truncated" in line


def test_cli_refuses_a_missing_file_in_one_line(tmp_path):
    line = _one_line_error(cli("chat", "hi", "--target", str(tmp_path / "gone.gguf"), cache=tmp_path / "cache"))
    assert f"No model file at {tmp_path / 'gone.gguf'}" in line


def test_cli_refuses_an_incompatible_drafter_in_one_line(tmp_path, target_path, smollm_path):
    line = _one_line_error(
        cli("chat", "hi", "--target", str(target_path), "--drafter", str(smollm_path), cache=tmp_path / "cache")
    )
    assert "The drafter cannot draft for this target" in line
    assert "151,936 tokens and the drafter 49,152" in line
