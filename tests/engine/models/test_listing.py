"""`draftlight models --list` lists what the app's pickers find, and `--target` takes the names it shows.

A temporary HOME holds an LM Studio folder (a GGUF file and a GGUF DFlash drafter for it, an MLX target under mlx-community/, an EAGLE-3
drafter made for it and a DFlash drafter made for a deeper target) and a Hugging Face cache with an MLX
target in a models--org--name repository. Tiny random-weight files written here."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("gguf")
pytest.importorskip("mlx_vlm")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
from mlx_folders import CORPUS
from mlx_targets import TOKENIZER_VOCAB, write_dflash, write_eagle3, write_target
from synthetic import dflash, hybrid_qwen35

from engine.cli import main

HEADER = (
    "Models on this machine (LM Studio, Ollama, the Hugging Face cache, llama.cpp's cache, and MLX folders), by the "
    "names --target takes:"
)


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    home, hub = tmp_path / "home", tmp_path / "home" / "hub"
    for name, value in (("HOME", home), ("DRAFTLIGHT_CACHE", tmp_path / "cache"), ("HF_HUB_CACHE", hub)):
        monkeypatch.setenv(name, str(value))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for var in ("OLLAMA_MODELS", "HF_HOME", "LLAMA_CACHE"):
        monkeypatch.delenv(var, raising=False)
    models = home / ".lmstudio" / "models"
    (models / "tiny").mkdir(parents=True)
    hybrid_qwen35(models / "tiny" / "qwen35-Q8_0.gguf")
    dflash(models / "tiny" / "dflash-qwen35.gguf")
    write_target(models / "mlx-community" / "qwen35-mlx", 3, "copy", layers=4, interval=2, tokenizer=CORPUS)
    write_eagle3(models / "drafters" / "qwen35-eagle3", 12, vocab=TOKENIZER_VOCAB)
    write_dflash(models / "drafters" / "deep-dflash", 121, target_layers=(0, 9), vocab=TOKENIZER_VOCAB)
    repo = hub / "models--org--qwen35-hub"
    write_target(repo / "snapshots" / "abc", 4, "random", layers=2, interval=2, tokenizer=CORPUS)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc")
    return home


def test_models_list_shows_gguf_files_and_drafters_under_the_target_they_fit(home, capsys):
    assert main(["models", "--list"]) == 0
    out = capsys.readouterr().out.splitlines()
    tail = out[out.index(HEADER) :]
    models = home / ".lmstudio" / "models"
    assert [line.split(": /")[0] for line in tail] == [  # each line's path left out
        HEADER,
        "  mlx-community/qwen35-mlx MLX, 0.00 GB (LM Studio)",
        "    an EAGLE-3 drafter, 1 layer, drafts for it: drafters/qwen35-eagle3 MLX, 0.00 GB (LM Studio)",
        "  org/qwen35-hub MLX, 0.00 GB (Hugging Face cache)",
        "  tiny/qwen35-Q8_0.gguf, 0.01 GB (LM Studio)",
        "    a DFlash drafter, 1 layer, drafts for it: tiny/dflash-qwen35.gguf, 0.00 GB (LM Studio)",
        "Drafters that fit none of these models:",
        "  a DFlash drafter, 1 layer: drafters/deep-dflash MLX, 0.00 GB (LM Studio)",
    ]
    assert tail[4].endswith(f"(LM Studio): {(models / 'tiny' / 'qwen35-Q8_0.gguf').resolve()}")


@pytest.mark.parametrize("name", ["mlx-community/qwen35-mlx", "org/qwen35-hub", "HUB"])
def test_target_takes_the_name_models_list_shows_and_a_hugging_face_repository_folder(home, name: str):
    target = str(home / "hub" / "models--org--qwen35-hub") if name == "HUB" else name
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["chat", "hi", "--target", target, "--depth", "0", "--max-tokens", "4", "--json"]) == 0
    stats = json.loads(out.getvalue().splitlines()[-1])
    assert stats["generated_tokens"] == 4 and stats["drafter_kind"] == "none"


def test_an_unknown_target_name_says_where_names_come_from(home, capsys):
    assert main(["chat", "hi", "--target", "mlx-community/nothing-here", "--depth", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("draftlight: No model file at mlx-community/nothing-here, and no catalog model of that name")
    assert err.endswith("nor a model on this machine called that: `draftlight models --list` shows them, by the "
                        "names --target takes.\n")  # fmt: skip
