"""The engine on its own thread: a worker QObject moved to a QThread.

Requests arrive as queued signals; results leave as signals, events in batches. Nothing
here touches a widget. Stop sets a flag the engine checks between rounds.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, Signal, Slot

from engine import (
    AutoDepth,
    Cancelled,
    ConnectionLost,
    DraftlightError,
    Endpoint,
    Engine,
    GenerationConfig,
    Message,
    Model,
    Remote,
    RemoteInfo,
    RoundEvent,
    RunStats,
    RuntimeOptions,
    ThermalReading,
    TokenEvent,
    TokenKind,
    Unreachable,
    attach_remote,
    catalog,
    load_drafter,
    plain_reason_for,
)

BATCH_S = 0.1  # events reach the GUI at most 10 times a second: each visit costs the engine CPU time


# What a drafter file that reads the target is, in a sentence before its compatibility verdict.
READS_THE_TARGET = {
    "mtp": "The target's own MTP heads, in a file of their own: they read its hidden states.",
    "assistant": "Gemma 4's assistant model: it reads the target's hidden state and attends to its memory.",
    "dflash": "A DFlash drafter: a block of drafts in one pass, from the target's layers.",
    "dspark": "A DSpark drafter (DFlash with a Markov head): a block of drafts from the target's layers.",
    "eagle3": "An EAGLE-3 drafter: it reads three of the target's layers.",
}


@dataclass(frozen=True)
class LoadRequest:
    target: str  # "default", a catalog key or a path
    drafter: str  # "default", "none", "ngram", "mtp", a catalog key or a path
    options: RuntimeOptions = field(default_factory=RuntimeOptions)
    # Auto replies run plain on the fastest settings where no depth could pay (Engine.go_plain);
    # off when the user asks to speculate anyway, to watch it. With `auto` (the chosen depth),
    # a pair whose saved profile already says so loads that way, its drafter never loaded.
    go_plain: bool = True
    auto: bool = False


@dataclass(frozen=True)
class PairInfo:
    """What is loaded now, in words for the side panel."""

    target: str
    target_name: str
    drafter: str
    drafter_name: str
    drafter_kind: str  # "model", "ngram", "mtp", "assistant", "dflash", "dspark", "eagle3", or "none"
    verdict: str
    compatible: bool
    mode: str
    notice: str = ""  # e.g. the drafter that had to be dropped with a new target
    plain_pass_s: float | None = None  # a plain round's time from the box profile, if one is saved
    plain: bool = False  # speculation cannot pay here: no drafter, the fastest plain settings
    remote: RemoteInfo | None = None  # the engine runs on another machine: what answers there
    remote_thermal: Callable[[], ThermalReading] | None = None  # reads the remote box's thermal state


def remote_verdict(info: RemoteInfo) -> str:
    """What the side panel says of a remote engine: where, which model, which drafter."""
    drafter = f", drafted by {info.drafter}" if info.drafter else ""
    return f"Replies come from {info.describe()}: {info.model}{drafter}. {info.notes}".strip()


@dataclass(frozen=True)
class AttachRequest:
    """Use the engine at this address instead of this machine's."""

    url: str
    token: str | None = None


@dataclass(frozen=True)
class AutoStatus:
    """What Auto is doing, for the side panel: depth, prediction and the reason."""

    depth: int
    predicted_speedup: float
    plain_pass_s: float  # the profile's plain round, to turn a measured rate into a speedup
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
    events = Signal(list)  # a batch of TokenEvent / RoundEvent / RunStats
    reply_failed = Signal(str)
    connection_lost = Signal(str)  # a remote engine went away, or could not be reached: worth a retry
    reply_stopped = Signal()  # a Stop before the reply's first token (while the template rendered or the prompt filled)
    busy_changed = Signal(bool)
    auto_status = Signal(object)  # AutoStatus, after each batch of an Auto reply

    def __init__(self) -> None:
        super().__init__()
        self.engine: Engine | None = None
        self.remote: Remote | None = None  # while set, replies come from it, not from `engine`
        self.target_spec = ""
        self.drafter_spec = ""
        self._cancel = threading.Event()
        self._last_progress = 0.0
        self.closing = False  # set before shutdown is queued: requests still queued do nothing

    def missing(self) -> str:
        """Why there is no engine on this machine to run a tool with, in a sentence."""
        if self.remote is not None:
            return (
                f"Replies come from {self.remote.info.describe()}; this tool runs this machine's engine: "
                "choose Engine → This machine to use it."
            )
        return "No model is loaded yet."

    # ---- called from the GUI thread directly: only sets a flag ----
    def cancel(self) -> None:
        """The one cancel path: Stop and closing the window both come here.

        Whatever the engine runs for a while (rounds, template rendering, a long prefill)
        should poll `cancelled`, which engine.stream is handed; closing waits a bounded time
        for it (app/enginethread.py).
        """
        self._cancel.set()

    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def _progress(self, done: int, total: int, label: str) -> None:
        now = time.monotonic()
        if done >= total or now - self._last_progress > 0.1:
            self._last_progress = now
            self.load_progress.emit(done, total, label)

    @Slot(object)
    def load(self, request: LoadRequest) -> None:
        """Load a pair; on failure keep what was loaded before and say why."""
        self._loading(self._load, request)

    @Slot(object)
    def attach(self, request: AttachRequest) -> None:
        """Reply from the engine at an address; this machine's models are freed once it answers."""
        self._loading(self._attach, request)

    def _loading(self, work, request) -> None:
        """A load or an attach: busy meanwhile; a failure keeps what ran before and says why."""
        if self.closing:
            return
        self.busy_changed.emit(True)
        try:
            work(request)
        except DraftlightError as exc:
            self.load_failed.emit(str(exc))
        except Exception as exc:  # the app must survive anything a model file or a server does
            self.load_failed.emit(f"Loading failed: {exc}")
            traceback.print_exc()
        finally:
            self.busy_changed.emit(False)

    def _attach(self, request: AttachRequest) -> None:
        self.load_progress.emit(0, 1, f"connecting to {request.url}")
        try:
            remote = attach_remote(Endpoint(request.url, request.token or None))
        finally:
            self.load_progress.emit(1, 1, "")
        self.remote = remote
        if self.engine is not None:  # a laptop attaches because its memory is short: give it back
            self.engine.close()
            self.engine, self.target_spec, self.drafter_spec = None, "", ""
        info = remote.info
        kind = "remote" if info.drafter or info.kind != "draftlight" else "none"
        self.loaded.emit(
            PairInfo(target="", target_name=info.model, drafter="", drafter_name=info.drafter or "the server's own",
                     drafter_kind=kind, verdict=remote_verdict(info),
                     compatible=True, mode="remote", remote=info, remote_thermal=remote.read_thermal)
        )  # fmt: skip

    def _load(self, request: LoadRequest) -> None:
        notice = ""
        if self.remote is not None:  # back to this machine's engine
            self.remote = None
            self.target_spec = ""
        same_target = (
            self.engine is not None and request.target == self.target_spec and request.options == self.engine.options
        )
        if not same_target:
            # No download here: fetching a missing default model is the first-run dialog's offer.
            target_spec = catalog.DEFAULT_TARGET if request.target == "default" else request.target
            path = catalog.resolve(target_spec, self._progress, download=False)
            reason = plain_reason_for(path, request.drafter, request.options) if request.auto else ""
            if request.go_plain and reason:
                self._load_plain(request, path, reason)
                return
            target = Model(path, request.options)  # raises before the old engine is touched
            old = self.engine
            engine = Engine(target, None, request.options)
            try:
                drafter, verdict = load_drafter(
                    target, request.drafter, request.options, self._progress, download=False, target_ctx=engine.ctx
                )
                drafter_spec = request.drafter
            except DraftlightError as exc:
                drafter, verdict, drafter_spec = None, None, "none"
                notice = f"The drafter was not loaded: {exc}"
            engine.set_drafter(drafter, verdict)
            self.engine, self.target_spec, self.drafter_spec = engine, request.target, drafter_spec
            if old is not None:
                old.close()
        elif request.drafter != self.drafter_spec:
            drafter, verdict = load_drafter(
                self.engine.target,
                request.drafter,
                request.options,
                self._progress,
                download=False,
                target_ctx=self.engine.ctx,
            )
            self.engine.set_drafter(drafter, verdict)
            self.drafter_spec = request.drafter
        self.engine.go_plain = request.go_plain
        self.loaded.emit(self._info(notice))

    def _load_plain(self, request: LoadRequest, path, reason: str) -> None:
        """The target alone on the fastest plain settings: the pair's profile says drafts cannot pay here."""
        engine = Engine.plain(path, request.options, reason)
        old, self.engine = self.engine, engine
        self.target_spec, self.drafter_spec = request.target, request.drafter  # the picker keeps the choice
        if old is not None:
            old.close()
        self.loaded.emit(self._info())

    def _info(self, notice: str = "") -> PairInfo:
        engine = self.engine
        assert engine is not None
        if engine.plain_reason:
            verdict, ok = "No drafter loaded: plain decoding on the fastest settings (the reason is below).", True
        elif self.drafter_spec == "none":
            verdict, ok = "No drafter: every token comes from a plain target pass.", True
        elif self.drafter_spec == "ngram":
            verdict, ok = "The n-gram drafter needs no model: it proposes text seen earlier.", True
        elif self.drafter_spec == "mtp":
            verdict, ok = "The target drafts for itself with the MTP head in its own file: nothing to match.", True
        else:
            verdict, ok = (engine.verdict.explain(), engine.verdict.compatible) if engine.verdict else ("", True)
            kind = engine.drafter.kind if engine.drafter else "none"
            verdict = f"{READS_THE_TARGET.get(kind, '')} {verdict}".strip()
        if engine.ctx.has_state and engine.can_speculate:  # a hybrid target: say how drafts are undone
            verdict = f"{verdict} {engine.describe_rollback()}".strip()
        drafter_name = getattr(engine.drafter, "name", "none") if engine.drafter else "none"
        return PairInfo(
            target=self.target_spec,
            target_name=engine.target.name,
            drafter=self.drafter_spec,
            drafter_name=drafter_name,
            drafter_kind=engine.drafter.kind if engine.drafter else "none",
            verdict=verdict,
            compatible=ok,
            mode=engine.options.mode,
            notice=" ".join(part for part in (notice, engine.notice) if part),
            plain_pass_s=engine.plain_pass_s(),
            plain=bool(engine.plain_reason),
        )

    @Slot(object)
    def generate(self, request: ReplyRequest) -> None:
        """Stream one reply; events leave in batches, the last batch ends with RunStats."""
        if self.closing:
            return
        self._cancel.clear()
        self.busy_changed.emit(True)
        batch: list = []
        last_emit = time.perf_counter()
        try:
            if self.remote is not None:
                events, auto = self.remote.reply(request.messages, request.config, request.thinking, self.cancelled), None  # fmt: skip
            else:
                events, auto = self._local_events(request)
            for event in events:
                batch.append(event)
                # A batch ends with a round (its tokens travel with it), or with a token whose
                # server reports no rounds; at most 10 a second, the last with the stats.
                ends_unit = isinstance(event, RoundEvent | RunStats) or (
                    isinstance(event, TokenEvent) and event.kind is TokenKind.UNREPORTED
                )
                if ends_unit:
                    now = time.perf_counter()
                    if isinstance(event, RunStats) or now - last_emit >= BATCH_S:
                        self.events.emit(batch)
                        batch, last_emit = [], now
                        if auto is not None:
                            self.auto_status.emit(self._status(auto))
        except Exception as exc:  # the app must survive anything the engine or a server does
            if batch:
                self.events.emit(batch)
            self._reply_ended_by(exc)
        finally:
            self.busy_changed.emit(False)

    def _local_events(self, request: ReplyRequest):
        """This machine's engine on the request: its events, and Auto's policy where Auto chooses."""
        if self.engine is None:
            raise DraftlightError("No model is loaded yet.")
        engine = self.engine
        rendered = engine.render(list(request.messages), request.thinking, cancelled=self._cancel.is_set)
        prompt = engine.tokenize_prompt(rendered)
        config = request.config
        was_plain = bool(engine.plain_reason)
        policy = engine.depth_policy(config.depth, progress=self._tuning)  # Auto's first use measures the box
        self.load_progress.emit(1, 1, "")
        if engine.plain_reason and not was_plain:  # the measurement said drafts cannot pay: plain from now
            self.loaded.emit(self._info())
        auto = policy if isinstance(policy, AutoDepth) else None
        return engine.stream(prompt, config, self.cancelled), auto

    def _reply_ended_by(self, exc: Exception) -> None:
        """The signal for what ended a reply early: a Stop, a lost server, or a failure in words."""
        if isinstance(exc, Cancelled):
            self.reply_stopped.emit()
        elif isinstance(exc, ConnectionLost | Unreachable):
            self.connection_lost.emit(str(exc))
        elif isinstance(exc, DraftlightError):
            self.reply_failed.emit(str(exc))
        else:
            self.reply_failed.emit(f"The engine failed: {exc}")
            traceback.print_exc()

    def _tuning(self, message: str) -> None:
        self.load_progress.emit(0, 1, f"tuning to this machine: {message}")

    @staticmethod
    def _status(auto: AutoDepth) -> AutoStatus:
        return AutoStatus(auto.depth, auto.predicted_speedup(), auto.profile.plain_pass_s, auto.explain())

    @Slot()
    def shutdown(self) -> None:
        """Free the models on this thread, then end the thread's event loop."""
        if self.engine is not None:
            self.engine.close()
            self.engine = None
        self.thread().quit()
