"""How many tokens to draft each round: one cap, one spelling of Auto, one policy protocol.

A user asks for a `Depth`: a whole number 0..MAX_DEPTH (0 turns speculation off) or AUTO.
The engine turns that into a `DepthPolicy` once, where a reply is asked for: a fixed depth,
or the tuner's `AutoDepth` (engine.measure.auto), which chooses round by round and is told
how each round went. With no drafter every policy is FixedDepth(0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

# Verify batches of up to 7 rows: the most this project measured batch-invariant on a CPU
# (`draftlight doctor` checks a machine); deeper drafts rarely pay for a small drafter.
MAX_DEPTH = 6
AUTO: Literal["auto"] = "auto"

Depth = int | Literal["auto"]


@dataclass(frozen=True)
class RoundSeconds:
    """What a round's parts took: drafting, the verify pass, the accept walk with its rewinds."""

    draft: float
    verify: float
    commit: float


class DepthPolicy(Protocol):
    """Chooses each round's depth; learns from what the round drafted and kept."""

    @property
    def setting(self) -> Depth:
        """What the user asked for: a fixed depth or AUTO (RunStats.depth reports it)."""

    def choose(self) -> int:
        """The depth for the next round, 0..MAX_DEPTH."""

    def observe(self, drafted: int, accepted: int, seconds: RoundSeconds | None = None) -> None:
        """How the last round went, and what its parts took."""


@dataclass(frozen=True)
class FixedDepth:
    """The same depth every round."""

    depth: int

    def __post_init__(self) -> None:
        if not 0 <= self.depth <= MAX_DEPTH:
            raise ValueError(f"depth must be 0-{MAX_DEPTH}, not {self.depth}")

    @property
    def setting(self) -> Depth:
        return self.depth

    def choose(self) -> int:
        return self.depth

    def observe(self, drafted: int, accepted: int, seconds: RoundSeconds | None = None) -> None:
        pass


def parse_depth(value: str | int) -> Depth:
    """'auto' or a whole number 0..MAX_DEPTH (command line, saved preferences); ValueError otherwise."""
    if value == AUTO:
        return AUTO
    try:
        depth = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"depth must be 0-{MAX_DEPTH} or {AUTO}, not {value!r}") from None
    if not 0 <= depth <= MAX_DEPTH:
        raise ValueError(f"depth must be 0-{MAX_DEPTH} or {AUTO}, not {depth}")
    return depth


def describe_depth(depth: Depth) -> str:
    """The depth as the command line writes it: 0..MAX_DEPTH or auto."""
    return str(depth)
