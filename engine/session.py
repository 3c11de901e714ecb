"""The engine a program holds: a target, an optional drafter, and conversations on them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from engine import catalog
from engine.chat import ChatTemplate, Message
from engine.compat import Verdict, check
from engine.drafters import Drafter, ModelDrafter, NgramDrafter
from engine.errors import ContextFullError, IncompatibleDrafter
from engine.events import Event, RunStats
from engine.runtime import Context, Model, RuntimeOptions
from engine.speculative import GenerationConfig, generate

# Verify batches of up to 7 rows: the most this project measured batch-invariant on a CPU
# (`draftlight doctor` checks a machine); deeper drafts rarely pay for a small drafter.
MAX_DEPTH = 6


@dataclass(frozen=True)
class PairSpec:
    """Which models to load: catalog names, 'default', paths; drafter also 'none' or 'ngram'."""

    target: str = "default"
    drafter: str = "default"


class Engine:
    """A loaded target and drafter. One reply streams at a time."""

    def __init__(self, target: Model, drafter: Drafter | None, options: RuntimeOptions, verdict: Verdict | None = None):
        self.options = options
        self.target = target
        self.drafter = drafter
        self.verdict = verdict
        self.ctx = Context(target, options, max_rows=MAX_DEPTH + 1)
        self.template = template_for(target)

    @classmethod
    def load(
        cls,
        target: str | Path = "default",
        drafter: str | Path | None = "default",
        options: RuntimeOptions | None = None,
        progress: catalog.Progress | None = None,
    ) -> Engine:
        """Resolve and load a pair; refuse an incompatible drafter with the reason."""
        options = options or RuntimeOptions()
        target_path = catalog.resolve(catalog.DEFAULT_TARGET if str(target) == "default" else target, progress)
        target_model = Model(target_path, options)
        drafter_obj, verdict = load_drafter(target_model, drafter, options, progress)
        return cls(target_model, drafter_obj, options, verdict)

    def set_drafter(self, drafter: Drafter | None, verdict: Verdict | None = None) -> None:
        old = self.drafter
        self.drafter, self.verdict = drafter, verdict
        if isinstance(old, ModelDrafter) and old is not drafter:
            old.close()

    def session(self, system: str | None = None, thinking: bool = False) -> ChatSession:
        return ChatSession(self, system, thinking)

    def render(self, messages: list[Message], thinking: bool = False) -> str:
        return self.template.render(messages, thinking=thinking)

    def tokenize_prompt(self, rendered: str) -> list[int]:
        return tokenize_prompt(self.target, rendered)

    def stream(
        self,
        prompt: list[int],
        config: GenerationConfig,
        cancelled: Callable[[], bool] = lambda: False,
        tuner=None,
    ) -> Iterator[Event]:
        """Generate after `prompt` (token ids), reusing whatever prefix the caches hold.

        With a tuner (engine.tuner.AutoDepth) the depth is chosen round by round.
        """
        if len(prompt) >= self.ctx.n_ctx:
            raise ContextFullError(
                f"The conversation is {len(prompt):,} tokens and the context holds {self.ctx.n_ctx:,}: "
                "start a new conversation, shorten the message, or raise the context size."
            )
        drafter = self.drafter if config.depth > 0 or tuner is not None else None
        if config.depth > MAX_DEPTH:
            config = replace(config, depth=MAX_DEPTH)
        t0 = time.perf_counter()
        first_row, prefilled = self.ctx.prefill(prompt)
        if drafter is not None:
            if config.depth > 0 if tuner is None else tuner.choose() > 0:
                drafter.prefill(prompt)
            else:  # Auto starts with speculation off: an empty drafter cache catches up if drafts start
                drafter.reset()
        prefill_s = time.perf_counter() - t0
        history = list(prompt)
        yield from generate(
            self.ctx,
            drafter,
            history,
            config,
            self.target.piece,
            self.target.is_eog,
            cancelled,
            prompt_tokens=prefilled,
            prefill_s=prefill_s,
            tuner=tuner,
            first_row=first_row,
        )

    def close(self) -> None:
        self.set_drafter(None)
        self.ctx.close()
        self.target.close()


def template_for(model: Model) -> ChatTemplate:
    """The model's own chat template (ChatML if it has none), with its BOS/EOS strings."""
    return ChatTemplate(
        model.info.chat_template,
        bos_token=model.display(model.bos) if model.bos >= 0 else "",
        eos_token=model.display(model.eos) if model.eos >= 0 else "",
    )


def tokenize_prompt(model: Model, rendered: str) -> list[int]:
    """Rendered chat text to tokens, special tokens parsed; BOS added where the model wants it."""
    tokens = model.tokenize(rendered, add_special=False, parse_special=True)
    if model.add_bos and (not tokens or tokens[0] != model.bos):
        tokens.insert(0, model.bos)
    return tokens


def load_drafter(
    target: Model,
    spec: str | Path | None,
    options: RuntimeOptions,
    progress: catalog.Progress | None = None,
    download: bool = True,
) -> tuple[Drafter | None, Verdict | None]:
    """'none', 'ngram', 'default', a catalog name or a path; raises IncompatibleDrafter."""
    if spec is None or str(spec) == "none":
        return None, None
    if str(spec) == "ngram":
        return NgramDrafter(), None
    path = catalog.resolve(catalog.DEFAULT_DRAFTER if str(spec) == "default" else spec, progress, download)
    model = Model(path, options)
    verdict = check(target, model)
    if not verdict.compatible:
        model.close()
        raise IncompatibleDrafter(verdict.explain())
    return ModelDrafter(model, options, max_depth=MAX_DEPTH), verdict


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
        tuner=None,
    ) -> Iterator[Event]:
        """Add a user message and stream the reply; the reply joins the conversation at the end.

        If the message cannot be sent (a template error, a full context) the conversation is
        left as it was and the error raised.
        """
        messages = [*self.messages, Message("user", text)]
        prompt = self.engine.tokenize_prompt(self.engine.render(messages, self.thinking))
        stream = self.engine.stream(prompt, config, cancelled, tuner)
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
