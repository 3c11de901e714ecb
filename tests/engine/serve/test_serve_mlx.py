"""`draftlight serve --runtime mlx` on a tiny MLX pair: the box names MLX, and a streamed reply's
tokens and provenance are `draftlight chat --json`'s on the same folders."""

from __future__ import annotations

import contextlib
import http.client
import io
import json
from pathlib import Path

import pytest

pytest.importorskip("mlx_lm")

from engine.cli import main
from engine.runtime.mlx import MlxOptions
from tests.engine.runtime.mlx_folders import write_qwen2_folder
from tests.served import Served

PROMPT = "write a function"
N = 12


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("mlx-serve")
    return write_qwen2_folder(root / "target", seed=0), write_qwen2_folder(root / "drafter", seed=3)


def chat_json(target: Path, drafter: Path) -> list[dict]:
    out = io.StringIO()
    argv = ["chat", PROMPT, "--target", str(target), "--drafter", str(drafter), "--runtime", "mlx"]
    with contextlib.redirect_stdout(out):
        assert main([*argv, "--depth", "2", "--max-tokens", str(N), "--json"]) == 0
    return [json.loads(line) for line in out.getvalue().splitlines()]


@pytest.mark.slow
def test_serve_on_mlx_streams_the_command_lines_tokens(pair):
    target, drafter = pair
    served = Served(target, drafter, "--runtime", "mlx", "--depth", "2")
    try:
        conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=300)
        body = json.dumps({"messages": [{"role": "user", "content": PROMPT}], "max_tokens": N})
        conn.request("POST", "/draftlight/v1/stream", body=body)
        lines = [
            json.loads(line[6:])
            for line in conn.getresponse().read().decode().splitlines()
            if line.startswith("data: ")
        ]
    finally:
        served.stop()
    assert lines[0]["type"] == "box" and lines[0]["runtime"] == MlxOptions().runtime_version()
    ours = [(d["token_id"], d["kind"]) for d in lines if d["type"] == "token"]
    theirs = [(d["token_id"], d["kind"]) for d in chat_json(target, drafter) if d["type"] == "token"]
    assert ours == theirs and len(ours) == N
    assert lines[-1]["type"] == "stats" and lines[-1]["drafted"] > 0
