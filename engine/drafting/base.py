"""The drafter protocol: propose up to k tokens, learn what the target kept, rewind.

A drafter never runs a target pass of its own. One that reads the target's hidden states
(an MTP head, an assistant model, EAGLE-3, DFlash) gets them from the round's verify
batch, handed over in `VerifyBatch` after the walk.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Protocol, TypeVar

import numpy as np

from engine.runtime.protocol import DeviceDraft, RuntimeContext
from engine.runtime.side import SideWork
from engine.sampling import Sampler, softmax_at, softmax_parts


class Rows(Protocol):
    """A draft's logits rows, one a position: an array, or rows fetched when read (KeptRows)."""

    def __len__(self) -> int: ...

    def __getitem__(self, i: int) -> np.ndarray: ...


@dataclass
class Draft:
    """Proposed tokens with what the drafter knew when it proposed them."""

    tokens: list[int] = field(default_factory=list)
    # The drafter's logits row at each position (copies, or rows the device kept, fetched when
    # read), or None for a drafter with no distribution. Probabilities are computed from them
    # only when something asks; a greedy draft's own token's is its row's parts alone.
    rows: Rows | None = None
    sampler: Sampler | None = None
    # The first draft's row was in hand when the round began: during the last round's verify the
    # drafter guessed the target's token, and guessed right (ModelDrafter), so it took no step.
    guessed: bool = field(default=False, kw_only=True)
    # softmax_parts per row: where the device took the row's softmax (Context.device_parts), from
    # the start; else computed when first asked for
    parts: dict[int, tuple[float, float]] = field(default_factory=dict, kw_only=True)
    # Each token is its row's argmax (a greedy draft model's, the ban written in): its own
    # probability is then its row's parts alone, and a row the device kept is not fetched for it.
    argmax_tokens: bool = field(default=False, kw_only=True)
    _dists: dict[int, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.tokens)

    def distribution(self, i: int) -> np.ndarray | None:
        """The drafter's distribution at position i (what its token was drawn from)."""
        if self.rows is None or self.sampler is None:
            return None
        dist = self._dists.get(i)
        if dist is None:
            dist = self.sampler.distribution(self.rows[i])
            self._dists[i] = dist
        return dist

    def probs(self, tokens: Sequence[int | None]) -> list[float | None]:
        """The drafter's probability of tokens[i] at position i (None where none is asked), all at once."""
        if self.rows is None or self.sampler is None:
            return [None] * len(tokens)
        wanted = [(i, t) for i, t in enumerate(tokens) if t is not None]
        out: list[float | None] = [None] * len(tokens)
        if not self.sampler.greedy or any(i in self._dists for i, _ in wanted):
            for i, t in wanted:
                dist = self.distribution(i)
                assert dist is not None  # rows and sampler are set: checked above
                out[i] = float(dist[t])
            return out
        for i, t in wanted:
            if self.argmax_tokens and t == self.tokens[i]:  # exp(0) over the normaliser
                out[i] = 1.0 / self._part(i)[1]
            else:
                out[i] = softmax_at(self.rows[i], t, self._part(i))
        return out

    def confidences(self) -> tuple[float, ...]:
        """The drafter's top probability at each position (softmax at temperature 1): what p_min
        tests before drafting on. Empty for a drafter with no distribution."""
        if self.rows is None or self.sampler is None:
            return ()
        return tuple(1.0 / self._part(i)[1] for i in range(len(self.tokens)))

    def rank(self, i: int, token: int) -> int | None:
        """Where `token` stood among the drafter's candidates at position i: 1 is its first choice."""
        if self.rows is None:
            return None
        row = self.rows[i]
        return 1 + int(np.count_nonzero(row > row[token]))

    def unread(self) -> DeviceDraft | None:
        """The draft's ids still on the device, for a verify there to take in unread; None once read."""
        return None

    def settle(self, waited: bool = False) -> None:
        """Read what is still on the device (UnreadDraft); a draft made on the host has nothing to read."""

    def _part(self, i: int) -> tuple[float, float]:
        parts = self.parts.get(i)
        if parts is None:
            rows = self.rows
            assert rows is not None  # every caller returns early on a draft without rows
            parts = self.parts[i] = softmax_parts(rows[i])
        return parts

    def prepare(self) -> None:
        """Do the costly half of every row's probabilities now (greedy), so probs() is a lookup later.
        The round runs this while the target verifies the draft on an accelerator."""
        if self.rows is None or self.sampler is None or not self.sampler.greedy:
            return
        for i in range(len(self.tokens)):
            if i not in self.parts:
                self.parts[i] = softmax_parts(self.rows[i])


class UnreadDraft(Draft):
    """A Draft whose tokens and rows are still on the device: read on first use (one host sync), or
    with the verify's own rows where the verify took the ids in unread (RuntimeContext.decode_unread)."""

    def __init__(self, launched: DeviceDraft, sampler: Sampler) -> None:
        self._launched: DeviceDraft | None = launched
        super().__init__([], None, sampler, argmax_tokens=True)

    @property
    def tokens(self) -> list[int]:
        self.settle()
        return self._tokens

    @tokens.setter
    def tokens(self, value: list[int]) -> None:
        self._tokens = value

    @property
    def rows(self) -> Rows | None:
        self.settle()
        return self._rows

    @rows.setter
    def rows(self, value: Rows | None) -> None:
        self._rows = value

    def unread(self) -> DeviceDraft | None:
        return self._launched

    def settle(self, waited: bool = False) -> None:
        """Read the ids and rows (`waited`: the device has them, as after the verify's wait)."""
        launched, self._launched = self._launched, None
        if launched is not None:
            self._tokens, self._rows = launched.read(waited)
            self.parts.update(enumerate(launched.row_parts or ()))  # the device's, where it took them


@dataclass(frozen=True)
class VerifyBatch:
    """What the target's verify pass saw, for a drafter that learns from it.

    `tokens` were decoded at positions start, start+1, ...: the last committed token, then
    the drafts. `accepted` drafts were kept. `hidden` holds the target's hidden state per
    row where the drafter asked for them (`needs_hidden_states`) and the target context
    outputs them; None otherwise.
    """

    tokens: tuple[int, ...]
    start: int
    accepted: int
    hidden: np.ndarray | None = None


class DrafterContext(Protocol):
    """What the round reads of a drafter's own context: its time inside the backend."""

    decode_s: float


class Drafter(Protocol):
    """What the round needs from a drafter: everything it uses is declared here."""

    name: str
    kind: str  # its kind's name in engine.drafting.kinds: what the status bar and charts call it
    has_distribution: bool
    needs_hidden_states: bool  # True: the round hands the verify batch's hidden states to `verified`
    max_depth: int  # the most tokens one draft holds (chained heads: one a head); the round asks no more
    # Takes in its round's last draft during the verify (a draft model on CUDA): the round's side
    # work then carries that decode, so a reply makes side work for it.
    overlaps: bool

    @property
    def ctx(self) -> DrafterContext | None:
        """Its own context, whose time inside the backend the round counts as the drafter's; None for a
        drafter that decodes nothing (n-grams). Where it has one, the next decode after a round is
        its own, so the round may leave the target's rows in place for side work to read."""
        ...

    def prefill(self, history: list[int]) -> None:
        """Make the cache hold every committed token but the last, reusing what matches."""

    def draft(
        self,
        history: list[int],
        k: int,
        sampler: Sampler,
        p_min: float = 0.0,
        banned: tuple[int, ...] = (),
        side: SideWork | None = None,
    ) -> Draft:
        """Propose up to k tokens to follow history (every committed token), never a banned one.
        `side` is the reply's side work, for a drafter whose steps run in a decode's wait."""

    def verified(self, batch: VerifyBatch) -> None:
        """The target's verdict on the last draft, with the verify batch's rows where asked for."""

    def rewind(self, keep: int) -> None:
        """Forget positions from `keep` on."""

    def reset(self) -> None:
        """Forget everything (a new conversation)."""

    def stoppable(self, cancelled: Callable[[], bool]) -> AbstractContextManager[None]:
        """Its decodes inside end as soon as `cancelled()` says so (a prompt's prefill)."""

    def close(self) -> None:
        """Free what it holds; it drafts no more."""


class OwnPace:
    """Defaults for a drafter whose steps leave nothing to side work and need no Stop of their own
    (their decodes are short): the n-gram table, MTP heads, DFlash, EAGLE-3."""

    overlaps = False
    folder: Path | None = None  # where it came from, if a folder of its own (MLX): the ledger fingerprints it

    def stoppable(self, cancelled: Callable[[], bool]) -> AbstractContextManager[None]:
        return nullcontext()


Target = TypeVar("Target", bound=RuntimeContext)


class OnTarget(OwnPace, Generic[Target]):
    """A drafter on the target's own states (MTP heads, DFlash, EAGLE-3, an assistant; either runtime).
    Their `draft` is one: a draft ends where the target's context does, so k is cut to the positions
    it can still verify, and `_draft` drafts the 1 to k tokens left, inside `failing`."""

    target: Target

    def draft(
        self,
        history: list[int],
        k: int,
        sampler: Sampler,
        p_min: float = 0.0,
        banned: tuple[int, ...] = (),
        side: SideWork | None = None,
    ) -> Draft:
        k = min(k, self.target.n_ctx - len(history))
        if k <= 0:
            return Draft()
        with self.failing():
            return self._draft(history, k, sampler, p_min, banned)

    def _draft(self, history: list[int], k: int, sampler: Sampler, p_min: float, banned: tuple[int, ...]) -> Draft:
        raise NotImplementedError

    def failing(self) -> AbstractContextManager[None]:
        """Where a pass of the drafter's fails, what it raises becomes a sentence: llama.cpp's decodes
        say their own; an MLX drafter names itself (decode_errors)."""
        return nullcontext()


def choose_draft(
    row: np.ndarray,
    logits: np.ndarray,
    sampler: Sampler,
    p_min: float,
    banned: tuple[int, ...],
    copy: bool = True,
    top: int | None = None,
    parts: tuple[float, float] | None = None,
) -> int | None:
    """A drafter's token at one position, from its logits (copied into `row`, which the Draft keeps).

    Banned tokens get no probability; the token is the argmax, or a draw when sampling;
    None where the drafter's top probability is below p_min (stop drafting). With
    copy=False (greedy) the choice is made on `logits` in place, banned tokens set there,
    and the caller copies it into `row` later, before the drafter decodes again. `top` is
    the greedy token the device already chose from `logits` (Context.device_choices), and `parts`
    the row's softmax_parts where known (Context.device_parts): p_min then reads no row.
    """
    if copy or not sampler.greedy:
        np.copyto(row, logits)
        logits = row
    if banned:
        logits[list(banned)] = -np.inf
    if not sampler.greedy:
        token = sampler.draw(sampler.distribution(logits))
    elif top is not None:
        token = top
    else:
        token = int(logits.argmax())
    if p_min > 0.0 and 1.0 / (parts[1] if parts is not None else float(np.exp(logits - logits.max()).sum())) < p_min:
        return None
    return token
