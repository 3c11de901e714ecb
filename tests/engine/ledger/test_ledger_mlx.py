"""MLX folders in the acceptance ledger: a folder's fingerprint reads its config, its index and each
weight file's safetensors header and sampled data, so one changed tensor changes it and a copy does
not; a reply on MLX is kept under the target's and the drafter's folders, whatever the drafter's
kind (a draft model, DFlash, EAGLE-3, a Gemma 4 assistant). Tiny random-weight folders written here
by the kinds' own writers (tests/engine/surface_folders.py). Fast."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import struct
from pathlib import Path

import pytest

pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")
pytest.importorskip("mlx_vlm")

from engine.cli import main
from engine.ledger import recording
from engine.ledger.fingerprint import identity
from engine.runtime.mlx import MlxOptions
from tests.engine.surface_folders import (
    CORPUS,
    PROMPT,
    TOKENIZER_VOCAB,
    write_assistant,
    write_dflash,
    write_eagle3,
    write_gemma4,
    write_target,
)

N = 12


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ledger-mlx")
    qwen35 = write_target(root / "qwen35", 3, "copy", layers=4, interval=2, tokenizer=CORPUS)
    gemma4 = write_gemma4(root / "gemma4", 61, tokenizer=CORPUS)
    return {
        "qwen35": qwen35,
        "gemma4": gemma4,
        "dflash": write_dflash(root / "dflash", 121, vocab=TOKENIZER_VOCAB),
        "eagle3": write_eagle3(root / "eagle3", 12, vocab=TOKENIZER_VOCAB),
        "assistant": write_assistant(root / "assistant", 161, gemma4, "copy", vocab=TOKENIZER_VOCAB),
    }


def first_tensor_data(weights: Path) -> int:
    """Where the first tensor's data starts in a safetensors file."""
    (n,) = struct.unpack("<Q", weights.read_bytes()[:8])
    header = json.loads(weights.read_bytes()[8 : 8 + n])
    return 8 + n + min(v["data_offsets"][0] for k, v in header.items() if k != "__metadata__")


def test_a_folder_fingerprint_follows_its_tensors_not_its_place(folders, tmp_path: Path) -> None:
    target = folders["qwen35"]
    theirs = identity(target)
    assert theirs.name == "qwen35" and theirs.fingerprint.startswith("mlx:")
    copy = Path(shutil.copytree(target, tmp_path / "copy"))
    assert identity(copy).fingerprint == theirs.fingerprint  # moved or copied: the same folder
    changed = Path(shutil.copytree(target, tmp_path / "changed"))
    (weights,) = changed.glob("*.safetensors")
    data = bytearray(weights.read_bytes())
    data[first_tensor_data(weights)] ^= 0xFF  # one byte of one tensor
    weights.write_bytes(bytes(data))
    assert identity(changed).fingerprint != theirs.fingerprint
    indexed = Path(shutil.copytree(target, tmp_path / "indexed"))
    (indexed / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {}}))
    assert identity(indexed).fingerprint != theirs.fingerprint


@pytest.mark.parametrize(
    ("target", "drafter"),
    [("qwen35", "qwen35"), ("qwen35", "dflash"), ("qwen35", "eagle3"), ("gemma4", "assistant")],
)
def test_a_reply_on_mlx_is_kept_under_both_folders(folders, target: str, drafter: str) -> None:
    out = io.StringIO()
    argv = ["chat", PROMPT, "--target", str(folders[target]), "--drafter", str(folders[drafter]), "--depth", "2",
            "--max-tokens", str(N), "--ignore-eos", "--json"]  # fmt: skip
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    stats = json.loads(out.getvalue().splitlines()[-1])
    (kept,) = recording.ledger().replies()
    assert kept.source == "chat" and (kept.drafted, kept.accepted) == (stats["drafted"], stats["accepted"]) != (0, 0)
    assert kept.setup.pair == (target, drafter)
    assert kept.setup.drafter_kind == stats["drafter_kind"]
    assert kept.setup.target_fingerprint == identity(folders[target]).fingerprint
    assert kept.setup.drafter_fingerprint == identity(folders[drafter]).fingerprint
    assert kept.setup.runtime == MlxOptions().runtime_version()
