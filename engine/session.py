"""The engine a program holds: a target, an optional drafter, and conversations on them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from pathlib import Path

from engine.chat import Message, check_fits, template_for, tokenize_prompt
from engine.depth import MAX_DEPTH, DepthPolicy
from engine.drafting import Drafter
from engine.errors import Cancelled, ContextFullError
from engine.events import Event, FinishReason, RunStats
from engine.ledger import recording
from engine.measure.auto import AutoDepth
from engine.measure.probe import ProbeResult, batch_invariance
from engine.models import catalog
from engine.models.compat import Verdict
from engine.pairloading import converter, load_drafter, plain_reason_for
from engine.pairmeasure import PairMeasuring, ProfileProgress
from engine.reporting import run_stats
from engine.rounds import GenerationConfig, Prefill
from engine.runtime import Model, RuntimeOptions
from engine.runtime.loading import AUTO as AUTO_RUNTIME
from engine.runtime.loading import chosen_runtime, load_model, runtime_of
from engine.runtime.protocol import TextModel
from engine.runtime.runtimes import Runtime
from engine.speculative import generate


class Engine(PairMeasuring):
    """A loaded target and drafter. One reply streams at a time. Its box profile, Auto and ledger
    methods (auto_depth, depth_policy, saved_profile, ledger_view, ...) are in engine.pairmeasure."""

    def __init__(
        self, target: TextModel, drafter: Drafter | None, options: RuntimeOptions, verdict: Verdict | None = None
    ):
        self.options = options  # what was asked for; the target's own (target.options) are its runtime's
        self.target = target
        self.drafter = drafter
        self.verdict = verdict
        self.ctx = target.new_context(max_rows=MAX_DEPTH + 1)
        self.template = template_for(target)
        self._auto = None  # built on the first Auto reply, kept for the pair
        # Where the box profile says no depth could beat plain decoding (a draft model on a
        # CPU where a second row costs a whole pass), an Auto reply drops the drafter and runs
        # plain on llama.cpp's fastest settings. The command line and the app ask for this;
        # a program using the engine gets exactly the pair it loaded unless it does too.
        self.go_plain = False
        self.plain_reason = ""  # why this engine runs plain, once it does
        # Why an Auto reply found that no depth can pay here, until go_plain_if_due acts on it: switching
        # is a reload, which a caller asks for between replies, never the depth policy within one.
        self.plain_due = ""
        self.profile_notice = ""  # why the box profile was refused or found wrong, once it was
        # Who is replying, as the acceptance ledger names it: chat, app, serve, lab, pair, bench.
        self.ledger_source = "engine"
        self._identity = None  # both files', for the ledger

    @classmethod
    def load(
        cls,
        target: str | Path = "default",
        drafter: str | Path | None = "default",
        options: RuntimeOptions | None = None,
        progress: catalog.Progress | None = None,
        go_plain: bool = False,
        runtime: str = AUTO_RUNTIME,
    ) -> Engine:
        """Resolve and load a pair; refuse an incompatible drafter with the reason.

        `runtime` is "llama", "mlx" or "auto" (the target's format decides: engine.runtime.loading);
        the drafter runs on the target's runtime. With `go_plain` (replies at Auto depth), a pair
        whose saved profile says speculation cannot pay here loads as a plain target on the fastest
        settings, the drafter unloaded.
        """
        engine = cls.load_target(target, options, progress, go_plain, runtime, drafter)
        if engine.plain_reason:
            return engine
        try:
            engine.load_drafter(drafter, progress)
        except BaseException:
            engine.close()
            raise
        return engine

    @classmethod
    def load_target(
        cls,
        target: str | Path = "default",
        options: RuntimeOptions | None = None,
        progress: catalog.Progress | None = None,
        go_plain: bool = False,
        runtime: str = AUTO_RUNTIME,
        drafter: str | Path | None = None,
        download: bool = True,
    ) -> Engine:
        """The target alone, on its runtime (Engine.load's first half, which the app calls too). With
        `go_plain`, a pair with `drafter` whose saved profile says speculation cannot pay here loads
        plain on the fastest settings (`plain_reason` says why); `load_drafter` then adds nothing."""
        options = options or RuntimeOptions()
        spec = catalog.DEFAULT_TARGET if str(target) == "default" else target
        target_path = catalog.resolve(spec, progress, download)
        chosen = chosen_runtime(target_path, runtime)
        # Running plain on the fastest settings is a choice of a runtime with modes (llama.cpp's).
        reason = plain_reason_for(target_path, drafter, options) if go_plain and chosen.has_modes else ""
        if reason:
            return cls.plain(target_path, options, reason)
        engine = cls(load_model(target_path, chosen, options, converter(progress)), None, options)
        engine.go_plain = go_plain
        return engine

    def load_drafter(
        self, spec: str | Path | None, progress: catalog.Progress | None = None, download: bool = True
    ) -> None:
        """The drafter `spec` names, checked against the target and set (engine.pairloading.load_drafter);
        IncompatibleDrafter, or another DraftlightError, in a sentence where it cannot draft here."""
        self.set_drafter(*load_drafter(self.target, spec, self.options, progress, download, target_ctx=self.ctx))

    @classmethod
    def plain(cls, target_path: Path, options: RuntimeOptions, reason: str) -> Engine:
        """The target alone on llama.cpp's fastest plain settings, where `reason` says drafts cannot pay."""
        fast = replace(options, exact=False)
        engine = cls(Model(target_path, fast), None, fast)
        engine.go_plain, engine.plain_reason = True, reason
        return engine

    def set_drafter(self, drafter: Drafter | None, verdict: Verdict | None = None) -> None:
        old = self.drafter
        self.drafter, self.verdict = drafter, verdict
        self._auto, self._identity, self.plain_due = None, None, ""
        if old is not None and old is not drafter:
            old.close()

    def swap_drafter(self, drafter: Drafter | None) -> None:
        """Use another drafter the caller keeps (and closes): the ruler's arms share one engine."""
        self.drafter, self._auto, self._identity = drafter, None, None

    @property
    def runtime(self) -> Runtime:
        """The runtime the pair runs on (its `name`: "llama" or "mlx")."""
        return runtime_of(self.target)

    @property
    def notice(self) -> str:
        """A sentence the user needs before replying, or "": why speculation is off, or that the drafter
        was made for another target."""
        if self.plain_reason or self.plain_due or self.profile_notice:
            return " ".join(x for x in (self.plain_reason or self.plain_due, self.profile_notice) if x)
        made_for = self.verdict.made_for if self.verdict is not None and self.drafter is not None else ""
        rollback = "" if self.ctx.can_rewind or self.drafter is None else self.ctx.describe_rollback()
        return " ".join(x for x in (made_for, rollback) if x)

    def run_plain(self, reason: str) -> None:
        """Drop the drafter and decode on llama.cpp's fastest plain settings (repacked weights, an
        f16 cache): with no verify batches, exactness is not at stake. MLX has one way to run."""
        fast = replace(self.options, exact=False)
        if fast != self.options and self.runtime.has_modes:
            target = self.runtime.load(self._target_path(), fast)
            try:
                ctx = target.new_context(max_rows=MAX_DEPTH + 1)
            except BaseException:
                target.close()
                raise
            self.set_drafter(None)
            self.ctx.close()
            self.target.close()
            self.target, self.ctx, self.options = target, ctx, fast
        self.set_drafter(None)
        self.plain_reason = reason

    def go_plain_if_due(self) -> bool:
        """Where an Auto reply found that no depth can pay here (`plain_due`), drop the drafter and reload
        the target on the fastest plain settings (run_plain). A reload: callers ask for it between replies
        (`draftlight chat` and the app, once Auto has measured the box). Whether it switched."""
        if not self.plain_due:
            return False
        reason, self.plain_due = self.plain_due, ""
        self.run_plain(reason)
        return True

    @property
    def cached_tokens(self) -> tuple[int, ...]:
        """The tokens the target's cache holds now: what the next prompt can reuse."""
        return tuple(self.ctx.tokens)

    def forget(self) -> None:
        """Empty both caches, so the next reply prefills its whole prompt (like-with-like runs)."""
        self.ctx.clear()
        if self.drafter is not None:
            self.drafter.reset()

    def probe_batch_invariance(self, prompt: list[int]) -> ProbeResult:
        """Whether a verify batch computes each row as a single-row pass does, on this prompt."""
        return batch_invariance(self.ctx, prompt)

    def session(self, system: str | None = None, thinking: bool = False) -> ChatSession:
        return ChatSession(self, system, thinking)

    def render(
        self, messages: list[Message], thinking: bool = False, cancelled: Callable[[], bool] | None = None
    ) -> str:
        """The conversation through the model's template, within its budget; `cancelled` ends it at once."""
        check_fits(self.target, sum(len(m.content) for m in messages), self.ctx.n_ctx, "characters")
        return self.template.render(messages, thinking=thinking, cancelled=cancelled)

    def tokenize_prompt(self, rendered: str) -> list[int]:
        """The rendered conversation as the target's token ids; refused unread where it cannot fit."""
        return tokenize_prompt(self.target, rendered, max_tokens=self.ctx.n_ctx)

    def prompt_ids(
        self, messages: list[Message], thinking: bool = False, cancelled: Callable[[], bool] | None = None
    ) -> list[int]:
        """A conversation as the target's prompt: rendered through its template, then tokenized.
        Every caller that starts a reply from messages (the app, the server, the lab, the ruler)
        makes its prompt here, so the same messages give the same bytes everywhere."""
        return self.tokenize_prompt(self.render(list(messages), thinking, cancelled))

    def reply(
        self,
        messages: Sequence[Message],
        config: GenerationConfig,
        thinking: bool = False,
        cancelled: Callable[[], bool] = lambda: False,
        progress: ProfileProgress | None = None,
        policy: DepthPolicy | None = None,
    ) -> Iterator[Event]:
        """The reply to a conversation, as a remote engine's `reply` streams it: its events, ending
        with RunStats. The caches keep whatever prefix the last reply left."""
        prompt = self.prompt_ids(list(messages), thinking, cancelled)
        return self.stream(prompt, config, cancelled, progress, policy=policy)

    def stream(
        self,
        prompt: list[int],
        config: GenerationConfig,
        cancelled: Callable[[], bool] = lambda: False,
        progress: ProfileProgress | None = None,
        source: str | None = None,
        policy: DepthPolicy | None = None,
    ) -> Iterator[Event]:
        """Generate after `prompt` (token ids), reusing whatever prefix the caches hold. The finished
        reply's acceptance goes to the ledger under `source` (default: `ledger_source`). `policy`: the
        reply's depth policy where the caller asked for it already (depth_policy), else asked here."""
        if len(prompt) >= self.ctx.n_ctx:
            raise ContextFullError(
                f"The conversation is {len(prompt):,} tokens and the context holds {self.ctx.n_ctx:,}: "
                "start a new conversation, shorten the message, or raise the context size."
            )
        if policy is None:
            policy = self.depth_policy(config.depth, progress)
        if isinstance(policy, AutoDepth):
            policy.for_reply(config.sampling.greedy)
        drafter = self.drafter if policy.setting != 0 else None
        t0 = time.perf_counter()
        reads_target = self.drafter is not None and self.drafter.needs_hidden_states
        if reads_target:  # its head must see the whole prompt pass: no cached prefix it missed
            self.forget()
        if reads_target and drafter is None:  # a plain reply: the head is not fed (the next reply forgets)
            yield from self._unobserved(prompt, policy, config, cancelled, t0)
            return
        try:
            with self.ctx.stoppable(cancelled), _stoppable(drafter, cancelled):
                first_row, prefilled = self.ctx.prefill(prompt)
                if reads_target:  # it was fed the prompt's pass; it says so, or refuses in a sentence
                    assert drafter is not None  # a reply without it returned above (_unobserved)
                    drafter.prefill(prompt)
                if drafter is not None and not reads_target:
                    if policy.choose() > 0:
                        drafter.prefill(prompt)
                    else:  # Auto starts with speculation off: an empty drafter cache catches up if drafts start
                        drafter.reset()
        except Cancelled:
            if drafter is not None:
                drafter.reset()  # its cache may hold part of the prompt: the next reply starts it afresh
            yield self._stopped_in_prefill(policy, t0)
            return
        prefill = Prefill(prefilled, time.perf_counter() - t0, first_row)
        for event in generate(self.ctx, drafter, policy, list(prompt), config, cancelled, prefill):
            if isinstance(event, RunStats):
                self.check_profile(event, policy)
                if drafter is not None:
                    setup = self.ledger_setup(event, config.sampling.temperature)
                    recording.record(setup, event, source or self.ledger_source)
            yield event

    def _unobserved(self, prompt, policy, config, cancelled, t0: float) -> Iterator[Event]:
        """A plain reply whose decodes a drafter reading the target does not watch: paused only while
        this reply computes, never while it waits (the teaching view holds a reply between steps)."""
        try:
            with self.ctx.observers_paused(), self.ctx.stoppable(cancelled):
                first_row, prefilled = self.ctx.prefill(prompt)
        except Cancelled:
            yield self._stopped_in_prefill(policy, t0)
            return
        prefill = Prefill(prefilled, time.perf_counter() - t0, first_row)
        reply = generate(self.ctx, None, policy, list(prompt), config, cancelled, prefill)
        while True:
            with self.ctx.observers_paused():
                event = next(reply, None)
            if event is None:
                return
            yield event

    def _stopped_in_prefill(self, policy: DepthPolicy, t0: float) -> RunStats:
        """A reply stopped while its prompt was read: no tokens, finish CANCELLED."""
        return run_stats(
            [], FinishReason.CANCELLED, policy.setting, [], "", Prefill(0, time.perf_counter() - t0), self.ctx.n_ctx
        )

    def close(self) -> None:
        self.set_drafter(None)
        self.ctx.close()
        self.target.close()


def _stoppable(drafter: Drafter | None, cancelled: Callable[[], bool]) -> AbstractContextManager[None]:
    return drafter.stoppable(cancelled) if drafter is not None else nullcontext()


class ChatSession:
    """A conversation. Follow-ups prefill only what the caches do not already hold."""

    def __init__(self, engine: Engine, system: str | None = None, thinking: bool = False) -> None:
        self.engine = engine
        self.thinking = thinking
        self.messages: list[Message] = [Message("system", system)] if system else []
        self.last_stats: RunStats | None = None

    def send(
        self,
        text: str,
        config: GenerationConfig,
        cancelled: Callable[[], bool] = lambda: False,
        progress: ProfileProgress | None = None,
        policy: DepthPolicy | None = None,
    ) -> Iterator[Event]:
        """Add a user message and stream the reply; the reply joins the conversation at the end.

        If the message cannot be sent (a template error, a full context) the conversation is
        left as it was and the error raised.
        """
        messages = [*self.messages, Message("user", text)]
        # No `cancelled` for the render (its budget ends it in seconds): a Stop in the prefill gives a cancelled reply.
        prompt = self.engine.prompt_ids(messages, self.thinking)
        stream = self.engine.stream(prompt, config, cancelled, progress, policy=policy)
        self.messages = messages
        reply: RunStats | None = None
        try:
            for event in stream:
                if isinstance(event, RunStats):
                    reply = event
                yield event
        finally:
            if reply is not None:
                self.messages.append(Message("assistant", reply.text))
                self.last_stats = reply
            elif self.messages and self.messages[-1].role == "user":
                self.messages.pop()  # the reply never came: the message can be sent again

    def reset(self) -> None:
        self.messages = [m for m in self.messages if m.role == "system"]
