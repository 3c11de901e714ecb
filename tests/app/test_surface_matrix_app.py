"""Every MLX drafter kind in the window: the app's load (the worker, through the engine's load path) and
a reply, with the folders tests/engine/test_surface_matrix.py writes for chat, serve and pair. The
drafter's kind as loaded, greedy ids equal to depth 0's, accepted drafts where the drafter copies the
target; a drafter made for another target refused in the sentence chat says, the target kept."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mlx_vlm")

from app import settings
from app.window import MainWindow
from engine import Engine, GenerationConfig, Message, TokenEvent, TokenKind
from tests.app.conftest import LOAD_TIMEOUT_MS
from tests.engine.surface_cli import spec
from tests.engine.surface_folders import MATRIX, MISMATCHED, PROMPT, WORDS, write_folders

TOKENS = 12


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    return write_folders(tmp_path_factory.mktemp("surfaces-app"))


@pytest.fixture(scope="module")
def plain_ids(folders) -> dict[str, list[int]]:
    """Each target's greedy reply, decoded plainly by the headless engine."""
    found = {}
    for target in ("qwen35", "gemma4"):
        engine = Engine.load(folders[target], None)
        try:
            prompt = engine.prompt_ids([Message("user", PROMPT)])
            events = engine.stream(prompt, GenerationConfig(max_tokens=TOKENS, depth=0))
            found[target] = [e.token_id for e in events if isinstance(e, TokenEvent)]
        finally:
            engine.close()
    return found


def window_on(qtbot, tmp_path, target: str, drafter: str, depth: int = 2) -> MainWindow:
    prefs = settings.Preferences(target=target, drafter=drafter, max_tokens=TOKENS, depth=depth)
    window = MainWindow(store_path=tmp_path / "conversations.sqlite3", prefs=prefs)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.pair is not None and not window.busy, timeout=LOAD_TIMEOUT_MS)
    return window


@pytest.mark.parametrize("kind", list(MATRIX))
def test_the_window_loads_each_kind_and_replies_with_depth_0s_ids(
    qtbot,
    tmp_path,
    folders,
    plain_ids,
    send,
    kind: str,
):
    target, drafter, copies = MATRIX[kind]
    window = window_on(qtbot, tmp_path, spec(folders, target), spec(folders, drafter))
    assert window.pair.drafter_kind == kind and window.pair.notice == "" and window.pair.compatible
    assert window.worker.engine.runtime.name == "mlx"
    stats = send(window, PROMPT)
    assert list(stats.token_ids) == plain_ids[target] and stats.drafted > 0
    if copies:
        assert stats.accepted > 0 and TokenKind.ACCEPTED in {t.kind for t in window.reply_tokens}
    window.close()


def test_a_capped_kind_asked_for_depth_4_drafts_its_cap_in_the_window(qtbot, tmp_path, folders, plain_ids, send):
    """As `draftlight chat` does (test_surface_matrix): DFlash's block of 4 drafts 3, asked for 4."""
    window = window_on(qtbot, tmp_path, spec(folders, "qwen35"), spec(folders, "dflash"), depth=4)
    assert window.worker.engine.drafter.max_depth == 3
    stats = send(window, PROMPT)
    assert stats.depth == 4 and list(stats.token_ids) == plain_ids["qwen35"]
    assert len(stats.drafted_per_position) == 3 and stats.drafted_per_position[0] > 0
    window.close()


@pytest.mark.parametrize("folder", list(MISMATCHED))
def test_the_window_refuses_a_drafter_made_for_another_target_in_chats_sentence(
    qtbot,
    tmp_path,
    folders,
    plain_ids,
    send,
    folder: str,
):
    kind, clause = MISMATCHED[folder]
    window = window_on(qtbot, tmp_path, str(folders["qwen35"]), str(folders[folder]))
    assert window.pair.drafter_kind == "none"
    assert window.pair.notice == (
        f"The drafter was not loaded: The drafter cannot draft for this target: it is {WORDS[kind]} {clause}: it was "
        "trained for another target."
    )
    stats = send(window, PROMPT)  # the target stays loaded and replies plainly
    assert list(stats.token_ids) == plain_ids["qwen35"]
    window.close()


def test_the_pickers_list_drafter_folders_by_kind_for_the_drafter_alone(qtbot, tmp_path, folders, monkeypatch):
    """A folder of the matrix searched for models: each drafter folder is offered as a drafter with its kind
    first, and never as a target; the targets are offered as both."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the usual places hold nothing here
    root = folders["qwen35"].parent
    prefs = settings.Preferences(target=str(folders["qwen35"]), drafter="none", model_folders=[str(root)])
    window = MainWindow(store_path=tmp_path / "conversations.sqlite3", prefs=prefs)
    qtbot.addWidget(window)
    side = window.side
    drafters = {side.drafter.itemData(i): side.drafter.itemText(i) for i in range(side.drafter.count())}
    targets = {side.target.itemData(i) for i in range(side.target.count())}
    assert drafters[str(folders["eagle3"].resolve())].startswith("an EAGLE-3 drafter, 1 layer: eagle3 MLX")
    assert drafters[str(folders["dspark"].resolve())].startswith("a DSpark drafter, 1 layer: dspark MLX")
    assert drafters[str(folders["assistant"].resolve())].startswith("a Gemma 4 assistant model, 2 layers: assistant")
    assert drafters[str(folders["qwen35"].resolve())].startswith("qwen35 MLX")
    assert str(folders["qwen35"].resolve()) in targets and str(folders["dflash"].resolve()) not in targets
    qtbot.waitUntil(lambda: not window.busy, timeout=LOAD_TIMEOUT_MS)
    window.close()


@pytest.mark.parametrize("kind", list(MATRIX))
def test_teaching_and_the_lab_run_each_kind(qtbot, tmp_path, folders, plain_ids, monkeypatch, kind: str):
    """Teaching mode steps to the first round that drafts and shows it, and the prompt lab runs the pair at
    depths 0 and 2: the same engine the window loaded, the same ids as depth 0. Every kind drafts on round 1
    but prompt lookup, whose table first matches once the random target's reply repeats a token (round 7)."""
    from tests.app.test_lab import RUN_TIMEOUT_MS, start_lab

    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path / "cache"))
    target, drafter, _ = MATRIX[kind]
    window = window_on(qtbot, tmp_path, spec(folders, target), spec(folders, drafter))
    assert window.pair.drafter_kind == kind
    teach = window.open_teaching()
    qtbot.addWidget(teach)
    teach.prompt.setText(PROMPT)
    teach.depth.setValue(2)
    teach.start()
    qtbot.waitUntil(lambda: not teach.waiting, timeout=LOAD_TIMEOUT_MS)

    def advance() -> None:
        teach.step()
        qtbot.waitUntil(lambda: not teach.waiting, timeout=LOAD_TIMEOUT_MS)

    advance()  # the prompt's pass, pending
    while not teach.verdict_due.round.drafted and len(teach.steps) < TOKENS:
        advance()  # its verdict
        advance()  # the next round's drafts, pending
    step = teach.verdict_due
    assert step.round.drafted == 2 and step.round.round_index == (7 if kind == "ngram" else 1)
    # prompt lookup says where its drafts came from, with the drafts and again with the verdict
    source = "Prompt lookup: the last token ('r') appeared before in the prompt (its token 7 of 31); the drafts are"
    assert (source in teach.explanation.text()) == (kind == "ngram")
    teach.step()
    assert (source in teach.explanation.text()) == (kind == "ngram")
    written = [t.token_id for s in teach.steps for t in s.tokens]
    assert written == plain_ids[target][: len(written)] and len(written) > step.round.round_index
    teach.close()
    lab = start_lab(qtbot, window, PROMPT, (0, 2), TOKENS)
    assert lab.start()
    qtbot.waitUntil(lambda: not lab.running, timeout=RUN_TIMEOUT_MS)
    runs = lab.model.results.runs
    assert [r.depth for r in runs] == [0, 2] and runs[1].stats.drafted > 0
    assert [list(r.stats.token_ids) for r in runs] == [plain_ids[target]] * 2
    lab.close()
    window.close()
