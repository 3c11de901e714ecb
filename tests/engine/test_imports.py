"""The engine is a library and a command line tool on its own: importing it never loads Qt."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHECK = """
import sys
import engine, engine.cli, engine.session, engine.catalog, engine.speculative
qt = sorted(m for m in sys.modules if m.startswith("PySide6") or m.startswith("pyqtgraph"))
assert not qt, qt
assert "engine.session" in sys.modules
print("ok")
"""


def test_importing_the_engine_leaves_qt_out():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_the_check_would_notice_qt():
    """The same check fails once something does import PySide6."""
    if importlib.util.find_spec("PySide6") is None:
        pytest.skip("PySide6 is not installed (the GUI extra)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = "import PySide6.QtCore\n" + CHECK
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )
    assert result.returncode != 0
    assert "PySide6" in result.stderr
