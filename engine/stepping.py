"""One round at a time: the streaming generator, paused between rounds.

Stepping is not a second implementation: it pulls the same events `generate` yields for
streaming and hands them over a round at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from engine.events import Event, RoundEvent, RunStats, TokenEvent


@dataclass(frozen=True)
class RoundStep:
    """A finished round: what was drafted, and the tokens it emitted."""

    round: RoundEvent
    tokens: tuple[TokenEvent, ...]

    @property
    def drafts(self) -> tuple[int, ...]:
        return self.round.draft_tokens


class Stepper:
    """Rounds on demand from an event stream (engine.stream or a replay)."""

    def __init__(self, events: Iterable[Event]) -> None:
        self._events: Iterator[Event] = iter(events)
        self.stats: RunStats | None = None
        self.steps: list[RoundStep] = []

    @property
    def finished(self) -> bool:
        return self.stats is not None

    def step(self) -> RoundStep | None:
        """Run one round; None once the reply has finished (then `stats` is set)."""
        if self.stats is not None:
            return None
        tokens: list[TokenEvent] = []
        for event in self._events:
            if isinstance(event, TokenEvent):
                tokens.append(event)
            elif isinstance(event, RoundEvent):
                step = RoundStep(event, tuple(tokens))
                self.steps.append(step)
                return step
            elif isinstance(event, RunStats):
                self.stats = event
                if tokens and self.steps:  # tokens held back by a stop string end the last round
                    last = self.steps[-1]
                    self.steps[-1] = RoundStep(last.round, last.tokens + tuple(tokens))
                return None
        return None

    def close(self) -> None:
        close = getattr(self._events, "close", None)
        if close is not None:
            close()
