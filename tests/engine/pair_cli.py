"""`draftlight pair` run as a user runs it, for the tests of the pairing doctor."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_pair(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """`draftlight pair ARGS` in a child, with its own cache and no hub: what a user's terminal shows."""
    env = {**os.environ, "DRAFTLIGHT_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    env["PYTHONIOENCODING"] = "utf-8"
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", "pair", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
