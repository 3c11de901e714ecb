"""The speedup calculator: the tuner's formulas on numbers a person types, presets and prefills."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt

from app.calculator import (
    NO_PROFILE,
    PRESETS,
    TYPICAL,
    TYPICAL_ACCEPTANCE,
    Costs,
    PairPaths,
    SpeedupCalculator,
    conditional_from_counts,
    predict,
)
from app.charts import ChartModel
from engine.runtime import RuntimeOptions
from engine.tuner import BoxProfile, best_depth, expected_tokens, profile_key, save_profile

A = [0.9, 0.8, 0.7, 0.6]
ROWS = (1.0, 1.2, 1.4, 1.6, 1.8)
# By hand: E_k = 1 + 0.9 + 0.9*0.8 + ...; C_k = 0.2 k + rows[k]; speedup = E_k / C_k (C_0 = 1).
E = [1.0, 1.9, 2.62, 3.124, 3.4264]
C = [1.0, 1.4, 1.8, 2.2, 2.6]
SPEEDUP = [1.0, 1.9 / 1.4, 2.62 / 1.8, 3.124 / 2.2, 3.4264 / 2.6]


@pytest.fixture
def calculator(qtbot, tmp_path, monkeypatch):
    """A calculator with no pair (typical values) and an empty private cache."""
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path / "cache"))
    calc = SpeedupCalculator()
    qtbot.addWidget(calc)
    return calc


def enter(calc: SpeedupCalculator, acceptance: list[float], costs: Costs) -> None:
    for box, value in zip(calc.acceptance, acceptance):
        box.setValue(value)
    for box, value in zip(calc.rows, costs.rows):
        if box.isEnabled():
            box.setValue(value)
    calc.drafter_step.setValue(costs.drafter_step)
    calc.overhead.setValue(costs.overhead)


def shown(calc: SpeedupCalculator) -> list[list[str]]:
    return [[calc.table.item(r, c).text() for c in range(calc.table.columnCount())] for r in range(5)]


def test_predict_is_the_formula_by_hand():
    best, rows = predict(A, Costs(ROWS, 0.2, 0.0))
    assert [r.depth for r in rows] == [0, 1, 2, 3, 4]
    assert [r.expected_tokens for r in rows] == pytest.approx(E, abs=1e-9)
    assert [r.cost for r in rows] == pytest.approx(C, abs=1e-9)
    assert [r.tokens_per_pass for r in rows] == pytest.approx([e / c for e, c in zip(E, C)], abs=1e-9)
    assert [r.speedup for r in rows] == pytest.approx(SPEEDUP, abs=1e-9)
    assert best == 2


def test_overhead_counts_in_every_round_and_in_the_plain_pass():
    _, rows = predict(A, Costs(ROWS, 0.2, 0.1))
    assert [r.cost for r in rows] == pytest.approx([c + 0.1 for c in C], abs=1e-9)
    assert [r.speedup for r in rows] == pytest.approx([e / (c + 0.1) * 1.1 for e, c in zip(E, C)], abs=1e-9)


def test_predict_agrees_with_the_tuner_in_seconds():
    """The same box in seconds (a 25 ms pass) gives the same best depth and speedups."""
    pass_s = 0.025
    profile = BoxProfile("k", "m", "t", "d", "r", "exact", 2, [r * pass_s for r in ROWS], 0.2 * pass_s, 0.0, [])
    best, rates = best_depth(profile, A)
    ours, rows = predict(A, Costs(ROWS, 0.2, 0.0))
    assert ours == best
    assert [r.speedup for r in rows] == pytest.approx([x / rates[0] for x in rates], abs=1e-12)
    assert [r.expected_tokens for r in rows] == [expected_tokens(A, k) for k in range(5)]


def test_window_shows_the_formula_and_highlights_the_argmax(calculator):
    enter(calculator, A, Costs(ROWS, 0.2, 0.0))
    assert [p.speedup for p in calculator.predictions] == pytest.approx(SPEEDUP, abs=1e-9)
    table = shown(calculator)
    assert [row[1] for row in table] == [f"{e:.3f}" for e in E]
    assert [row[2] for row in table] == [f"{c:.3f}" for c in C]
    assert [row[4] for row in table] == [f"{s:.3f}×" for s in SPEEDUP]
    argmax = max(range(5), key=SPEEDUP.__getitem__)
    assert calculator.best == argmax == 2
    assert calculator.highlighted_depth() == 2
    assert list(calculator.bars.opts["height"]) == pytest.approx(SPEEDUP, abs=1e-9)


def test_changing_an_input_updates_every_output(calculator):
    enter(calculator, A, Costs(ROWS, 0.2, 0.0))
    calculator.drafter_step.setValue(1.0)  # a drafter as dear as the target: never worth it
    expected = [1.0] + [E[k] / (k * 1.0 + ROWS[k]) for k in range(1, 5)]
    assert [p.speedup for p in calculator.predictions] == pytest.approx(expected, abs=1e-9)
    assert calculator.best == 0 and calculator.highlighted_depth() == 0
    assert shown(calculator)[1][4] == f"{expected[1]:.3f}×"
    assert list(calculator.bars.opts["height"]) == pytest.approx(expected, abs=1e-9)
    calculator.drafter_step.setValue(0.2)
    calculator.acceptance[0].setValue(0.99)
    calculator.acceptance[1].setValue(0.99)
    calculator.acceptance[2].setValue(0.99)
    calculator.acceptance[3].setValue(0.99)
    assert calculator.best == 4 and calculator.highlighted_depth() == 4


def test_presets_set_the_documented_numbers(qtbot, calculator):
    qtbot.mouseClick(calculator.preset_buttons["A GPU like an H200"], Qt.MouseButton.LeftButton)
    acceptance, costs = calculator.values()
    assert costs.rows == (1.0, 1.26, 1.3, 1.35, 1.4)
    assert costs.drafter_step == 0.64 and costs.overhead == 0.0
    assert acceptance == list(TYPICAL_ACCEPTANCE)  # presets are costs only
    qtbot.mouseClick(calculator.preset_buttons["A big target with a small drafter"], Qt.MouseButton.LeftButton)
    _, costs = calculator.values()
    assert costs == PRESETS["A big target with a small drafter"]
    assert costs.drafter_step == 0.1 and all(r <= 1.1 for r in costs.rows)
    qtbot.mouseClick(calculator.this_machine, Qt.MouseButton.LeftButton)
    assert calculator.values()[1] == TYPICAL
    assert calculator.note.text() == NO_PROFILE


def test_prefill_from_a_saved_box_profile(qtbot, tmp_path, monkeypatch, target_path, drafter_path):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path / "cache"))
    options = RuntimeOptions()
    profile = BoxProfile(
        key=profile_key(target_path, drafter_path, options),
        machine="this box",
        target=target_path.name,
        drafter=drafter_path.name,
        runtime="test",
        mode=options.mode,
        threads=options.threads,
        target_rows_s=[0.02, 0.025, 0.03, 0.034, 0.04],
        drafter_step_s=0.005,
        overhead_s=0.0004,
        acceptance_prior=[0.9, 0.85, 0.8, 0.75],
    )
    save_profile(profile)
    calc = SpeedupCalculator(PairPaths(target_path, drafter_path, options))
    qtbot.addWidget(calc)
    acceptance, costs = calc.values()
    assert costs.rows == pytest.approx((1.0, 1.25, 1.5, 1.7, 2.0), abs=1e-9)
    assert costs.drafter_step == pytest.approx(0.25, abs=1e-9)
    assert costs.overhead == pytest.approx(0.02, abs=1e-9)
    assert acceptance == pytest.approx([0.9, 0.85, 0.8, 0.75], abs=1e-9)
    assert "This machine" in calc.note.text() and target_path.name in calc.note.text()
    # the calculator's prediction is the tuner's on the profile itself
    best, rates = best_depth(profile, profile.acceptance_prior)
    assert calc.best == best
    assert [p.speedup for p in calc.predictions] == pytest.approx([r / rates[0] for r in rates], abs=1e-9)
    # a preset, then "This machine" again, brings the profile back
    qtbot.mouseClick(calc.preset_buttons["A GPU like an H200"], Qt.MouseButton.LeftButton)
    qtbot.mouseClick(calc.this_machine, Qt.MouseButton.LeftButton)
    assert calc.values()[1].rows == pytest.approx((1.0, 1.25, 1.5, 1.7, 2.0), abs=1e-9)


def test_no_profile_says_how_to_make_one(qtbot, tmp_path, monkeypatch, target_path, drafter_path):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path / "empty"))
    calc = SpeedupCalculator(PairPaths(target_path, drafter_path, RuntimeOptions()))
    qtbot.addWidget(calc)
    assert calc.note.text() == NO_PROFILE and "draftlight tune" in NO_PROFILE and "Auto" in NO_PROFILE
    assert calc.values() == (list(TYPICAL_ACCEPTANCE), TYPICAL)


def test_conditional_acceptance_from_unconditional_counts():
    # 10 rounds drafted 3: 8 kept the first draft, 6 of those the second, 3 of those the third
    drafted, accepted = [10, 10, 10, 0, 0], [8, 6, 3, 0, 0]
    assert conditional_from_counts(drafted, accepted) == [0.8, 0.75, 0.5, None, None]
    assert conditional_from_counts([0] * 4, [0] * 4) == [None] * 4
    assert conditional_from_counts([5, 5], [0, 0]) == [0.0, None]  # position 2 never reached


def test_prefill_from_a_chart_model(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path / "cache"))
    model = ChartModel()
    model.session_drafted[:4] = [20, 20, 20, 0]
    model.session_accepted[:4] = [16, 12, 9, 0]
    calc = SpeedupCalculator(chart_model=model)
    qtbot.addWidget(calc)
    acceptance, _ = calc.values()
    # 16/20, 12/16, 9/12; position 4 never drafted keeps its typical value
    assert acceptance == pytest.approx([0.8, 0.75, 0.75, TYPICAL_ACCEPTANCE[3]], abs=1e-9)
    model.session_accepted[:3] = [10, 5, 1]
    qtbot.mouseClick(calc.from_conversation, Qt.MouseButton.LeftButton)
    assert calc.values()[0] == pytest.approx([0.5, 0.5, 0.2, TYPICAL_ACCEPTANCE[3]], abs=1e-9)
