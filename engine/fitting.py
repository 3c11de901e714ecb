"""A conversation fitted to the context: the oldest turns left out of the prompt where it has
outgrown the context, so that a long conversation goes on instead of failing for good.

The system prompt and the newest user message are always kept; turns leave from the start,
a user message with the replies that follow it, so the turns still alternate. Where the
newest message cannot fit on its own, it is refused with the figures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from engine.chat import Message
from engine.errors import ContextFullError, MessageTooLong

REPLY_SHARE = 4  # at most a quarter of the context is kept free for the reply


class PromptMaker(Protocol):
    def prompt_ids(
        self, messages: list[Message], thinking: bool = False, cancelled: Callable[[], bool] | None = None
    ) -> list[int]: ...


@dataclass(frozen=True)
class FittedConversation:
    messages: tuple[Message, ...]  # what the model reads: the system prompt and the kept turns
    prompt_tokens: int
    left_out: int  # messages of the oldest turns left out of the prompt
    n_ctx: int

    def note(self) -> str:
        """The line that says what was left out, or nothing."""
        if not self.left_out:
            return ""
        which = "oldest message was" if self.left_out == 1 else f"{self.left_out} oldest messages were"
        return f"The {which} left out of the prompt to fit the context ({self.n_ctx:,} tokens)."


def reply_room(n_ctx: int, max_tokens: int) -> int:
    """Tokens kept free after the prompt for the reply: its max tokens, a quarter of the context at most."""
    return min(max_tokens, n_ctx // REPLY_SHARE) if max_tokens > 0 else n_ctx // REPLY_SHARE


def fit_conversation(
    engine: PromptMaker,
    messages: Sequence[Message],
    n_ctx: int,
    room: int,
    thinking: bool = False,
    cancelled: Callable[[], bool] | None = None,
) -> FittedConversation:
    """The conversation with as few of its oldest turns left out as lets its prompt and `room`
    tokens of reply fit `n_ctx`; MessageTooLong where the newest message alone cannot."""
    system = [m for m in messages if m.role == "system"]
    turns = [m for m in messages if m.role != "system"]
    budget = n_ctx - room
    start = 0
    while True:
        kept = system + turns[start:]
        try:
            prompt: list[int] | None = engine.prompt_ids(kept, thinking, cancelled)
        except ContextFullError:  # more characters than the context could ever spell
            prompt = None
        if prompt is not None and len(prompt) <= budget:
            return FittedConversation(tuple(kept), len(prompt), start, n_ctx)
        later = [i for i in range(start + 1, len(turns)) if turns[i].role == "user"]
        if not later:
            raise MessageTooLong(_too_long(kept, prompt, n_ctx, room))
        start = later[0]


def _too_long(kept: list[Message], prompt: list[int] | None, n_ctx: int, room: int) -> str:
    newest = kept[-1].content if kept else ""
    size = f"{len(prompt):,} tokens" if prompt is not None else f"{len(newest):,} characters"
    return (
        f"This message is {size} with the chat template, and the context holds {n_ctx:,} tokens with "
        f"{room:,} of them kept for the reply: shorten the message, or raise the context size in Preferences."
    )
