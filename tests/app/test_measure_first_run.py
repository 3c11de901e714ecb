"""The first run measures this machine in the background: replies stream plain meanwhile, the
measurement waits while one runs, and Auto takes over once the profile is saved."""

from __future__ import annotations

import json
from itertools import pairwise

from PySide6.QtCore import Qt

from engine import AUTO, MeasurePlan, TokenKind
from engine.measure.costmodel import BoxProfile, speculation_pays
from engine.measure.soundness import ATTEMPTS

REPLY_TIMEOUT_MS = 300_000
MEASURE_TIMEOUT_MS = 600_000
# Small enough to run in seconds on the smallest model, long enough for a reply to fall between steps.
PLAN = MeasurePlan(max_depth=2, repeats=2, calibration_tokens=12)


class Timeline:
    """What the engine thread did, in its order: measurement steps, and a reply's start and end."""

    def __init__(self, worker) -> None:
        self.seen: list[tuple[str, int, int]] = []
        self.labels: list[str] = []
        direct = Qt.ConnectionType.DirectConnection  # recorded on the engine thread, as it happens
        worker.box.progressed.connect(
            lambda p: (self.seen.append(("step", p.done, p.total)), self.labels.append(p.label)), direct
        )
        worker.busy_changed.connect(lambda busy: self.seen.append(("reply" if busy else "end", 0, 0)), direct)
        # (busy also marks a load: the first pair's comes before any step)

    def steps(self) -> list[tuple[str, int, int]]:
        return [s for s in list(self.seen) if s[0] == "step"]


def first_run_window(make_window, smollm_path, monkeypatch, tmp_path):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path / "cache"))  # no box profile saved yet
    model = str(smollm_path)  # its own drafter: the smallest pair there is
    window = make_window(target=model, drafter=model, depth=AUTO, max_tokens=12, wait=False)
    window.worker.box.plan = PLAN  # read on the engine thread when the loaded pair asks for it
    window.measure_control.on_load = True  # as a window on the user's own preferences does
    return window


def send_now(qtbot, window, text: str):
    window.input.setPlainText(text)
    with qtbot.waitSignal(window.reply_finished, timeout=REPLY_TIMEOUT_MS) as blocker:
        qtbot.keyClick(window.input, Qt.Key.Key_Return)
        assert window.streaming
        paused = window.measure_control.panel.status.text()
    return blocker.args[0], paused


def test_first_run_streams_plain_while_measuring_then_auto_takes_over(
    qtbot, make_window, smollm_path, monkeypatch, tmp_path
):
    window = first_run_window(make_window, smollm_path, monkeypatch, tmp_path)
    timeline = Timeline(window.worker)
    panel = window.measure_control.panel
    qtbot.waitUntil(lambda: panel.latest is not None, timeout=REPLY_TIMEOUT_MS)
    assert window.pair.unmeasured and panel.isVisible() and window.send_button.isEnabled()
    assert "Welcome to Draftlight" in panel.intro.text() and "passes over 1 to 3 tokens" in panel.intro.text()
    assert timeline.steps()[0][2] == 2 + 2 + 3 * 12  # the rows' warm-up and repeats, the drafter, 3 replies' tokens

    stats, paused = send_now(qtbot, window, "Say hello.")
    assert paused.endswith("paused while the reply streams")
    assert stats.depth == 0 and stats.drafted == 0 and stats.generated_tokens == 12
    assert {t.kind for t in window.reply_tokens} == {TokenKind.PLAIN}
    assert window.measure_control.measuring  # the reply came between two steps, not after them

    qtbot.waitUntil(lambda: not window.measure_control.measuring, timeout=MEASURE_TIMEOUT_MS)
    steps = timeline.steps()
    # A profile failing a physical check is measured again, up to three attempts in all.
    restarts = [i for i in range(1, len(steps)) if steps[i][1] < steps[i - 1][1]]
    restart = restarts[0] if restarts else len(steps)
    bounds = [0, *restarts, len(steps)]
    assert len(bounds) - 1 <= ATTEMPTS
    for attempt in (steps[a:b] for a, b in pairwise(bounds)):
        done = [d for _, d, _ in attempt]
        assert done == sorted(done) and done[-1] == attempt[-1][2]  # every step, in order, to the end
    assert all(label.startswith("measuring again (") for label in timeline.labels[restart:])
    kinds = [kind for kind, _, _ in timeline.seen]
    began = kinds.index("reply", kinds.index("step"))  # busy: the reply (the load came before any step)
    ended = kinds.index("end", began)
    assert "step" in kinds[:began] and "step" in kinds[ended:]  # before the reply, and on after it
    assert "step" not in kinds[began:ended]  # the measurement waited while the reply ran
    assert not panel.isVisible()
    saved_files = list((tmp_path / "cache" / "profiles").glob("*.json"))
    assert len(saved_files) == 1, window.notice.text()  # else the notice says why it was not kept
    saved = saved_files[0]
    profile = BoxProfile(**json.loads(saved.read_text()))
    assert profile.max_depth == 2 and (profile.target, profile.drafter) == (smollm_path.name, smollm_path.name)

    qtbot.waitUntil(lambda: not window.busy, timeout=REPLY_TIMEOUT_MS)  # a plain verdict reloads the target
    said = window.notice.text()
    # Where drafts cannot pay, the plain target's reload may say its own reason in the same line.
    plain_said = not speculation_pays(profile) and said.startswith("Speculation cannot pay on this machine")
    assert said.startswith("This machine is measured: Auto takes over") or plain_said, said
    stats, _ = send_now(qtbot, window, "Say hello.")
    if speculation_pays(profile):
        assert "at depth" in said and window.auto is not None and not window.pair.plain
        assert stats.depth == AUTO
    else:  # the profile's verdict: drafts cannot pay here, so Auto runs the target alone
        assert "Speculation cannot pay on this machine" in said and window.pair.plain
        assert stats.depth == 0 and {t.kind for t in window.reply_tokens} == {TokenKind.PLAIN}


def test_measuring_stops_on_request_and_starts_again_from_tools_or_preferences(
    qtbot, make_window, smollm_path, monkeypatch, tmp_path
):
    window = first_run_window(make_window, smollm_path, monkeypatch, tmp_path)
    control, panel = window.measure_control, window.measure_control.panel
    qtbot.waitUntil(lambda: panel.latest is not None, timeout=REPLY_TIMEOUT_MS)
    qtbot.mouseClick(panel.stop, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not control.measuring, timeout=REPLY_TIMEOUT_MS)
    assert window.notice.text().startswith("Measuring stopped: Auto replies stream plain")
    assert not panel.isVisible() and not list((tmp_path / "cache").glob("profiles/*.json"))

    stats, _ = send_now(qtbot, window, "Say hello.")  # still plain: stopped is not measured
    assert stats.depth == 0 and {t.kind for t in window.reply_tokens} == {TokenKind.PLAIN}
    assert not control.measuring  # a reply does not restart what the user stopped

    window.menus.measure.trigger()  # Tools → Measure This Machine
    assert control.measuring and panel.isVisible() and "again" in panel.intro.text()
    qtbot.waitUntil(lambda: panel.latest is not None, timeout=REPLY_TIMEOUT_MS)
    panel.stop.click()
    qtbot.waitUntil(lambda: not control.measuring, timeout=REPLY_TIMEOUT_MS)

    preferences = window.open_preferences()
    qtbot.mouseClick(preferences.measure_button, Qt.MouseButton.LeftButton)
    assert control.measuring and panel.isVisible()
    panel.stop.click()
    qtbot.waitUntil(lambda: not control.measuring, timeout=REPLY_TIMEOUT_MS)
    assert window.notice.text().startswith("Measuring stopped")
