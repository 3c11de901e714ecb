"""A box profile measured while the machine stalls some passes is repaired or refused, never saved
wrong; figures physics rules out are never saved nor loaded; a refusal says why and when it retries."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest

from engine.measure import soundness
from engine.measure.costmodel import BoxProfile, describe_age
from engine.measure.profile import (
    _measure_rows,
    load_profile,
    mark_stale,
    measured_soundly,
    profile_key,
    profile_path,
    save_profile,
)
from engine.measure.soundness import (
    MAX_OTHER_CPU,
    MAX_SPREAD,
    MachineLoad,
    ProfileRefused,
    impossible,
    problem_of,
    recent_refusal,
    spread,
)
from engine.runtime import RuntimeOptions
from tests.engine.fake_runtime import FakeContext, FakeModel, target_rule

ROW_S = 0.005  # the double's honest cost of one row


class Clock:
    """The measurement's clock: it moves only when the double decodes, so a test's timings are exact."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class StallingModel(FakeModel):
    """A target whose decodes take ROW_S a row on `clock`, and `stall` seconds more on the calls
    `stalls(n, rows)` picks (another program's burst on the same cores)."""

    def __init__(self, stalls, stall: float = 0.05) -> None:
        super().__init__("stalling", target_rule)
        self.path = None
        self.stalls, self.stall, self.calls, self.clock = stalls, stall, 0, Clock()

    def new_context(self, max_rows=1, kept_rows=0, options=None) -> FakeContext:
        ctx = super().new_context(max_rows, kept_rows, options)
        model, decode = self, ctx.decode

        def slow_decode(tokens, all_logits, side=None):
            model.calls += 1
            model.clock.now += ROW_S * len(tokens) + (model.stall if model.stalls(model.calls, len(tokens)) else 0.0)
            return decode(tokens, all_logits, side)

        ctx.decode = slow_decode
        return ctx


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache of the test's own, and the real limits on spread and load (conftest lifts them)."""
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path))
    monkeypatch.setattr(soundness, "MAX_SPREAD", MAX_SPREAD)
    monkeypatch.setattr(soundness, "MAX_OTHER_CPU", MAX_OTHER_CPU)
    return tmp_path


@pytest.fixture
def files(tmp_path):
    """A target and a drafter file to key profiles by: no model is loaded from them."""
    paths = tmp_path / "t.gguf", tmp_path / "d.gguf"
    for path in paths:
        path.write_bytes(b"GGUF")
    return paths


class Meter:
    """The machine's load as a test sets it: the tests' own box is shared, and its load is not theirs to judge."""

    other_cpu = 0.05

    def read(self) -> MachineLoad:
        return MachineLoad(self.other_cpu, "nominal")


PASSES_PER_ATTEMPT = 1 + 7 + 7 * 7  # `_rows_of`: the prompt, the warm-up of 7 sizes, 7 repeats of them


def _pass_of(n: int) -> int:
    """The n-th decode (from 1, over all attempts) as a timed pass of its attempt, from 0; -1 before them."""
    return (n - 1) % PASSES_PER_ATTEMPT - 8


def _repeat_of(n: int) -> int:
    """Which repeat of its attempt the n-th decode is in, from 0; -1 for the prompt and warm-up."""
    return _pass_of(n) // 7 if _pass_of(n) >= 0 else -1


def _rows_of(model: StallingModel, target_path, monkeypatch, meter=Meter):
    import engine.measure.timing as timing_module

    model.path = target_path
    monkeypatch.setattr(timing_module, "LoadMeter", meter)
    monkeypatch.setattr(timing_module, "time", model.clock)
    monkeypatch.setattr(timing_module, "_calibration_prompt", lambda _t: [1, 2, 3, 4, 5, 6, 7, 8])
    return lambda: _measure_rows(model, RuntimeOptions(), lambda _said: None)


def test_a_stall_now_and_then_is_outvoted_by_interleaved_repeats(cache, files, monkeypatch):
    target_path = files[0]
    """One pass in eleven stalls (another program's burst): the medians stand, the profile is saved."""
    model = StallingModel(lambda n, _rows: n % 11 == 0)
    profile = measured_soundly(_rows_of(model, target_path, monkeypatch))
    assert problem_of(profile) == ""
    assert all(r <= later * 1.2 for r, later in zip(profile.target_rows_s, profile.target_rows_s[1:]))
    assert profile.target_rows_s == pytest.approx([ROW_S * rows for rows in range(1, 8)])  # no stall priced
    assert load_profile(target_path, target_path, RuntimeOptions()) == profile


def test_every_one_row_pass_stalled_is_refused_and_nothing_saved(cache, files, monkeypatch):
    target_path = files[0]
    """The case seen here: the 1-row passes slowed by a second thread pool, so a 1-row pass cost more
    than a 2-row one. Measured three times, refused each time, nothing on disk, and the next try waits."""
    model = StallingModel(lambda _n, rows: rows == 1)
    with pytest.raises(ProfileRefused) as refused:
        measured_soundly(_rows_of(model, target_path, monkeypatch))
    said = str(refused.value)
    assert said.startswith("The box profile was not saved: a target pass of 2 rows measured")
    assert "less than one of 1 rows" in said and "run plain until it is measured again, in 10 minutes" in said
    key = profile_key(target_path, target_path, RuntimeOptions())
    assert not profile_path(key).exists()
    assert recent_refusal(profile_path(key)) == said


def test_a_busy_moment_refused_twice_is_measured_a_third_time_and_kept(cache, files, monkeypatch):
    """Two attempts each slowed on every 1-row pass (a busy spell on the cores), the third on a quiet
    box: the third is kept, and each retry says which attempt it is and why."""
    target_path = files[0]
    attempts: list[int] = []
    model = StallingModel(lambda _n, rows: rows == 1 and len(attempts) < 3)
    measure_rows = _rows_of(model, target_path, monkeypatch)
    said: list[str] = []

    def measure_once():
        attempts.append(len(attempts) + 1)
        return measure_rows()

    profile = measured_soundly(measure_once, said.append, profile_key(target_path, target_path, RuntimeOptions()))
    assert attempts == [1, 2, 3]
    slow = "a target pass of 2 rows measured 10.0 ms, less than one of 1 rows (55.0 ms) while other processes used 5% of the CPU"
    assert said == [f"measuring again (attempt 2 of 3): {slow}", f"measuring again (attempt 3 of 3): {slow}"]
    assert profile.target_rows_s == pytest.approx([ROW_S * rows for rows in range(1, 8)])
    assert load_profile(target_path, target_path, RuntimeOptions()) == profile


def test_a_stall_on_the_first_pass_after_each_step_falls_on_every_size_alike(cache, files, monkeypatch):
    """The first pass after each step (the caller's event loop ran meanwhile) stalls: each repeat starts
    at another size, so no size's median is made of those passes, and the profile is saved honest."""
    target_path = files[0]
    model = StallingModel(lambda n, _rows: _repeat_of(n) >= 0 and _pass_of(n) % 7 == 0)
    profile = measured_soundly(_rows_of(model, target_path, monkeypatch))
    assert profile.target_rows_s == pytest.approx([ROW_S * rows for rows in range(1, 8)])
    assert model.calls == PASSES_PER_ATTEMPT  # measured once: nothing to retry


def test_stalls_in_half_the_repeats_are_too_much_spread(cache, files, monkeypatch):
    target_path = files[0]
    model = StallingModel(lambda n, _rows: _repeat_of(n) % 2 == 0, stall=0.05)  # every pass of repeats 0, 2, 4, 6
    with pytest.raises(ProfileRefused, match="repeats varied by"):
        measured_soundly(_rows_of(model, target_path, monkeypatch))


def test_a_busy_machine_is_refused(cache, files, monkeypatch):
    target_path = files[0]

    class Busy(Meter):
        other_cpu = 0.93

    model = StallingModel(lambda _n, _rows: False)
    with pytest.raises(ProfileRefused, match="not saved: other processes used 93% of the CPU meanwhile"):
        measured_soundly(_rows_of(model, target_path, monkeypatch, Busy))


def _profile(rows, step, **kw) -> BoxProfile:
    return BoxProfile("k", "m", "t.gguf", "d.gguf", "rt", "exact", 2, list(rows), step, 0.001, [0.8] * 4, **kw)


def test_physics():
    assert impossible([0.03, 0.06, 0.08], 0.01, 0.0) == ""
    assert impossible([2.87, 0.28, 0.38], 0.01, 0.0) == (
        "a target pass of 2 rows measured 280.0 ms, less than one of 1 rows (2870.0 ms)"
    )
    assert impossible([0.03, 0.06, 0.08], 3.11, 0.0) == (
        "a drafter step measured 3110.0 ms, slower than the target's pass of 2 rows (60.0 ms)"
    )
    assert impossible([0.3, 0.6], 0.01, 0.0, plain_round_s=0.032) == (
        "a 1-row target pass measured 300.0 ms, slower than a whole plain round of a real reply (32.0 ms)"
    )
    # measured on this box: a tiny model's 1-row pass on its own, 1.24x a reply's plain round
    assert impossible([0.0103, 0.0153, 0.0192], 0.0084, 0.155, plain_round_s=0.00828) == ""
    assert spread([1.0, 1.0, 1.0, 1.0]) == 0.0 and spread([1.0, 2.0, 3.0]) == 0.5


def test_a_saved_profile_physics_rules_out_is_not_loaded(cache, files):
    target_path, drafter_path = files
    options = RuntimeOptions()
    good = _profile([0.03, 0.06], 0.01, plain_spread=0.06)
    good.key = profile_key(target_path, drafter_path, options)
    save_profile(good)
    assert load_profile(target_path, drafter_path, options) == good
    assert good.basis() == "plain 32.3 tok/s ±3%, measured today"
    data = json.loads(profile_path(good.key).read_text())
    data["target_rows_s"][0] *= 10  # one figure made wrong by 10x on disk
    profile_path(good.key).write_text(json.dumps(data))
    assert load_profile(target_path, drafter_path, options) is None
    save_profile(good)
    mark_stale(good)  # a reply contradicted it
    assert load_profile(target_path, drafter_path, options) is None


def test_load_and_age_in_words(cache):
    busy = replace(_profile([0.03, 0.06], 0.01), other_cpu=0.93)
    assert problem_of(busy) == "other processes used 93% of the CPU meanwhile"
    assert problem_of(replace(busy, other_cpu=0.1, thermal="serious")) == (
        "the machine was throttling (thermal serious) while other processes used 10% of the CPU"
    )
    now = time.mktime((2026, 12, 5, 12, 0, 0, 0, 0, -1))
    assert describe_age(now - 3600, now) == "measured today"
    assert describe_age(now - 86400, now) == "measured yesterday"
    assert describe_age(now - 3 * 86400, now) == "measured 3 days ago"


@pytest.mark.slow
def test_a_profile_wrong_by_10x_is_caught_within_one_real_reply(engine, cache):
    """The default pair, a saved profile whose target passes cost 10x what they do (measured while another
    llama.cpp shared the cores): the first Auto reply's own rounds contradict it, Auto runs plain, the
    profile is marked stale and the engine says so."""
    from tests.engine.measure.wrong_profile import assert_caught_within_one_reply

    assert_caught_within_one_reply(engine, "Write a Python class for an LRU cache.")


def test_tune_show_prints_the_saved_profile_and_its_basis(cache, target_path, drafter_path):
    import contextlib
    import io

    from engine.cli import main

    options = RuntimeOptions(n_ctx=4096, n_threads=0, exact=True)
    saved = _profile([0.03, 0.06, 0.09], 0.01, plain_spread=0.06, other_cpu=0.04, thermal="nominal", spread=0.1)
    saved.key = profile_key(target_path, drafter_path, options)
    save_profile(saved)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["tune", "--show", "--target", str(target_path), "--drafter", str(drafter_path)]) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].endswith("(saved " + time.strftime("%Y-%m-%d %H:%M", time.localtime(saved.measured_at))
                             + "; --check measures again and compares, --force replaces it)")  # fmt: skip
    assert lines[3] == (
        "basis: plain 32.3 tok/s ±3%, measured today; figures' widest spread ±5%; "
        "other processes' CPU 4%, thermal nominal"
    )
    profile_path(saved.key).unlink()
    assert main(["tune", "--show", "--target", str(target_path), "--drafter", str(drafter_path)]) == 2  # a sentence
