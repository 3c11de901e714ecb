"""The prompt lab: parsing prompts, real runs through the window's engine, cancel, exports."""

from __future__ import annotations

import csv
import json

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt

from app.jobs import ProgressReport
from app.lab import (
    NO_PROFILE,
    SORT_ROLE,
    LabResults,
    LabRun,
    as_jsonl,
    best_for_prompt,
    load_prompts,
    parse_prompts,
)
from engine.errors import DraftlightError
from engine.events import FinishReason, RunStats
from engine.measure.costmodel import BoxProfile, best_depth, conditional_acceptance
from engine.measure.profile import profile_key, save_profile
from engine.ruler.prompts import BenchPrompt
from engine.runtime import RuntimeOptions
from tests.engine.box_profiles import SHAPE_ONLY

RUN_TIMEOUT_MS = 600_000
PROMPTS = "Write a haiku about rain.\nList three prime numbers."

SPEC_BENCH = (
    '{"question_id": 81, "category": "writing", "turns": ["Compose a travel blog post about Hawaii.", "Rewrite it."]}\n'
    '{"question_id": 82, "category": "math", "turns": ["What is 3 + 4?"]}\n'
)

# ---- prompts ----------------------------------------------------------------------------


def test_pasted_plain_lines_are_one_prompt_each():
    prompts = parse_prompts("  First prompt.\n\nSecond {prompt} here.\n   \nThird.\n")
    assert [p.text for p in prompts] == ["First prompt.", "Second {prompt} here.", "Third."]
    assert [p.category for p in prompts] == ["prompt"] * 3
    assert [p.name for p in prompts] == ["prompt", "prompt-2", "prompt-3"]


def test_pasted_jsonl_of_category_and_prompt():
    text = '{"category": "code", "prompt": "Sort a list."}\n{"category": "code", "prompt": "Line one\\nline two"}\n'
    text += '{"prompt": "No category."}\n'
    prompts = parse_prompts(text)
    assert prompts == [
        BenchPrompt("code", "code", "Sort a list."),
        BenchPrompt("code-2", "code", "Line one\nline two"),
        BenchPrompt("prompt", "prompt", "No category."),
    ]


def test_pasted_spec_bench_takes_the_first_turn():
    prompts = parse_prompts(SPEC_BENCH)
    assert prompts == [
        BenchPrompt("writing-81", "writing", "Compose a travel blog post about Hawaii."),
        BenchPrompt("math-82", "math", "What is 3 + 4?"),
    ]


def test_pasted_text_that_cannot_be_read_says_which_line():
    with pytest.raises(DraftlightError, match="no prompts"):
        parse_prompts("  \n\n")
    with pytest.raises(DraftlightError, match="Line 2 is not a JSON object"):
        parse_prompts('{"prompt": "a"}\nplain text after JSON\n')
    with pytest.raises(DraftlightError, match='Line 1 has neither "prompt" nor "turns"'):
        parse_prompts('{"question": "a"}\n')
    with pytest.raises(DraftlightError, match="Line 3 has an empty prompt"):
        parse_prompts('{"prompt": "a"}\n\n{"prompt": "  "}\n')


def test_files_of_each_kind_load(tmp_path):
    plain = tmp_path / "prompts.txt"
    plain.write_text("One.\nTwo.\n")
    assert [p.text for p in load_prompts(plain)] == ["One.", "Two."]
    spec = tmp_path / "question.jsonl"
    spec.write_text(SPEC_BENCH)
    assert load_prompts(spec) == parse_prompts(SPEC_BENCH)  # the ruler's reader and ours agree
    jsonl = tmp_path / "mine.jsonl"
    jsonl.write_text(as_jsonl(load_prompts(spec)))
    assert [(p.category, p.text) for p in load_prompts(jsonl)] == [(p.category, p.text) for p in load_prompts(spec)]
    with pytest.raises(DraftlightError, match="Cannot read"):
        load_prompts(tmp_path / "missing.txt")


# ---- the best depth and the exports, on made-up runs ------------------------------------


def stats(depth: int, tokens: int, rounds: int, decode_s: float, drafted=(), accepted=()) -> RunStats:
    return RunStats(
        prompt_tokens=10,
        prefill_s=0.1,
        generated_tokens=tokens,
        decode_s=decode_s,
        rounds=rounds,
        depth=depth,
        drafted=sum(drafted),
        accepted=sum(accepted),
        acceptance_per_position=tuple(a / d for a, d in zip(accepted, drafted)),
        drafted_per_position=tuple(drafted),
        accepted_per_position=tuple(accepted),
        draft_s=0.0,
        verify_s=0.0,
        commit_s=0.0,
        rewind_s=0.0,
        overhead_s=0.0,
        finish_reason=FinishReason.MAX_TOKENS,
    )


def made_up_runs() -> list[LabRun]:
    prompt = BenchPrompt("p", "code", "Pipes | in | text")
    plain = LabRun(0, prompt, 0, stats(0, 8, 8, 1.0), ((0, 0),) * 8)
    # 4 rounds at depth 2: (2,2) (2,1) (2,0) (2,2) -> 9 tokens
    rounds = ((2, 2), (2, 1), (2, 0), (2, 2))
    deep = LabRun(0, prompt, 2, stats(2, 9, 4, 0.5, (4, 4), (3, 2)), rounds)
    return [plain, deep]


def test_best_depth_is_measured_without_a_profile_and_predicted_with_one():
    runs = made_up_runs()
    assert best_for_prompt(runs, None) == (2, "measured")  # 18 tok/s beats 8
    profile = BoxProfile("k", "m", "t", "d", "r", "exact", 2, [1.0, 3.0, 3.0], 1.0, 0.0, [])
    acceptance = conditional_acceptance([r for run in runs for r in run.rounds], 2)
    assert acceptance == [0.75, 2 / 3]
    assert best_for_prompt(runs, profile) == (best_depth(profile, acceptance)[0], "profile") == (0, "profile")
    assert best_for_prompt([], None) is None


def test_exports_on_made_up_runs(tmp_path):
    results = LabResults(max_depth=2, runs=made_up_runs())
    path = tmp_path / "lab.csv"
    results.write_csv(path, order=[1, 0])
    rows = list(csv.DictReader(path.open()))
    assert [int(r["Depth"]) for r in rows] == [2, 0]
    assert float(rows[0]["Decode tok/s"]) == 18.0 and float(rows[0]["Speedup vs depth 0"]) == 2.25
    assert float(rows[0]["Accept @1"]) == 0.75 and rows[1]["Accept @1"] == ""
    md = results.markdown()
    assert md.splitlines()[2].startswith("| 1 | code | Pipes \\| in \\| text | 0 | 8 | — | — |")
    assert "| 75.0% | 50.0% | 2.25 | 18.0 | — | 2.25× | 2 | measured |" in md.splitlines()[3]


# ---- real runs through the window --------------------------------------------------------


def column(lab, header: str) -> int:
    model = lab.model
    return next(c for c in range(model.columnCount()) if model.headerData(c, Qt.Orientation.Horizontal) == header)


def cell(lab, row: int, header: str, role=Qt.ItemDataRole.DisplayRole):
    return lab.model.data(lab.model.index(row, column(lab, header)), role)


def menu_action(window, text: str):
    return next(a for m in window.menuBar().actions() for a in m.menu().actions() if a.text() == text)


def start_lab(qtbot, window, prompts: str, depths: tuple[int, ...], tokens: int):
    menu_action(window, "Prompt lab…").trigger()
    lab = window.prompt_lab
    lab.prompts.setPlainText(prompts)
    for d, box in lab.depth_boxes.items():
        box.setChecked(d in depths)
    lab.max_tokens.setValue(tokens)
    return lab


def test_a_lab_run_shows_the_engines_run_stats(qtbot, make_window, tmp_path, monkeypatch, target_path, drafter_path):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path / "cache"))
    options = RuntimeOptions()
    profile = BoxProfile(
        profile_key(target_path, drafter_path, options), "this box", target_path.name, drafter_path.name, "test",
        options.mode, options.threads, [0.030, 0.034, 0.038, 0.042, 0.046, 0.05, 0.054], 0.010, 0.001,
        [0.8, 0.7, 0.6, 0.5, 0.4, 0.3], spread=SHAPE_ONLY,  # a shape: no reply on a busy box contradicts it
    )  # fmt: skip
    save_profile(profile)
    window = make_window(max_tokens=4)
    lab = start_lab(qtbot, window, PROMPTS, (0, 2), 16)
    assert lab.isVisible()

    assert lab.start()
    assert window.busy and not window.send_button.isEnabled()
    window.input.setPlainText("Hello?")
    window.send()  # refused while the lab holds the engine
    assert window.input.toPlainText() == "Hello?"
    assert window.store.messages(window.conversation_id) == []
    assert not lab.start()  # one run at a time
    qtbot.waitUntil(lambda: not lab.running, timeout=RUN_TIMEOUT_MS)
    assert not window.busy and window.send_button.isEnabled()
    assert lab.status.text() == "Done: 4 runs."
    assert lab.progress.value() == lab.progress.maximum() == 4
    assert lab.basis.text() == "Best depth: predicted from this machine's box profile."

    runs = lab.model.results.runs
    assert [(r.prompt_index, r.depth) for r in runs] == [(0, 0), (0, 2), (1, 0), (1, 2)]
    for row, run in enumerate(runs):
        s = run.stats
        assert s.generated_tokens == 16 and s.depth == run.depth and s.finish_reason is FinishReason.MAX_TOKENS
        assert sum(d for d, _ in run.rounds) == s.drafted and sum(a for _, a in run.rounds) == s.accepted
        assert len(run.rounds) == s.rounds
        assert cell(lab, row, "Tokens", SORT_ROLE) == 16
        assert cell(lab, row, "Mean accepted length", SORT_ROLE) == s.mean_accepted_length
        assert cell(lab, row, "Mean accepted length") == f"{s.mean_accepted_length:.2f}"
        assert cell(lab, row, "Decode tok/s", SORT_ROLE) == s.decode_tps
        assert cell(lab, row, "Decode tok/s") == f"{s.decode_tps:.1f}"
        for i in range(2):
            if run.depth == 0:
                assert cell(lab, row, f"Accept @{i + 1}") == "—"
            else:
                assert cell(lab, row, f"Accept @{i + 1}", SORT_ROLE) == s.acceptance_per_position[i]
                assert cell(lab, row, f"Accept @{i + 1}") == f"{s.acceptance_per_position[i]:.1%}"
        plain = runs[row - row % 2].stats
        assert cell(lab, row, "Speedup vs depth 0", SORT_ROLE) == s.decode_tps / plain.decode_tps
    for p in range(2):
        plain, deep = runs[2 * p], runs[2 * p + 1]
        assert deep.stats.token_ids == plain.stats.token_ids  # greedy: speculation changes nothing
        assert deep.stats.drafted > 0 and plain.stats.drafted == 0
        acceptance = conditional_acceptance(list(plain.rounds + deep.rounds), 2)
        predicted, _ = best_depth(profile, acceptance)
        for row in (2 * p, 2 * p + 1):
            assert cell(lab, row, "Best depth", SORT_ROLE) == predicted
            assert cell(lab, row, "Best from") == "profile"

    assert lab.view_order() == [0, 1, 2, 3]  # run order until a header is clicked
    # sorted by tok/s, numerically; the exports follow the table's order
    lab.table.sortByColumn(column(lab, "Decode tok/s"), Qt.SortOrder.DescendingOrder)
    order = lab.view_order()
    assert [runs[i].stats.decode_tps for i in order] == sorted((r.stats.decode_tps for r in runs), reverse=True)
    lab.export_csv(tmp_path / "lab.csv")
    rows = list(csv.DictReader((tmp_path / "lab.csv").open(encoding="utf-8")))
    assert [float(r["Decode tok/s"]) for r in rows] == [runs[i].stats.decode_tps for i in order]
    for r, i in zip(rows, order):
        s = runs[i].stats
        assert int(r["Depth"]) == runs[i].depth and r["Prompt"] == PROMPTS.splitlines()[runs[i].prompt_index]
        assert float(r["Mean accepted length"]) == s.mean_accepted_length
        if s.depth:
            assert [float(r["Accept @1"]), float(r["Accept @2"])] == list(s.acceptance_per_position)
        else:
            assert r["Accept @1"] == r["Accept @2"] == ""
    lab.export_markdown(tmp_path / "lab.md")
    lines = (tmp_path / "lab.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 + len(runs) and lines[0].startswith("| # | Category | Prompt | Depth |")
    for line, i in zip(lines[2:], order):
        shown = [
            cell(lab, i, lab.model.headerData(c, Qt.Orientation.Horizontal)) for c in range(lab.model.columnCount())
        ]
        assert line == "| " + " | ".join(shown) + " |"

    # the calculator opens on the same profile
    menu_action(window, "Speedup calculator…").trigger()
    assert window.calculator.values()[1].rows == pytest.approx(
        (1.0, 0.034 / 0.03, 0.038 / 0.03, 1.4, 0.046 / 0.03, 0.05 / 0.03, 0.054 / 0.03), abs=5e-4
    )
    assert "This machine" in window.calculator.note.text()

    # the lab refuses to start while a chat reply streams
    window.input.setPlainText("Say hi.")
    with qtbot.waitSignal(window.reply_finished, timeout=RUN_TIMEOUT_MS):
        window.send()
        assert window.streaming
        assert not lab.start()
        assert "streaming" in lab.status.text()
    assert len(lab.model.results.runs) == 4  # the table is untouched


def test_cancel_stops_the_run_and_keeps_completed_rows(qtbot, make_window, tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path / "empty"))  # no box profile
    window = make_window()
    lab = start_lab(qtbot, window, PROMPTS, (0, 2), 16)
    # Cancel as the third run is announced, from the engine thread: the job stops there.
    lab.job.yielded.connect(
        lambda value: lab.job.cancel() if isinstance(value, ProgressReport) and value.done == 2 else None,
        Qt.ConnectionType.DirectConnection,
    )
    assert lab.start()
    qtbot.waitUntil(lambda: not lab.running, timeout=RUN_TIMEOUT_MS)
    runs = lab.model.results.runs
    assert [(r.prompt_index, r.depth) for r in runs] == [(0, 0), (0, 2)]
    assert all(r.stats.finish_reason is FinishReason.MAX_TOKENS for r in runs)
    assert lab.model.rowCount() == lab.proxy.rowCount() == 2
    assert lab.status.text() == "Cancelled after 2 runs: the completed rows are kept."
    assert lab.basis.text() == NO_PROFILE
    fastest = max(runs, key=lambda r: r.stats.decode_tps).depth
    assert [cell(lab, row, "Best depth", SORT_ROLE) for row in range(2)] == [fastest, fastest]
    assert cell(lab, 0, "Best from") == "measured"
    assert not window.busy and window.send_button.isEnabled()
    # a new run starts afresh
    lab.prompts.setPlainText(json.dumps({"category": "math", "prompt": "What is 2 + 2?"}))
    for d, box in lab.depth_boxes.items():
        box.setChecked(d == 0)
    lab.max_tokens.setValue(4)
    assert lab.start()
    qtbot.waitUntil(lambda: not lab.running, timeout=RUN_TIMEOUT_MS)
    assert [(r.prompt.category, r.depth, r.stats.generated_tokens) for r in lab.model.results.runs] == [("math", 0, 4)]
