"""Teaching mode: step through rounds on a real model, or on a recorded replay.

Step, Play (rounds per second down to slow motion), Pause, Reset. Each round shows the
drafts as pending, then the verdict; the panel beside it says, in plain words and
numbers, what the round did and what it cost.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSlider,
    QSpinBox,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.jobs import Job
from app.teachtext import Totals, explain_round, lookup_sentence, shown
from app.teachview import CandidatesView, RoundView
from app.worker import EngineWorker
from engine import (
    MAX_DEPTH,
    DraftlightError,
    GenerationConfig,
    Message,
    NgramDrafter,
    NgramMatch,
    Replay,
    RoundStep,
    RunStats,
    Stepper,
    load_replay,
    mentioned_tokens,
    ngram_match,
    record_replay,
)

TEACH_TOKENS = 160
NO_LIVE = "Open a replay to step through it: live rounds need the models of the chat window's engine."


@dataclass(frozen=True)
class Started:
    """A live reply ready to step: the prompt as the template rendered it, and a plain pass's time."""

    rendered: str
    plain_pass_ms: float | None


@dataclass(frozen=True)
class Stepped:
    """One round, with the text of every token it mentions (drafts, candidates, a matched n-gram)."""

    step: RoundStep
    pieces: dict[int, str]
    lookup: NgramMatch | None = None  # prompt lookup's drafts: where in the history they were found
    prompt_tokens: int = 0


class LiveSteps:
    """A reply stepped on the chat's engine: its methods are jobs on the engine thread, and only
    that thread touches this object."""

    def __init__(self, chat_worker: EngineWorker) -> None:
        self.chat_worker = chat_worker
        self.stepper: Stepper | None = None
        self._expected_cache: list[int] | None = None
        self.prompt_ids: list[int] = []

    def start(self, prompt: str, depth: int) -> Started:
        engine = self.chat_worker.engine
        if engine is None:
            raise DraftlightError(self.chat_worker.missing())
        rendered = engine.render([Message("user", prompt)])
        ids = engine.tokenize_prompt(rendered)
        config = GenerationConfig(max_tokens=TEACH_TOKENS, depth=depth, top_candidates=5)
        if self.stepper is not None:
            self.stepper.close()
        self.stepper = Stepper(engine.stream(ids, config))
        self._expected_cache = None
        self.prompt_ids = ids
        plain_s = engine.plain_pass_s()
        return Started(rendered, plain_s * 1e3 if plain_s else None)

    def step(self) -> Stepped | RunStats:
        """The next round, or the reply's stats once it has finished."""
        engine = self.chat_worker.engine
        if self.stepper is None or engine is None:
            raise DraftlightError("Press Start first.")
        if self._expected_cache is not None and engine.cached_tokens != self._expected_cache:
            self.stepper = None
            raise DraftlightError("The chat used the model since the last step; press Start to begin again.")
        step = self.stepper.step()
        self._expected_cache = engine.cached_tokens
        if step is None:
            return self.stepper.stats
        found = self._lookup(step)
        tokens = mentioned_tokens([step]) | set(found.ngram if found else ())
        return Stepped(step, {t: engine.target.display(t) for t in tokens}, found, len(self.prompt_ids))

    def _lookup(self, step: RoundStep) -> NgramMatch | None:
        """Where prompt lookup found this round's drafts: the scan its index agrees with, on the same history."""
        drafter = self.chat_worker.engine.drafter if self.chat_worker.engine else None
        if not isinstance(drafter, NgramDrafter) or not step.round.drafted or self.stepper is None:
            return None
        history = self.prompt_ids + [t.token_id for s in self.stepper.steps[:-1] for t in s.tokens]
        return ngram_match(history, step.round.drafted, drafter.max_ngram, drafter.min_ngram)


class TeachingWindow(QWidget):
    def __init__(self, main_window=None) -> None:
        super().__init__(main_window)  # owned by the main window: deleted with it, on the main thread
        self.setWindowFlag(Qt.WindowType.Window, True)
        self.setWindowTitle("Draftlight — teaching mode")
        self.main_window = main_window
        self.replay: Replay | None = None
        self.replay_next = 0
        self.steps: list[RoundStep] = []
        self.stats: RunStats | None = None
        self.pieces: dict[int, str] = {}
        self.plain_pass_ms: float | None = None
        self.rendered = ""
        self.totals = Totals()
        self.waiting = False
        self.verdict_due: RoundStep | None = None
        self.lookup_said = ""  # where prompt lookup found the shown round's drafts, in rich text
        self._build()
        self.job = Job("Teaching mode failed")
        self.live = LiveSteps(main_window.worker) if main_window is not None else None
        if main_window is not None:
            self.job.moveToThread(main_window.thread)  # queued behind the chat, never beside it
        self.job.returned.connect(self._returned)
        self.job.errored.connect(self._failed)

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        top = QHBoxLayout()
        self.prompt = QLineEdit("Write a bubble sort in C++.")
        self.depth = QSpinBox()
        self.depth.setRange(1, MAX_DEPTH)
        self.depth.setValue(3)
        self.depth.setPrefix("depth ")
        self.start_button = QPushButton("Start")
        self.open_button = QPushButton("Open replay…")
        self.save_button = QPushButton("Save replay…")
        self.save_button.setEnabled(False)
        for w in (self.prompt, self.depth, self.start_button, self.open_button, self.save_button):
            top.addWidget(w, 1 if w is self.prompt else 0)
        layout.addLayout(top)

        controls = QHBoxLayout()
        self.step_button = QPushButton("Step")
        self.play_button = QPushButton("Play")
        self.pause_button = QPushButton("Pause")
        self.reset_button = QPushButton("Reset")
        self.speed = QSlider(Qt.Orientation.Horizontal)
        self.speed.setRange(1, 40)  # tenths of a round per second: 0.1 to 4
        self.speed.setValue(10)
        self.speed_label = QLabel()
        for w in (self.step_button, self.play_button, self.pause_button, self.reset_button):
            controls.addWidget(w)
        controls.addWidget(QLabel("speed"))
        controls.addWidget(self.speed, 1)
        controls.addWidget(self.speed_label)
        layout.addLayout(controls)

        self.tabs = QTabWidget()
        stepping = QSplitter(Qt.Orientation.Horizontal)
        self.view = RoundView()
        right = QWidget()
        rv = QVBoxLayout(right)
        self.explanation = QLabel("Type a prompt and press Start, or open a replay.")
        self.explanation.setWordWrap(True)
        self.explanation.setTextFormat(Qt.TextFormat.RichText)
        self.explanation.setAlignment(Qt.AlignmentFlag.AlignTop)
        self.explanation.setMinimumWidth(320)
        self.candidates = CandidatesView()
        rv.addWidget(self.explanation, 1)
        rv.addWidget(self.candidates, 1)
        stepping.addWidget(self.view)
        stepping.addWidget(right)
        stepping.setSizes([600, 420])
        self.tabs.addTab(stepping, "Step through a round")
        from app.compare import ComparePanel

        self.compare = ComparePanel(self.main_window)
        self.tabs.addTab(self.compare, "Off and on, side by side")
        layout.addWidget(self.tabs, 1)

        self.timer = QTimer(self)
        self.timer.timeout.connect(self._tick)
        self.start_button.clicked.connect(self.start)
        self.open_button.clicked.connect(self.open_replay_dialog)
        self.save_button.clicked.connect(self.save_replay_dialog)
        self.step_button.clicked.connect(self.step)
        self.play_button.clicked.connect(self.play)
        self.pause_button.clicked.connect(self.pause)
        self.reset_button.clicked.connect(self.reset)
        self.speed.valueChanged.connect(self._speed_changed)
        self.view.token_clicked.connect(lambda t: self.candidates.show_token(t, self.piece))
        self._speed_changed(self.speed.value())
        self.resize(1100, 720)

    # ---- sources ----
    def piece(self, token: int) -> str:
        return self.pieces.get(token, f"<{token}>")

    def start(self) -> None:
        if self.live is None:
            self.say(NO_LIVE)
            return
        if self.main_window.streaming:
            self.explanation.setText("The chat is streaming a reply; start once it has finished.")
            return
        self._clear()
        self.replay = None
        self.waiting = True
        self.job.start(self.live.start, self.prompt.text(), self.depth.value())

    def open_replay(self, path: str | Path) -> None:
        self.show_replay(load_replay(path))  # raises DraftlightError with a sentence

    def show_replay(self, replay: Replay) -> None:
        """Step through a recorded reply: a file's, or a chat reply's kept in the store."""
        self._clear()
        self.replay = replay
        self.pieces = dict(replay.pieces)
        self.plain_pass_ms = replay.plain_pass_ms
        self.rendered = replay.prompt
        self.say(f"Replay of {replay.target} with {replay.drafter}: {len(replay.steps)} rounds. Press Step or Play.")

    def _clear(self) -> None:
        self.pause()
        self.view.clear_conversation()
        self.steps, self.stats, self.totals = [], None, Totals()
        self.replay_next, self.verdict_due, self.waiting = 0, None, False
        self.save_button.setEnabled(False)

    def reset(self) -> None:
        """Back to the first round: a replay restarts; a live reply starts again."""
        if self.replay is not None:
            replay = self.replay
            self._clear()
            self.replay = replay
            self.explanation.setText("Reset: press Step or Play.")
        else:
            self.start()

    # ---- stepping ----
    def step(self) -> None:
        """One phase: show the next round's drafts, or land the verdict of the shown ones."""
        if self.verdict_due is not None:
            step, self.verdict_due = self.verdict_due, None
            self.view.show_verdict(step)
            self.totals.add(step)
            said = explain_round(step, self.totals, self.plain_pass_ms, self.piece)
            self.explanation.setText(said + (f"<br>{self.lookup_said}" if self.lookup_said else ""))
            return
        if self.waiting or self.stats is not None:
            return
        if self.replay is not None:
            if self.replay_next < len(self.replay.steps):
                step = self.replay.steps[self.replay_next]
                self.replay_next += 1
                self._stepped(step, {})
            else:
                self._finished(self.replay.stats)
            return
        if self.live is None:
            self.say(NO_LIVE)
            return
        self.waiting = True
        self.job.start(self.live.step)

    def _returned(self, result: Started | Stepped | RunStats) -> None:
        match result:
            case Started():
                self.rendered, self.plain_pass_ms, self.waiting = result.rendered, result.plain_pass_ms, False
                self.explanation.setText("Ready: press Step to see the first round's drafts, or Play.")
            case Stepped():
                self._stepped(result.step, result.pieces)
                if result.lookup is not None:  # prompt lookup's drafts: say where they came from
                    self.lookup_said = lookup_sentence(result.lookup, result.prompt_tokens, self.piece)
                    self.explanation.setText(f"{self.explanation.text()}<br>{self.lookup_said}")
            case RunStats():
                self._finished(result)

    def _stepped(self, step: RoundStep, pieces: dict) -> None:
        self.waiting = False
        self.lookup_said = ""
        self.pieces.update(pieces)
        self.steps.append(step)
        self.view.show_drafts(step, self.piece)
        self.verdict_due = step
        self.explanation.setText(
            f"<b>Round {step.round.round_index + 1}</b><br>The drafter proposes {step.round.drafted} token(s): "
            + ", ".join(shown(self.piece(t)) for t in step.drafts)
            + "<br>The target checks them all in one pass…"
        )

    def _finished(self, stats: RunStats) -> None:
        self.waiting = False
        self.stats = stats
        self.pause()
        self.view.end_reply(stats)
        self.save_button.setEnabled(self.replay is None and bool(self.steps))

    def _failed(self, message: str) -> None:
        self.waiting = False
        self.pause()
        self.say(message)

    def say(self, sentence: str) -> None:
        """Plain words in the explanation panel (rich text for the rounds' bold): file names and
        model names come from outside, so they are escaped."""
        self.explanation.setText(html.escape(sentence, quote=False))

    # ---- play ----
    def _speed_changed(self, value: int) -> None:
        rounds_per_s = value / 10
        self.speed_label.setText(f"{rounds_per_s:.1f} rounds/s")
        self.timer.setInterval(int(1000 / rounds_per_s / 2))  # two phases a round

    def play(self) -> None:
        self.timer.start()

    def pause(self) -> None:
        self.timer.stop()

    def _tick(self) -> None:
        if self.stats is not None and self.verdict_due is None:
            self.pause()
            return
        try:
            self.step()
        except Exception as exc:  # a bug must not repeat on every tick: stop playing and say it once
            self.pause()
            self.say(f"Playing stopped: this round cannot be shown ({type(exc).__name__}: {exc}).")
            raise

    # ---- replays ----
    def current_replay(self) -> Replay | None:
        if self.replay is not None:
            return self.replay
        if self.stats is None or self.main_window is None or self.main_window.pair is None:
            return None
        pair = self.main_window.pair
        return record_replay(
            self.steps,
            self.stats,
            self.piece,
            pair.target_name,
            pair.drafter_name,
            self.rendered,
            {"depth": self.depth.value(), "max_tokens": TEACH_TOKENS, "temperature": 0.0},
            self.plain_pass_ms,
        )

    def save_replay_dialog(self) -> None:
        replay = self.current_replay()
        if replay is None:
            return
        path, _ = QFileDialog.getSaveFileName(self, "Save replay", "round.draftlight.json", "Replays (*.json)")
        if path:
            replay.save(path)

    def open_replay_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open replay", str(Path.home()), "Replays (*.json)")
        if path:
            self.open_replay_file(path)

    def open_replay_file(self, path: str | Path) -> bool:
        """Open a replay, or say in the panel why it cannot be shown; whether it opened."""
        try:
            self.open_replay(path)
        except DraftlightError as exc:
            self.say(str(exc))
            return False
        return True

    def closeEvent(self, event) -> None:
        self.pause()
        super().closeEvent(event)
