"""The window on MLX: an MLX folder chosen as the target loads on MLX through the worker, its drafter
on the same runtime, and the reply's greedy ids are plain decoding's. Tiny random-weight folders
written here (tests/engine/runtime/mlx_folders.py): a second to load, even on MLX's CPU backend."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("mlx_lm")

from app import settings
from app.window import MainWindow
from engine import AUTO, Engine, GenerationConfig, Message, RunStats, TokenEvent, TokenKind
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


def mlx_window(qtbot, tmp_path, folders, runtime: str = "auto", **prefs) -> MainWindow:
    """The real window on the MLX pair (or the models in `prefs`), loaded."""
    prefs = {"target": str(folders["target"]), "drafter": str(folders["drafter"]), "max_tokens": TOKENS, "depth": 2,
             **prefs}  # fmt: skip
    window = MainWindow(store_path=tmp_path / "conversations.sqlite3", prefs=settings.Preferences(**prefs),
                        runtime=runtime)  # fmt: skip
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.pair is not None and not window.busy, timeout=LOAD_TIMEOUT_MS)
    return window


@pytest.mark.slow
def test_an_mlx_folder_loads_on_mlx_and_streams_plain_decodings_ids(qtbot, tmp_path, folders, plain_ids, send):
    window = mlx_window(qtbot, tmp_path, folders)
    engine = window.worker.engine
    assert engine.runtime.name == "mlx" and engine.drafter.model.options.runtime == "mlx"  # the drafter too
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


@pytest.mark.slow
def test_teaching_steps_through_an_mlx_round(qtbot, tmp_path, folders, plain_ids):
    window = mlx_window(qtbot, tmp_path, folders)
    teach = window.open_teaching()
    qtbot.addWidget(teach)
    teach.prompt.setText(PROMPT)
    teach.depth.setValue(2)
    teach.start()
    qtbot.waitUntil(lambda: not teach.waiting, timeout=LOAD_TIMEOUT_MS)
    for _ in range(3):  # the prompt's pass and its verdict, then round 1's drafts, pending
        teach.step()
        qtbot.waitUntil(lambda: not teach.waiting, timeout=LOAD_TIMEOUT_MS)
    step = teach.verdict_due
    assert step is not None and step.round.drafted == 2
    engine = window.worker.engine
    assert teach.view.pending_text() == "".join(engine.target.display(t) for t in step.drafts)
    teach.step()  # the verdict: the target's tokens are plain decoding's
    assert [t.token_id for t in step.tokens] == plain_ids[1 : 1 + len(step.tokens)]
    teach.close()
    window.close()


@pytest.mark.slow
def test_the_lab_runs_an_mlx_pair_at_each_depth(qtbot, tmp_path, folders, plain_ids, monkeypatch):
    from tests.app.test_lab import RUN_TIMEOUT_MS, start_lab

    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path / "cache"))
    window = mlx_window(qtbot, tmp_path, folders)
    lab = start_lab(qtbot, window, PROMPT, (0, 2), 8)
    assert lab.start()
    qtbot.waitUntil(lambda: not lab.running, timeout=RUN_TIMEOUT_MS)
    assert lab.status.text() == "Done: 2 runs."
    runs = lab.model.results.runs
    assert [r.depth for r in runs] == [0, 2] and runs[1].stats.drafted > 0
    assert [r.stats.generated_tokens for r in runs] == [8, 8]
    assert [list(r.stats.token_ids) for r in runs] == [plain_ids[:8]] * 2  # speculation left the text alone
    lab.close()
    window.close()


@pytest.mark.slow
def test_auto_on_mlx_measures_and_keeps_an_mlx_profile(qtbot, tmp_path, folders, plain_ids, monkeypatch, send):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path / "cache"))
    window = mlx_window(qtbot, tmp_path, folders, depth=AUTO)
    stats = send(window, PROMPT)  # plain while this box is measured on MLX in the background
    assert isinstance(stats, RunStats) and list(stats.token_ids) == plain_ids
    qtbot.waitUntil(lambda: not window.measure_control.measuring, timeout=600_000)
    engine = window.worker.engine
    (saved,) = (tmp_path / "cache" / "profiles").glob("*.json")
    data = json.loads(saved.read_text())
    assert data["runtime"] == engine.target.options.runtime_version() and data["mode"] == "mlx cpu compiled joined"
    assert (data["target"], data["drafter"]) == ("target", "drafter")
    window.close()


@pytest.mark.slow
def test_runtime_mlx_runs_a_gguf_file_converted(qtbot, tmp_path, folders, smollm_path, send):
    from engine.models.mlx_conversions import mlx_folder_for

    converted = mlx_folder_for(smollm_path)  # once into the user cache, as the window would
    window = mlx_window(qtbot, tmp_path, folders, runtime="mlx", target=str(smollm_path), drafter="ngram",
                        max_tokens=6)  # fmt: skip
    engine = window.worker.engine
    assert engine.runtime.name == "mlx" and engine.target.path == converted and engine.drafter.kind == "ngram"
    assert window.windowTitle().endswith(" — on MLX")
    stats = send(window, "Say hello.")
    assert isinstance(stats, RunStats) and stats.generated_tokens > 0
    window.close()


@pytest.mark.slow
def test_a_damaged_mlx_folder_from_the_picker_is_one_sentence_and_the_conversation_stays(
    qtbot, tmp_path, folders, plain_ids, send
):
    """A broken download (its weights cut in half) chosen in the picker: the window says the folder check's
    sentence, forgets the folder, keeps the pair it had and the conversation, and replies on."""
    from app.worker import LoadRequest
    from engine.errors import ModelFileError
    from engine.runtime.mlx_check import check_folder

    window = mlx_window(qtbot, tmp_path, folders)
    assert list(send(window, PROMPT).token_ids) == plain_ids
    before = window.transcript.toPlainText()
    broken = tmp_path / "broken-download"
    shutil.copytree(folders["target"], broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(ModelFileError) as caught:
        check_folder(broken)
    window.side._remember(str(broken))
    with qtbot.waitSignal(window.worker.load_failed, timeout=LOAD_TIMEOUT_MS) as failed:
        window.load(LoadRequest(str(broken), str(folders["drafter"])))
    assert failed.args[0] == str(caught.value)
    qtbot.waitUntil(lambda: window.side.target.findData(str(broken)) < 0)
    assert window.pair.target == str(folders["target"]) and window.transcript.toPlainText().startswith(before)
    again = send(window, PROMPT)  # the conversation goes on: its second reply reads the first
    assert len(again.token_ids) == TOKENS and window.transcript.toPlainText().startswith(before)
    window.close()
