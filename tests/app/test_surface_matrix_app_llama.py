"""Every llama.cpp drafter kind in the window: the app's load (the worker, through the engine's load path)
and a reply, teaching mode and the prompt lab, with the files tests/engine/test_surface_matrix_llama.py
writes for chat, serve and pair. The drafter's kind as loaded, greedy ids equal to depth 0's, accepted
drafts where the drafter knows the target's choices; a mismatched drafter refused in the sentence chat
says, the target kept. The twin of test_surface_matrix_app.py (MLX)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("gguf")

from app import settings
from app.window import MainWindow
from engine import Engine, GenerationConfig, Message, TokenEvent, TokenKind
from tests.app.conftest import LOAD_TIMEOUT_MS
from tests.engine.surface_cli import spec
from tests.engine.surface_files import MATRIX, MISMATCHED, PROMPT, WORDS, write_files

TOKENS = 12


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    return write_files(tmp_path_factory.mktemp("surfaces-llama-app"))


@pytest.fixture(scope="module")
def plain_ids(files) -> dict[str, list[int]]:
    """Each target's greedy reply, decoded plainly by the headless engine."""
    found = {}
    for target in ("qwen35", "gemma4"):
        engine = Engine.load(files[target], None)
        try:
            prompt = engine.prompt_ids([Message("user", PROMPT)])
            events = engine.stream(prompt, GenerationConfig(max_tokens=TOKENS, depth=0, ignore_eog=True))
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
def test_the_window_loads_each_kind_and_replies_with_depth_0s_ids(qtbot, tmp_path, files, plain_ids, send, kind):
    target, drafter, knows = MATRIX[kind]
    window = window_on(qtbot, tmp_path, spec(files, target), spec(files, drafter))
    assert window.pair.drafter_kind == kind and window.pair.notice == "" and window.pair.compatible
    assert window.worker.engine.runtime.name == "llama"
    stats = send(window, PROMPT)
    assert list(stats.token_ids) == plain_ids[target] and stats.drafted > 0
    if knows:
        assert stats.accepted > 0 and TokenKind.ACCEPTED in {t.kind for t in window.reply_tokens}
    window.close()


@pytest.mark.parametrize("name", list(MISMATCHED))
def test_the_window_refuses_a_mismatched_drafter_in_chats_sentence(qtbot, tmp_path, files, plain_ids, send, name):
    target, kind, clause = MISMATCHED[name]
    window = window_on(qtbot, tmp_path, str(files[target]), str(files[name]))
    assert window.pair.drafter_kind == "none"
    assert window.pair.notice == (
        f"The drafter was not loaded: The drafter cannot draft for this target: it is {WORDS[kind]} {clause}: it "
        "was trained for another target."
    )
    stats = send(window, PROMPT)  # the target stays loaded and replies plainly
    assert list(stats.token_ids) == plain_ids[target]
    window.close()


def test_the_pickers_list_drafter_files_by_kind_for_the_drafter_alone(qtbot, tmp_path, files, monkeypatch):
    """A folder of the matrix searched for models: each drafter file is offered as a drafter with its kind
    first, and never as a target; the targets are offered as both."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the usual places hold nothing here
    root = files["qwen35"].parent
    prefs = settings.Preferences(target=str(files["qwen35"]), drafter="none", model_folders=[str(root)])
    window = MainWindow(store_path=tmp_path / "conversations.sqlite3", prefs=prefs)
    qtbot.addWidget(window)
    side = window.side
    drafters = {side.drafter.itemData(i): side.drafter.itemText(i) for i in range(side.drafter.count())}
    targets = {side.target.itemData(i) for i in range(side.target.count())}
    kinds = ("dflash", "dspark", "eagle3", "assistant")
    said = {name: drafters[str(files[name].resolve())].rsplit(", ", 1)[0] for name in kinds}  # less its size
    assert said == {
        "dflash": "a DFlash drafter, 1 layer: dflash.gguf",
        "dspark": "a DSpark drafter, 1 layer: dspark.gguf",
        "eagle3": "an EAGLE-3 drafter, 1 layer: eagle3.gguf",
        "assistant": "a Gemma 4 assistant model, 2 layers: mtp-gemma-4.gguf",
    }
    assert drafters[str(files["draft"].resolve())].startswith("qwen35-draft.gguf")
    assert {"ngram", "mtp"} <= drafters.keys()
    assert {str(files[t].resolve()) for t in ("qwen35", "draft", "gemma4")} <= targets
    assert not {str(files[d].resolve()) for d in kinds} & targets
    qtbot.waitUntil(lambda: not window.busy, timeout=LOAD_TIMEOUT_MS)
    window.close()


@pytest.mark.parametrize("kind", list(MATRIX))
def test_teaching_and_the_lab_run_each_kind(qtbot, tmp_path, files, plain_ids, monkeypatch, kind: str):
    """Teaching mode steps to the first round that drafts and shows it, and the prompt lab runs the pair at
    depths 0 and 2: the same engine the window loaded, the same ids as depth 0."""
    from tests.app.test_lab import RUN_TIMEOUT_MS, start_lab

    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path / "cache"))
    target, drafter, _ = MATRIX[kind]
    window = window_on(qtbot, tmp_path, spec(files, target), spec(files, drafter))
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
    # every kind drafts on round 1 but prompt lookup, whose table first matches once the reply repeats a token
    assert step.round.drafted == 2 and step.round.round_index == (6 if kind == "ngram" else 1)
    assert ("Prompt lookup: the last token" in teach.explanation.text()) == (kind == "ngram")
    teach.step()
    written = [t.token_id for s in teach.steps for t in s.tokens]
    assert written == plain_ids[target][: len(written)] and len(written) > step.round.round_index
    teach.close()
    lab = start_lab(qtbot, window, PROMPT, (0, 2), TOKENS)
    assert lab.start()
    qtbot.waitUntil(lambda: not lab.running, timeout=RUN_TIMEOUT_MS)
    runs = lab.model.results.runs
    assert lab.status.text() == "Done: 2 runs."
    assert [r.depth for r in runs] == [0, 2] and runs[1].stats.drafted > 0
    assert [list(r.stats.token_ids) for r in runs] == [plain_ids[target]] * 2
    lab.close()
    window.close()
