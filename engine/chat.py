"""Chat templates, rendered in jinja2's sandbox; text made from tokens; stop strings.

A chat template ships inside the model file, so it is untrusted code: it runs only in
jinja2's ImmutableSandboxedEnvironment, any attempt to reach outside is an error, and it
renders within a budget of time and size (engine.templating).
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from dataclasses import dataclass

import jinja2
from jinja2.sandbox import SecurityError

from engine.errors import ChatTemplateError, ContextFullError, DraftlightError
from engine.runtime.protocol import TextModel
from engine.templating import MAX_ITEMS, RENDER_SECONDS, RenderBudget, Sandbox, TooLarge

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@dataclass(frozen=True)
class Message:
    role: str  # "system", "user" or "assistant"
    content: str

    def as_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


class ChatTemplate:
    """A model's chat template, compiled once in the sandbox."""

    def __init__(self, source: str | None, bos_token: str = "", eos_token: str = "") -> None:
        self.is_fallback = not source
        self.source = source or CHATML_TEMPLATE
        self.bos_token, self.eos_token = bos_token, eos_token
        self._env = Sandbox(trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
        try:
            self._template = self._env.from_string(self.source)
        except jinja2.TemplateSyntaxError as exc:
            raise ChatTemplateError(
                f"The model's chat template does not parse (line {exc.lineno}: {exc.message})."
            ) from exc
        except RecursionError as exc:  # nesting deeper than the parser's own recursion can follow
            raise ChatTemplateError("The model's chat template nests its blocks too deeply to parse.") from exc

    def render(
        self,
        messages: list[Message],
        thinking: bool = False,
        add_generation_prompt: bool = True,
        cancelled: Callable[[], bool] | None = None,
        max_chars: int = MAX_ITEMS,
        seconds: float = RENDER_SECONDS,
    ) -> str:
        """The conversation as the model expects to read it, ready for the reply.

        The render stops, with a sentence, past `seconds`, past `max_chars` of text, or as
        soon as `cancelled()` says so (engine.errors.Cancelled).
        """
        budget = RenderBudget(seconds, max_chars, cancelled)
        try:
            return self._env.render_within(
                self._template,
                budget,
                messages=[m.as_dict() for m in messages],
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                enable_thinking=thinking,
            )
        except DraftlightError:
            raise
        except RecursionError as exc:
            raise ChatTemplateError(
                "The model's chat template recursed too deeply (a macro that calls itself without end?)."
            ) from exc
        except MemoryError as exc:
            raise ChatTemplateError("The model's chat template ran out of memory and was stopped.") from exc
        except TooLarge as exc:
            raise ChatTemplateError(
                f"The model's chat template was stopped building too large a value: {exc}."
            ) from exc
        except SecurityError as exc:
            raise ChatTemplateError(
                f"The model's chat template tried to reach outside its sandbox and was stopped ({exc})."
            ) from exc
        except Exception as exc:  # a template is arbitrary code: any failure is the template's
            raise ChatTemplateError(f"The model's chat template failed: {exc}") from exc


class TextStream:
    """Token bytes in, whole UTF-8 characters out: a character split across tokens waits."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, piece: bytes, final: bool = False) -> str:
        """The whole characters `piece` completes; with `final`, a character it leaves cut is U+FFFD."""
        return self._decoder.decode(piece, final=final)

    def flush(self) -> str:
        return self._decoder.decode(b"", final=True)


class StopMatcher:
    """Finds stop strings in streamed tokens, holding back tokens whose text may begin one.

    Items are anything with a `.text`; an item is released only when no stop string can
    still start inside it. When a stop string completes, the items it touches are dropped.
    """

    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops = tuple(s for s in stops if s)
        self.held: list = []
        self._text = ""

    def push(self, item) -> tuple[list, bool]:
        """Add an item; return (items now safe to release, whether a stop string completed)."""
        if not self.stops:
            return [item], False
        self.held.append(item)
        self._text += item.text
        cut = min((self._text.index(s) for s in self.stops if s in self._text), default=-1)
        if cut >= 0:
            released = self._release(cut)
            self.held, self._text = [], ""
            return released, True
        return self._release(len(self._text) - self._pending()), False

    def push_all(self, items: list) -> tuple[list, bool]:
        """push() each item in turn, up to a stop string's end: the items now safe to release, and
        whether a stop string completed (the items after it are dropped)."""
        if not self.stops:
            return items, False
        released: list = []
        for item in items:
            out, stopped = self.push(item)
            released += out
            if stopped:
                return released, True
        return released, False

    def flush(self) -> list:
        """The stream ended with no stop: everything held is the model's text."""
        released, self.held, self._text = self.held, [], ""
        return released

    def _pending(self) -> int:
        """Length of the longest tail of the held text that begins some stop string."""
        best = 0
        for stop in self.stops:
            for n in range(min(len(stop) - 1, len(self._text)), best, -1):
                if self._text.endswith(stop[:n]):
                    best = n
                    break
        return best

    def _release(self, upto: int) -> list:
        released, used = [], 0
        while self.held and used + len(self.held[0].text) <= upto:
            item = self.held.pop(0)
            used += len(item.text)
            released.append(item)
        self._text = self._text[used:]
        return released


def template_for(model: TextModel) -> ChatTemplate:
    """The model's own chat template (ChatML if it has none), with its BOS/EOS strings."""
    return ChatTemplate(
        model.chat_template,
        bos_token=model.display(model.bos) if model.bos >= 0 else "",
        eos_token=model.display(model.eos) if model.eos >= 0 else "",
    )


def check_fits(model: TextModel, size: int, max_tokens: int, unit: str = "bytes") -> None:
    """Refuse `size` bytes (or characters, each at least a byte) of text that `max_tokens` tokens cannot spell."""
    # A text no longer than the context in bytes always passes: the vocabulary is scanned only past that.
    if size > max_tokens and size > max_tokens * model.longest_piece:
        raise ContextFullError(
            f"The conversation is {size:,} {unit} of text, more than {max_tokens:,} tokens can spell "
            f"(no token of {model.name} is longer than {model.longest_piece} bytes): "
            "start a new conversation, shorten the message, or raise the context size."
        )


def tokenize_prompt(model: TextModel, rendered: str, max_tokens: int | None = None) -> list[int]:
    """Rendered chat text to tokens, special tokens parsed; BOS added where the model wants it.

    With `max_tokens` (the context), text that cannot fit is refused before it is tokenized:
    no token spells more bytes than the vocabulary's longest, so text longer than
    max_tokens times that many bytes needs more tokens than the context holds. (Tokenizing
    50 MB took 15-38 s and gigabytes only to be refused afterwards.)
    """
    try:
        size = len(rendered.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ChatTemplateError(
            f"The conversation holds text that is not valid Unicode (at character {exc.start:,}): "
            "send it again as UTF-8 text."
        ) from None
    if max_tokens is not None:
        check_fits(model, size, max_tokens)
    tokens = model.tokenize(rendered, add_special=False, parse_special=True)
    if not tokens and not model.add_bos:
        raise ChatTemplateError(
            "The model's chat template rendered the conversation as no text at all, so the model has "
            "nothing to read: the model file's template is faulty."
        )
    if model.add_bos and (not tokens or tokens[0] != model.bos):
        tokens.insert(0, model.bos)
    return tokens
