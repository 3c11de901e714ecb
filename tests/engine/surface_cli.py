"""What the two surface matrices (tests/engine/test_surface_matrix.py on MLX folders,
test_surface_matrix_llama.py on GGUF files) share: naming a drafter, and `draftlight chat --json`."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from engine.cli import main


def spec(paths: dict[str, Path], name: str) -> str:
    """A file's or folder's path where `name` is one, else the name itself (a keyword kind: ngram, mtp)."""
    return str(paths[name]) if name in paths else name


def chat_lines(paths: dict[str, Path], prompt: str, target: str, drafter: str, depth: int | str, n: int) -> list[dict]:
    """`draftlight chat --json` on the pair, `n` tokens with the end of text banned: every line it wrote."""
    out = io.StringIO()
    argv = ["chat", prompt, "--target", spec(paths, target), "--drafter", spec(paths, drafter), "--depth",
            str(depth), "--max-tokens", str(n), "--ignore-eos", "--json"]  # fmt: skip
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return [json.loads(line) for line in out.getvalue().splitlines()]
