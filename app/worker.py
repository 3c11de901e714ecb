"""The engine on its own thread: a worker QObject moved to a QThread.

Requests arrive as queued signals; results leave as signals, events in batches. Nothing
here touches a widget. A load (or an attach) and a reply each run as a Job (app/jobs.py),
which turns what ends them into a sentence. Stop sets a flag the engine checks between rounds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from PySide6.QtCore import QObject, Signal, Slot

from app.boxmeasure import BoxMeasurer
from app.jobs import Job, ProgressReport
from engine import (
    AUTO,
    AUTO_RUNTIME,
    DRAFTER_KINDS,
    NO_DRAFTER,
    AutoDepth,
    ConnectionLost,
    DepthPolicy,
    DraftlightError,
    Endpoint,
    Engine,
    GenerationConfig,
    Message,
    MessageTooLong,
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
    fit_conversation,
    model_title,
    reply_room,
    runtime_name,
    with_replay,
)

BATCH_S = 0.1  # events reach the GUI at most 10 times a second: each visit costs the engine CPU time


def shown_name(drafter) -> str:
    """A drafter's name on screen: a draft model's one name (its file's), else the kind's own words."""
    model = getattr(drafter, "model", None)  # a drafter that reads a model file of its own
    return model_title(getattr(model, "path", None), fallback=drafter.name)


@dataclass(frozen=True)
class LoadRequest:
    target: str  # "default", a catalog key or a path
    drafter: str  # "default", a keyword kind's name ("none", "ngram", "mtp"), "auto", a catalog key or a path
    options: RuntimeOptions = field(default_factory=RuntimeOptions)
    # Auto replies run plain on the fastest settings where no depth could pay (Engine.go_plain);
    # off when the user asks to speculate anyway, to watch it. With `auto` (the chosen depth),
    # a pair whose saved profile already says so loads that way, its drafter never loaded.
    go_plain: bool = True
    auto: bool = False
    runtime: str = AUTO_RUNTIME  # "llama", "mlx", or "auto": the target's format decides


@dataclass(frozen=True)
class PairInfo:
    """What is loaded now, in words for the side panel."""

    target: str
    target_name: str
    drafter: str
    drafter_name: str
    drafter_kind: str  # a drafter kind's name (DRAFTER_KINDS), or "remote"
    verdict: str
    compatible: bool
    mode: str  # "exact" or "fast" on a runtime with modes (llama.cpp), "remote", "" on MLX
    notice: str = ""  # e.g. the drafter that had to be dropped with a new target
    plain_pass_s: float | None = None  # a plain round's time from the box profile, if one is saved
    profile_basis: str = ""  # that profile's plain speed, spread and age, in words
    plain: bool = False  # speculation cannot pay here: no drafter, the fastest plain settings
    remote: RemoteInfo | None = None  # the engine runs on another machine: what answers there
    remote_thermal: Callable[[], ThermalReading] | None = None  # reads the remote box's thermal state
    ledger: str = ""  # the acceptance ledger's warning for this pair (stale drafter), before the first reply
    runtime: str = ""  # "llama" or "mlx" on this machine; "" for a remote engine
    n_ctx: int = 0  # the context made, in tokens; 0 for a remote engine
    n_ctx_train: int = 0  # the target's trained length
    unmeasured: bool = False  # the drafter can speculate but no box profile is saved: Auto would measure first


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
    profile_basis: str = ""  # that profile's plain speed, spread and age, in words


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
    message_refused = Signal(str)  # the newest message cannot fit the context: the sentence, nothing generated
    prompt_fitted = Signal(str)  # before a reply: which oldest turns were left out of its prompt, or ""
    reply_stopped = Signal()  # a Stop before the reply's first token (while the template rendered or the prompt filled)
    busy_changed = Signal(bool)
    auto_status = Signal(object)  # AutoStatus, after each batch of an Auto reply
    ledger_notice = Signal(str)  # after a local reply: the acceptance ledger's warning for the pair, or ""

    def __init__(self) -> None:
        super().__init__()
        self.engine: Engine | None = None
        self.remote: Remote | None = None  # while set, replies come from it, not from `engine`
        self.target_spec = ""
        self.drafter_spec = ""
        self.closing = False  # set before shutdown is queued: requests still queued do nothing
        # Children, so they move to the engine thread with this worker; its slots run them there.
        self.loading = Job("Loading failed", parent=self)
        self.loading.yielded.connect(self._load_progress)
        self.loading.returned.connect(self.loaded)
        self.loading.errored.connect(self.load_failed)  # what ran before keeps running
        # The engine ends a stopped reply itself, its stats the last event: never cut off between batches.
        self.replying = Job("The engine failed", stops_itself=True, parent=self)
        self.replying.yielded.connect(self._pass_on)
        self.replying.errored.connect(self.reply_failed)
        self.replying.aborted.connect(self.reply_stopped)
        # Measures the box between replies for Auto (app/boxmeasure.py); Auto replies play plain meanwhile.
        self.box = BoxMeasurer(lambda: self.engine if self.remote is None else None, self._auto_took_over, self)

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
        self.replying.cancel()

    def cancelled(self) -> bool:
        return self.replying.cancelled()

    @Slot(object)
    def load(self, request: LoadRequest) -> None:
        """Load a pair; on failure keep what was loaded before and say why."""
        self._holding_the_engine(self.loading, self._load, request)

    @Slot(object)
    def attach(self, request: AttachRequest) -> None:
        """Reply from the engine at an address; this machine's models are freed once it answers."""
        self._holding_the_engine(self.loading, self._attach, request)

    @Slot(object)
    def generate(self, request: ReplyRequest) -> None:
        """Stream one reply; events leave in batches, the last batch ends with RunStats."""
        self._holding_the_engine(self.replying, self._reply, request)

    def _holding_the_engine(self, job: Job, work: Callable, request: object) -> None:
        """Busy while the job runs; requests still queued when the window closes do nothing."""
        if self.closing:
            return
        self.busy_changed.emit(True)
        job.run(work, request)  # never raises: what ended it leaves as the job's signals
        self.busy_changed.emit(False)

    def _load_progress(self, report: ProgressReport) -> None:
        self.load_progress.emit(report.done, report.total, report.label)

    def _attach(self, request: AttachRequest) -> PairInfo:
        self.box.drop()
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
        kind = "remote" if info.drafter or info.kind != "draftlight" else NO_DRAFTER.name
        return PairInfo(target="", target_name=info.model, drafter="", drafter_name=info.drafter or "the server's own",
                        drafter_kind=kind, verdict=remote_verdict(info),
                        compatible=True, mode="remote", remote=info, remote_thermal=remote.read_thermal)  # fmt: skip

    def _load(self, request: LoadRequest) -> PairInfo:
        notice = ""
        self.box.drop()  # its steps run on the models a load may change
        if self.remote is not None:  # back to this machine's engine
            self.remote = None
            self.target_spec = ""
        same_target = (
            self.engine is not None
            and request.target == self.target_spec
            and request.options == self.engine.options
            and request.runtime in (AUTO_RUNTIME, self.engine.runtime.name)
        )
        if not same_target:
            # The engine's own load, in its two halves (Engine.load), so that a drafter that cannot load
            # leaves the target loaded and says why. No download here: fetching a missing default model is
            # the first-run dialog's offer. Raises before the old engine is touched.
            engine = Engine.load_target(
                request.target,
                request.options,
                self.loading.progress,
                go_plain=request.go_plain and request.auto,  # a saved profile may say Auto runs plain here
                runtime=request.runtime,
                drafter=request.drafter,
                download=False,
            )
            engine.ledger_source = "app"
            drafter_spec = request.drafter  # a plain engine keeps the picker's choice
            if not engine.plain_reason:
                try:
                    engine.load_drafter(request.drafter, self.loading.progress, download=False)
                except DraftlightError as exc:
                    drafter_spec = NO_DRAFTER.name
                    notice = f"The drafter was not loaded: {exc}"
            old, self.engine = self.engine, engine
            self.target_spec, self.drafter_spec = request.target, drafter_spec
            if old is not None:
                old.close()
            if engine.plain_reason:
                return self._info()
        elif request.drafter != self.drafter_spec:
            self.engine.load_drafter(request.drafter, self.loading.progress, download=False)
            self.drafter_spec = request.drafter
        self.engine.go_plain = request.go_plain
        return self._info(notice)

    def _ledger_notice(self) -> str:
        view = self.engine.ledger_view() if self.engine is not None else None
        return view.notice() if view is not None else ""

    def _info(self, notice: str = "") -> PairInfo:
        engine = self.engine
        assert engine is not None
        if engine.plain_reason:
            verdict, ok = "No drafter loaded: plain decoding on the fastest settings (the reason is below).", True
        elif self.drafter_spec in DRAFTER_KINDS:  # a keyword kind: nothing to match
            verdict, ok = DRAFTER_KINDS[self.drafter_spec].chosen, True
        else:  # a file: what it reads of the target, if anything, then its compatibility
            verdict, ok = (engine.verdict.explain(), engine.verdict.compatible) if engine.verdict else ("", True)
            kind = DRAFTER_KINDS.get(engine.drafter.kind if engine.drafter else NO_DRAFTER.name)
            verdict = f"{kind.reads if kind else ''} {verdict}".strip()
        if engine.ctx.has_state and engine.can_speculate:  # a hybrid target: say how drafts are undone
            verdict = f"{verdict} {engine.describe_rollback()}".strip()
        drafter_name = shown_name(engine.drafter) if engine.drafter else NO_DRAFTER.name
        runs = "The pair runs" if engine.drafter is not None else "The target runs"
        verdict = f"{verdict} {runs} on {runtime_name(engine.runtime)}.".strip()
        return PairInfo(
            target=self.target_spec,
            target_name=model_title(engine.target.path, fallback=engine.target.name),
            drafter=self.drafter_spec,
            drafter_name=drafter_name,
            drafter_kind=engine.drafter.kind if engine.drafter else NO_DRAFTER.name,
            verdict=verdict,
            compatible=ok,
            mode=engine.runtime.mode(engine.options),
            notice=" ".join(part for part in (notice, engine.notice) if part),
            plain_pass_s=engine.plain_pass_s(),
            profile_basis=engine.profile_basis(),
            plain=bool(engine.plain_reason),
            n_ctx=engine.ctx.n_ctx,
            n_ctx_train=engine.target.n_ctx_train,
            unmeasured=engine.can_speculate and not engine.plain_reason and engine.saved_profile() is None,
            runtime=engine.runtime.name,
            ledger=self._ledger_notice(),
        )

    def _reply(self, request: ReplyRequest) -> Iterator[list | AutoStatus]:
        """One reply's events in batches; a lost server is said apart from other failures: worth a retry."""
        try:
            if self.remote is None:
                fitted = self._fitted(request)
                if fitted is None:
                    return
                request = fitted
            if self.remote is None and self.box.holds_auto and request.config.depth == AUTO:
                request = replace(request, config=replace(request.config, depth=0))  # plain until measured
            if self.remote is None:
                policy = self._local_policy(request)  # once a reply: the engine's stream takes it
                assert self.engine is not None  # _local_policy refuses a reply with no model loaded
                events = self.engine.reply(
                    request.messages, request.config, request.thinking, self.cancelled, policy=policy
                )
                events = self._recorded(events, request)  # kept as a replay: drafts' text is known beside the models
                auto = policy if isinstance(policy, AutoDepth) else None
            else:
                events, auto = (
                    self.remote.reply(request.messages, request.config, request.thinking, self.cancelled),
                    None,
                )
            yield from self._batches(events, auto)
            if self.remote is None:
                self.ledger_notice.emit(self._ledger_notice())
        except (ConnectionLost, Unreachable) as exc:
            self.connection_lost.emit(str(exc))

    def _fitted(self, request: ReplyRequest) -> ReplyRequest | None:
        """The request with its oldest turns left out where the conversation outgrew the context;
        None (and the sentence) where the newest message cannot fit on its own."""
        if self.engine is None:
            raise DraftlightError("No model is loaded yet.")
        n_ctx = self.engine.ctx.n_ctx
        room = reply_room(n_ctx, request.config.max_tokens)
        try:
            fitted = fit_conversation(self.engine, request.messages, n_ctx, room, request.thinking, self.cancelled)
        except MessageTooLong as exc:
            self.message_refused.emit(str(exc))
            return None
        self.prompt_fitted.emit(fitted.note())
        return replace(request, messages=fitted.messages)

    def _recorded(self, events: Iterator, request: ReplyRequest) -> Iterator:
        engine = self.engine
        assert engine is not None
        config = request.config
        settings = {"depth": config.depth, "max_tokens": config.max_tokens, "temperature": config.sampling.temperature}
        prompt = engine.render(list(request.messages), request.thinking)
        plain_s = engine.plain_pass_s()
        drafter = shown_name(engine.drafter) if engine.drafter else NO_DRAFTER.name
        return with_replay(
            events,
            engine.target.display,
            model_title(engine.target.path, fallback=engine.target.name),
            drafter,
            prompt,
            settings,
            plain_s and plain_s * 1e3,
        )

    def _batches(self, events: Iterator, auto: AutoDepth | None) -> Iterator[list | AutoStatus]:
        """A batch ends with a round (its tokens travel with it), or with a token whose server
        reports no rounds; at most 10 a second, the last with the stats. Auto's status follows each."""
        batch: list = []
        last_emit = time.perf_counter()
        try:
            for event in events:
                batch.append(event)
                ends_unit = isinstance(event, RoundEvent | RunStats) or (
                    isinstance(event, TokenEvent) and event.kind is TokenKind.UNREPORTED
                )
                if ends_unit:
                    now = time.perf_counter()
                    if isinstance(event, RunStats) or now - last_emit >= BATCH_S:
                        yield batch
                        batch, last_emit = [], now
                        if auto is not None:
                            yield self._status(auto)
        except Exception:
            if batch:  # what arrived before the failure is kept
                yield batch
            raise

    def _pass_on(self, value: list | AutoStatus) -> None:
        (self.auto_status if isinstance(value, AutoStatus) else self.events).emit(value)

    def _local_policy(self, request: ReplyRequest) -> DepthPolicy:
        """This machine's engine's depth policy for the request, before its reply: Auto's first use
        measures the box (saying so), and may find that plain decoding is faster here: the plain target
        is then loaded before the reply starts, never within it."""
        if self.engine is None:
            raise DraftlightError("No model is loaded yet.")
        engine = self.engine
        policy = engine.depth_policy(request.config.depth, progress=self._tuning)
        self.load_progress.emit(1, 1, "")
        if engine.go_plain_if_due():  # the measurement said drafts cannot pay: plain from now
            self.loaded.emit(self._info())
        return policy

    def _auto_took_over(self, auto: bool) -> str:
        """The box is measured: at Auto, its verdict now (plain where drafts cannot pay), in a sentence."""
        engine = self.engine
        if engine is None:
            return "This machine is measured."
        if not auto:
            return "This machine is measured: Auto will choose the depth from this profile when it is chosen."
        policy = engine.depth_policy(AUTO)  # reads the profile just saved
        switched = engine.go_plain_if_due()  # between replies: where drafts cannot pay, the plain target now
        self.loaded.emit(self._info())
        if isinstance(policy, AutoDepth):
            self.auto_status.emit(self._status(policy))
            return (
                f"This machine is measured: Auto takes over from the next reply, at depth {policy.depth} "
                f"for now (predicted {policy.predicted_speedup():.2f}x plain)."
            )
        said = engine.notice if switched else "replies stay plain."
        return f"This machine is measured: Auto takes over. {said[:1].upper()}{said[1:]}"

    def _tuning(self, message: str) -> None:
        self.load_progress.emit(0, 1, f"tuning to this machine: {message}")

    @staticmethod
    def _status(auto: AutoDepth) -> AutoStatus:
        return AutoStatus(
            auto.depth, auto.predicted_speedup(), auto.profile.plain_pass_s, auto.explain(), auto.profile.basis()
        )

    @Slot()
    def shutdown(self) -> None:
        """Free the models on this thread, then end the thread's event loop."""
        self.box.drop()
        if self.engine is not None:
            self.engine.close()
            self.engine = None
        self.thread().quit()
