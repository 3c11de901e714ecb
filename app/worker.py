"""The engine on its own thread: a worker QObject moved to a QThread.

Requests arrive as queued signals; results leave as signals, events in batches. Nothing
here touches a widget. Stop sets a flag the engine checks between rounds.
"""

from __future__ import annotations

import threading
import time
import traceback
from dataclasses import dataclass, field, replace

from PySide6.QtCore import QObject, Signal, Slot

from engine import catalog
from engine.chat import Message
from engine.compat import check
from engine.errors import DraftlightError
from engine.events import RoundEvent, RunStats
from engine.runtime import Model, RuntimeOptions
from engine.session import Engine, load_drafter
from engine.speculative import GenerationConfig
from engine.tuner import saved_plain_pass_s

BATCH_S = 0.1  # events reach the GUI at most 10 times a second: each visit costs the engine CPU time


@dataclass(frozen=True)
class LoadRequest:
    target: str  # "default", a catalog key or a path
    drafter: str  # "default", "none", "ngram", a catalog key or a path
    options: RuntimeOptions = field(default_factory=RuntimeOptions)


@dataclass(frozen=True)
class PairInfo:
    """What is loaded now, in words for the side panel."""

    target: str
    target_name: str
    drafter: str
    drafter_name: str
    verdict: str
    compatible: bool
    mode: str
    notice: str = ""  # e.g. the drafter that had to be dropped with a new target
    plain_pass_s: float | None = None  # a plain round's time from the box profile, if one is saved


@dataclass(frozen=True)
class AutoStatus:
    """What Auto is doing, for the side panel: depth, prediction and the reason."""

    depth: int
    predicted_speedup: float
    plain_tps: float  # the profile's plain decode rate, to turn a measured rate into a speedup
    explanation: str


@dataclass(frozen=True)
class ReplyRequest:
    messages: tuple[Message, ...]  # the conversation, ending with the new user message
    config: GenerationConfig
    thinking: bool = False


class EngineWorker(QObject):
    load_progress = Signal(int, int, str)
    loaded = Signal(object)  # PairInfo
    load_failed = Signal(str)
    verdict_ready = Signal(str, bool, str)  # drafter spec, compatible, explanation
    events = Signal(list)  # a batch of TokenEvent / RoundEvent / RunStats
    reply_failed = Signal(str)
    busy_changed = Signal(bool)
    auto_status = Signal(object)  # AutoStatus, after each batch of an Auto reply

    def __init__(self) -> None:
        super().__init__()
        self.engine: Engine | None = None
        self.target_spec = ""
        self.drafter_spec = ""
        self._cancel = threading.Event()
        self._last_progress = 0.0
        self._tuner = None  # AutoDepth for the loaded pair, built on the first Auto reply

    # ---- called from the GUI thread directly: only sets a flag ----
    def cancel(self) -> None:
        self._cancel.set()

    def _progress(self, done: int, total: int, label: str) -> None:
        now = time.monotonic()
        if done >= total or now - self._last_progress > 0.1:
            self._last_progress = now
            self.load_progress.emit(done, total, label)

    @Slot(object)
    def load(self, request: LoadRequest) -> None:
        """Load a pair; on failure keep what was loaded before and say why."""
        self.busy_changed.emit(True)
        try:
            self._load(request)
        except DraftlightError as exc:
            self.load_failed.emit(str(exc))
        except Exception as exc:  # the app must survive anything a model file does
            self.load_failed.emit(f"Loading failed: {exc}")
            traceback.print_exc()
        finally:
            self.busy_changed.emit(False)

    def _load(self, request: LoadRequest) -> None:
        notice = ""
        same_target = (
            self.engine is not None and request.target == self.target_spec and request.options == self.engine.options
        )
        if not same_target:
            # No download here: fetching a missing default model is the first-run dialog's offer.
            target_spec = catalog.DEFAULT_TARGET if request.target == "default" else request.target
            path = catalog.resolve(target_spec, self._progress, download=False)
            target = Model(path, request.options)  # raises before the old engine is touched
            old = self.engine
            engine = Engine(target, None, request.options)
            try:
                drafter, verdict = load_drafter(
                    target, request.drafter, request.options, self._progress, download=False
                )
                drafter_spec = request.drafter
            except DraftlightError as exc:
                drafter, verdict, drafter_spec = None, None, "none"
                notice = f"The drafter was not loaded: {exc}"
            engine.set_drafter(drafter, verdict)
            self.engine, self.target_spec, self.drafter_spec = engine, request.target, drafter_spec
            self._tuner = None
            if old is not None:
                old.close()
        elif request.drafter != self.drafter_spec:
            drafter, verdict = load_drafter(
                self.engine.target, request.drafter, request.options, self._progress, download=False
            )
            self.engine.set_drafter(drafter, verdict)
            self.drafter_spec = request.drafter
            self._tuner = None
        self.loaded.emit(self._info(notice))

    def _info(self, notice: str = "") -> PairInfo:
        engine = self.engine
        assert engine is not None
        if self.drafter_spec == "none":
            verdict, ok = "No drafter: every token comes from a plain target pass.", True
        elif self.drafter_spec == "ngram":
            verdict, ok = "The n-gram drafter needs no model: it proposes text seen earlier.", True
        else:
            verdict, ok = (engine.verdict.explain(), engine.verdict.compatible) if engine.verdict else ("", True)
        drafter_name = getattr(engine.drafter, "name", "none") if engine.drafter else "none"
        return PairInfo(
            target=self.target_spec,
            target_name=engine.target.name,
            drafter=self.drafter_spec,
            drafter_name=drafter_name,
            verdict=verdict,
            compatible=ok,
            mode=engine.options.mode,
            notice=notice,
            plain_pass_s=saved_plain_pass_s(engine.target, engine.options),
        )

    @Slot(str)
    def check_drafter(self, spec: str) -> None:
        """Say whether a drafter file suits the loaded target, reading only its vocabulary."""
        if self.engine is None or spec in ("none", "ngram"):
            self.verdict_ready.emit(spec, True, "")
            return
        try:
            path = catalog.resolve(catalog.DEFAULT_DRAFTER if spec == "default" else spec, self._progress)
            vocab = Model(path, self.engine.options, vocab_only=True)
            verdict = check(self.engine.target, vocab)
            vocab.close()
            self.verdict_ready.emit(spec, verdict.compatible, verdict.explain())
        except DraftlightError as exc:
            self.verdict_ready.emit(spec, False, str(exc))

    @Slot(object)
    def generate(self, request: ReplyRequest) -> None:
        """Stream one reply; events leave in batches, the last batch ends with RunStats."""
        self._cancel.clear()
        self.busy_changed.emit(True)
        batch: list = []
        last_emit = time.perf_counter()
        try:
            if self.engine is None:
                raise DraftlightError("No model is loaded yet.")
            engine = self.engine
            prompt = engine.tokenize_prompt(engine.render(list(request.messages), request.thinking))
            config = request.config
            tuner = None
            if engine.drafter is None and config.depth:
                config = replace(config, depth=0)
            elif config.depth < 0:
                tuner = self._auto(engine)
                config = replace(config, depth=tuner.max_depth)
            for event in engine.stream(prompt, config, self._cancel.is_set, tuner):
                batch.append(event)
                if isinstance(event, RoundEvent | RunStats):
                    now = time.perf_counter()
                    if isinstance(event, RunStats) or now - last_emit >= BATCH_S:
                        self.events.emit(batch)
                        batch, last_emit = [], now
                        if tuner is not None:
                            self.auto_status.emit(self._status(tuner))
        except DraftlightError as exc:
            if batch:
                self.events.emit(batch)
            self.reply_failed.emit(str(exc))
        except Exception as exc:
            if batch:
                self.events.emit(batch)
            self.reply_failed.emit(f"The engine failed: {exc}")
            traceback.print_exc()
        finally:
            self.busy_changed.emit(False)

    def _auto(self, engine: Engine):
        """The pair's AutoDepth; the first time, measuring the box if no profile is saved."""
        from engine.tuner import AutoDepth

        if self._tuner is None:

            def say(message: str) -> None:
                self.load_progress.emit(0, 1, f"tuning to this machine: {message}")

            self._tuner = AutoDepth.for_engine(engine, progress=say)
            self.load_progress.emit(1, 1, "")
        return self._tuner

    @staticmethod
    def _status(tuner) -> AutoStatus:
        p = tuner.profile
        return AutoStatus(tuner.depth, tuner.predicted_speedup(), 1.0 / p.round_cost_s(0), tuner.explain())

    @Slot()
    def shutdown(self) -> None:
        """Free the models on this thread, then end the thread's event loop."""
        if self.engine is not None:
            self.engine.close()
            self.engine = None
        self.thread().quit()
