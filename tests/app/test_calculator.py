"""The speedup calculator: the tuner's formulas on numbers a person types, presets and prefills."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt

from app.calculator import NO_PROFILE, SpeedupCalculator
from app.charts import ChartModel
from engine import PRESET_COSTS, TYPICAL_ACCEPTANCE, TYPICAL_COSTS, BoxProfile, Costs, RoundEvent, best_depth

A = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
ROWS = (1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.2)
# By hand: E_k = 1 + 0.9 + 0.9*0.8 + ...; C_k = 0.2 k + rows[k]; speedup = E_k / C_k (C_0 = 1).
E = [1.0, 1.9, 2.62, 3.124, 3.4264, 3.5776, 3.63808]
C = [1.0, 1.4, 1.8, 2.2, 2.6, 3.0, 3.4]
SPEEDUP = [e / c for e, c in zip(E, C)]
DEPTHS = len(ROWS)


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
    return [[calc.table.item(r, c).text() for c in range(calc.table.columnCount())] for r in range(DEPTHS)]


def test_window_shows_the_formula_and_highlights_the_argmax(calculator):
    enter(calculator, A, Costs(ROWS, 0.2, 0.0))
    assert [p.speedup for p in calculator.predictions] == pytest.approx(SPEEDUP, abs=1e-9)
    table = shown(calculator)
    assert [row[1] for row in table] == [f"{e:.3f}" for e in E]
    assert [row[2] for row in table] == [f"{c:.3f}" for c in C]
    assert [row[4] for row in table] == [f"{s:.3f}×" for s in SPEEDUP]
    argmax = max(range(DEPTHS), key=SPEEDUP.__getitem__)
    assert calculator.best == argmax == 2
    assert calculator.highlighted_depth() == 2
    assert list(calculator.bars.opts["height"]) == pytest.approx(SPEEDUP, abs=1e-9)


def test_changing_an_input_updates_every_output(calculator):
    enter(calculator, A, Costs(ROWS, 0.2, 0.0))
    calculator.drafter_step.setValue(1.0)  # a drafter as dear as the target: never worth it
    expected = [1.0] + [E[k] / (k * 1.0 + ROWS[k]) for k in range(1, DEPTHS)]
    assert [p.speedup for p in calculator.predictions] == pytest.approx(expected, abs=1e-9)
    assert calculator.best == 0 and calculator.highlighted_depth() == 0
    assert shown(calculator)[1][4] == f"{expected[1]:.3f}×"
    assert list(calculator.bars.opts["height"]) == pytest.approx(expected, abs=1e-9)
    calculator.drafter_step.setValue(0.05)
    for box in calculator.acceptance:
        box.setValue(0.99)
    assert calculator.best == 6 and calculator.highlighted_depth() == 6


def test_presets_set_the_documented_numbers(qtbot, calculator):
    qtbot.mouseClick(calculator.preset_buttons["A GPU like an H200"], Qt.MouseButton.LeftButton)
    acceptance, costs = calculator.values()
    assert costs.rows == (1.0, 1.26, 1.3, 1.35, 1.4, 1.45, 1.5)
    assert costs.drafter_step == 0.64 and costs.overhead == 0.0
    assert acceptance == list(TYPICAL_ACCEPTANCE)  # presets are costs only
    qtbot.mouseClick(calculator.preset_buttons["A big target with a small drafter"], Qt.MouseButton.LeftButton)
    _, costs = calculator.values()
    assert costs == PRESET_COSTS["A big target with a small drafter"]
    assert costs.drafter_step == 0.1 and all(r <= 1.12 for r in costs.rows)
    qtbot.mouseClick(calculator.this_machine, Qt.MouseButton.LeftButton)
    assert calculator.values()[1] == TYPICAL_COSTS
    assert calculator.note.text() == NO_PROFILE


def _profile() -> BoxProfile:
    return BoxProfile(
        key="k",
        machine="this box",
        target="target.gguf",
        drafter="drafter.gguf",
        runtime="test",
        mode="exact",
        threads=2,
        target_rows_s=[0.02, 0.025, 0.03, 0.034, 0.04, 0.044, 0.05],
        drafter_step_s=0.005,
        overhead_s=0.0004,
        acceptance_prior=[0.9, 0.85, 0.8, 0.75, 0.7, 0.65],
    )


def test_prefill_from_a_box_profile(qtbot):
    profile = _profile()
    calc = SpeedupCalculator(lambda: profile)
    qtbot.addWidget(calc)
    acceptance, costs = calc.values()
    assert costs.rows == pytest.approx((1.0, 1.25, 1.5, 1.7, 2.0, 2.2, 2.5), abs=1e-9)
    assert costs.drafter_step == pytest.approx(0.25, abs=1e-9)
    assert costs.overhead == pytest.approx(0.02, abs=1e-9)
    assert acceptance == pytest.approx(profile.acceptance_prior, abs=1e-9)
    assert "This machine" in calc.note.text() and "target.gguf" in calc.note.text()
    # the calculator's prediction is the cost model's on the profile itself
    best, rates = best_depth(profile, profile.acceptance_prior)
    assert calc.best == best
    assert [p.speedup for p in calc.predictions] == pytest.approx([r / rates[0] for r in rates], abs=1e-9)
    # a preset, then "This machine" again, brings the profile back
    qtbot.mouseClick(calc.preset_buttons["A GPU like an H200"], Qt.MouseButton.LeftButton)
    qtbot.mouseClick(calc.this_machine, Qt.MouseButton.LeftButton)
    assert calc.values()[1].rows == pytest.approx((1.0, 1.25, 1.5, 1.7, 2.0, 2.2, 2.5), abs=1e-9)


def test_no_profile_says_how_to_make_one(qtbot):
    calc = SpeedupCalculator(lambda: None)
    qtbot.addWidget(calc)
    assert calc.note.text() == NO_PROFILE and "draftlight tune" in NO_PROFILE and "Auto" in NO_PROFILE
    assert calc.values() == (list(TYPICAL_ACCEPTANCE), TYPICAL_COSTS)


def _round(drafted: int, accepted: int) -> RoundEvent:
    return RoundEvent(round_index=1, drafted=drafted, accepted=accepted, verify_ms=1.0)


def test_prefill_from_a_chart_model(qtbot):
    model = ChartModel()
    # 20 rounds drafted 3: 16 kept the first draft, 12 of those the second, 9 of those the third
    model.add([_round(3, 3)] * 9 + [_round(3, 2)] * 3 + [_round(3, 1)] * 4 + [_round(3, 0)] * 4)
    calc = SpeedupCalculator(chart_model=model)
    qtbot.addWidget(calc)
    acceptance, _ = calc.values()
    # 16/20, 12/16, 9/12; positions never drafted keep their typical values
    assert acceptance == pytest.approx([0.8, 0.75, 0.75, *TYPICAL_ACCEPTANCE[3:]], abs=1e-9)
    model.begin_message()
    model.add([_round(3, 0)] * 20)  # the session now: 16 of 40 kept the first draft
    qtbot.mouseClick(calc.from_conversation, Qt.MouseButton.LeftButton)
    assert calc.values()[0] == pytest.approx([0.4, 0.75, 0.75, *TYPICAL_ACCEPTANCE[3:]], abs=1e-9)
