"""The window on MLX: an MLX folder chosen as the target loads on MLX through the worker, its drafter
on the same runtime, and the reply's greedy ids are plain decoding's. Tiny random-weight folders
written here (tests/engine/runtime/mlx_folders.py): a second to load, even on MLX's CPU backend."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mlx_lm")

from app import settings
from app.window import MainWindow
from engine import Engine, GenerationConfig, Message, RunStats, TokenEvent, TokenKind
from tests.app.conftest import LOAD_TIMEOUT_MS
from tests.engine.runtime.mlx_folders import write_qwen2_folder

PROMPT = "write a function"
TOKENS = 12


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mlx-window")
    return {
        "target": write_qwen2_folder(root / "target", seed=0),
        "drafter": write_qwen2_folder(root / "drafter", seed=3),  # disagrees now and then: replaced tokens
    }


@pytest.fixture(scope="module")
def plain_ids(folders) -> list[int]:
    """The reply's greedy ids, decoded plainly on MLX by the headless engine."""
    engine = Engine.load(folders["target"], None)
    try:
        prompt = engine.prompt_ids([Message("user", PROMPT)])
        events = engine.stream(prompt, GenerationConfig(max_tokens=TOKENS, depth=0))
        return [e.token_id for e in events if isinstance(e, TokenEvent)]
    finally:
        engine.close()


@pytest.mark.slow
def test_an_mlx_folder_loads_on_mlx_and_streams_plain_decodings_ids(qtbot, tmp_path, folders, plain_ids, send):
    prefs = settings.Preferences(
        target=str(folders["target"]), drafter=str(folders["drafter"]), max_tokens=TOKENS, depth=2
    )
    window = MainWindow(store_path=tmp_path / "conversations.sqlite3", prefs=prefs)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.pair is not None and not window.busy, timeout=LOAD_TIMEOUT_MS)
    engine = window.worker.engine
    assert engine.runtime == "mlx" and engine.drafter.model.options.runtime == "mlx"  # the drafter too
    assert window.pair.runtime == "mlx" and window.pair.compatible
    assert window.windowTitle() == "Draftlight — target + drafter — on MLX"
    assert window.status.labels["place"].text() == "this machine on MLX"
    assert window.side.verdict.text().endswith("The pair runs on MLX.")

    stats = send(window, PROMPT)
    assert isinstance(stats, RunStats) and list(stats.token_ids) == plain_ids
    kinds = {t.kind for t in window.reply_tokens}  # the drafter drafted, and was corrected where it missed
    assert stats.drafted > 0 and TokenKind.REPLACED in kinds
    assert kinds <= {TokenKind.PLAIN, TokenKind.ACCEPTED, TokenKind.REPLACED, TokenKind.BONUS}
    window.close()
