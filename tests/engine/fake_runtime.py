"""A runtime that returns fixed rows: the round's fast-lane tests speak to it through the protocol.

A fake model is a next-token rule, `follow(token) -> token`: the row a decode hands back for an
input token has its greedy choice at follow(token), a clear margin over its neighbours, so every
probability is well defined. The target and a drafter are two rules; where they agree the
drafter's tokens are accepted. Each acceleration of the protocol is implemented as a backend
would: the device's argmax and softmax parts (argmax_on_device), rows kept "on the device"
(keep_draft_rows), fed decodes collected later (a draft model that overlaps the verify), and
side work run in a decode's wait. Nothing here imports llama.cpp.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import numpy as np

from engine.runtime.protocol import Acceleration
from engine.runtime.side import SideWork
from engine.sampling import softmax_parts

VOCAB = 33
EOG = 32  # never a rule's choice: replies run to max_tokens


def rows_for(tokens: list[int], follow: Callable[[int], int]) -> np.ndarray:
    """The rows a decode of `tokens` hands back: each peaks at follow(token), falling off around it."""
    out = np.empty((len(tokens), VOCAB), dtype=np.float32)
    ids = np.arange(VOCAB, dtype=np.float32)
    for i, t in enumerate(tokens):
        out[i] = -0.75 * np.abs(ids - follow(t)) - 0.01 * ids
        out[i, follow(t)] = 4.0
    return out


NO_ACCELERATION = Acceleration()


@dataclass(frozen=True)
class FakeOptions:
    acceleration_asked: Acceleration = NO_ACCELERATION

    def acceleration(self) -> Acceleration:
        return self.acceleration_asked


class FakeModel:
    """A RuntimeModel: a name, a vocabulary of VOCAB tokens, a next-token rule."""

    def __init__(self, name: str, follow: Callable[[int], int], acceleration: Acceleration = NO_ACCELERATION):
        self.name = name
        self.n_vocab = VOCAB
        self.follow = follow
        self.options = FakeOptions(acceleration)

    def piece(self, token: int) -> bytes:
        return b"" if token == EOG else f"<{token}>".encode()

    def is_eog(self, token: int) -> bool:
        return token == EOG

    def eog_tokens(self) -> tuple[int, ...]:
        return (EOG,)

    def new_context(self, max_rows: int = 1, kept_rows: int = 0, options: FakeOptions | None = None) -> FakeContext:
        return FakeContext(self, max_rows, kept_rows, (options or self.options).acceleration())


class FakeContext:
    """A RuntimeContext over a FakeModel: a cache of tokens, fixed rows, every acceleration's seam."""

    def __init__(self, model: FakeModel, max_rows: int, kept_rows: int, acceleration: Acceleration) -> None:
        self.model = model
        self.acceleration = acceleration
        self.n_ctx = 512
        self.max_rows = max_rows
        self.tokens: list[int] = []
        self.decode_s = 0.0
        self.has_state = False
        self.rollback_depth = max_rows - 1
        self.kept_slots = kept_rows if acceleration.argmax_on_device and acceleration.keep_draft_rows else 0
        self.decodes: list[list[int]] = []  # every batch decoded, for the tests' asserts
        self.fed_at = 0.0
        self._rows = np.empty((0, VOCAB), dtype=np.float32)
        self._unread = 0
        self._argmax: list[int] | None = None
        self._kept: dict[int, np.ndarray] = {}

    @property
    def n_past(self) -> int:
        return len(self.tokens)

    @property
    def host_syncs(self) -> int | None:
        return None  # no device to wait for

    def pipeline_greedy(self, banned: tuple[int, ...]) -> None:
        """Nothing launched ahead: every decode is done when it returns."""

    def ban_in_rows(self, banned: tuple[int, ...]) -> bool:
        """No: the round writes the ban into the rows."""
        return False

    def defer_rows(self) -> bool:
        """No: the rows are numpy's."""
        return False

    @property
    def can_rewind(self) -> bool:
        return True

    def describe_rollback(self) -> str:
        return "Rejected drafts are dropped from the cache."

    def decode(self, tokens: list[int], all_logits: bool, side: SideWork | None = None) -> np.ndarray:
        self._decode(tokens, side)
        if side is not None and not side.running:
            side.run()  # the decode's wait, as a CPU backend runs it: after the decode, before its rows are read
        return self._rows if all_logits else self._rows[-1:]

    def feed(self, tokens: list[int], side: SideWork | None = None) -> None:
        self._decode(tokens, side)
        self._unread = len(tokens)

    @property
    def unread(self) -> bool:
        return self._unread > 0

    def collect(self, side: SideWork | None = None) -> np.ndarray:
        assert self._unread, "no fed batch to read"
        self._unread = 0
        return self._rows[-1:]

    def _decode(self, tokens: list[int], side: SideWork | None) -> None:
        assert tokens and len(tokens) <= max(self.max_rows, len(tokens))
        assert self.n_past + len(tokens) <= self.n_ctx
        if side is not None:
            side.run_reading(self)  # before this decode overwrites the rows they read
        first = self.n_past
        self.tokens.extend(tokens)
        self.decodes.append(list(tokens))
        self._rows = rows_for(tokens, self.model.follow)
        self._unread = 0
        self._argmax = [int(r.argmax()) for r in self._rows] if self.acceleration.argmax_on_device else None
        if self.kept_slots:
            for i, row in enumerate(self._rows):
                self._kept[(first + i) % self.kept_slots] = row.copy()

    def rewind(self, keep: int) -> None:
        del self.tokens[keep:]
        self._unread = 0

    def sync(self, tokens: list[int]) -> int:
        same = 0
        while same < min(len(self.tokens), len(tokens)) and self.tokens[same] == tokens[same]:
            same += 1
        self.rewind(same)
        if tokens[same:]:
            self.decode(tokens[same:], all_logits=False)
        return len(tokens) - same

    def prefill(self, tokens: list[int]) -> tuple[np.ndarray, int]:
        self.rewind(0)
        return self.decode(tokens, all_logits=False)[-1].copy(), len(tokens)

    def clear(self) -> None:
        self.tokens.clear()

    def close(self) -> None:
        pass

    def stoppable(self, cancelled: Callable[[], bool]):
        return nullcontext()

    def observe_batches(self, observer, hidden_states: bool = True) -> Callable[[], None]:
        raise NotImplementedError("no hidden states in the fake runtime")

    @contextmanager
    def observers_paused(self) -> Iterator[None]:
        yield

    def device_choices(self, banned: tuple[int, ...] = ()) -> list[int | None] | None:
        if self._argmax is None:
            return None
        return [None if t in banned else t for t in self._argmax]

    def device_parts(self, rows: np.ndarray, banned: tuple[int, ...] = ()) -> list[tuple[float, float] | None] | None:
        if self._argmax is None:
            return None
        out: list[tuple[float, float] | None] = []
        for row, t in zip(rows, self._argmax):
            if t in banned:
                out.append(None)
                continue
            masked = row.copy()
            masked[list(banned)] = -np.inf
            out.append(softmax_parts(masked))
        return out

    @property
    def keeps_rows(self) -> bool:
        return bool(self.kept_slots)

    def keep_banned(self, banned: tuple[int, ...]) -> None:
        pass

    def kept_row(self, position: int, out: np.ndarray) -> np.ndarray:
        np.copyto(out, self._kept[position % self.kept_slots])
        return out


def target_rule(token: int) -> int:
    return (3 * token + 1) % EOG


def drafter_rule(token: int) -> int:
    """The target's rule but where the token is a multiple of 5: there it drafts one past."""
    return (target_rule(token) + 1) % EOG if token % 5 == 0 else target_rule(token)


def plain_reply(prompt_last: int, n: int) -> list[int]:
    """What the target alone writes after a prompt ending in `prompt_last`."""
    out, t = [], prompt_last
    for _ in range(n):
        t = target_rule(t)
        out.append(t)
    return out
