"""A draft model: a small model of the target's family proposes tokens one at a time."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import NamedTuple

import numpy as np

from engine.depth import MAX_DEPTH
from engine.drafting import kindnames
from engine.drafting.base import Draft, UnreadDraft, VerifyBatch, choose_draft
from engine.runtime.protocol import MAX_BANNED, Acceleration, RunOptions, RuntimeContext, TextModel
from engine.runtime.side import SideWork
from engine.sampling import Sampler


class HeldRow(NamedTuple):
    """A guess's row, copied during the verify into the first row of the rows the next round drafts into."""

    position: int  # the guess's
    top: int | None  # the device's greedy token for it, where it chose one
    parts: tuple[float, float] | None  # its softmax_parts, where the device took them
    rows: int  # the set of rows (ModelDrafter._rows) that holds it


class ModelDrafter:
    """A small model of the target's family proposes tokens one at a time, on a context of its own
    that it opens on any runtime (RuntimeModel.new_context)."""

    kind = kindnames.MODEL
    has_distribution = True
    needs_hidden_states = False

    def __init__(self, model: TextModel, options: RunOptions | None = None, max_depth: int = MAX_DEPTH) -> None:
        self.model = model
        self.name = model.name
        self.max_depth = max_depth
        # Where the device keeps the drafts' rows (keep_draft_rows), a slot a position: a round's
        # rows, its last draft's (decoded during the verify) and the guess's after it.
        kept = max_depth + 2 if (options or model.options).acceleration().keep_draft_rows else 0
        self.ctx: RuntimeContext = model.new_context(max_rows=1, kept_rows=kept, options=options)
        acceleration = self.ctx.acceleration
        self.overlaps, self.shape = step_plan(acceleration, self.ctx.has_state)
        self.guesses = self.overlaps and acceleration.guess_outcome
        # The drafts' rows, two rounds' worth: a round drafts into the set the round before did not,
        # so a guess's row can be copied for the next round while this round's are still read.
        # Where the device keeps them, a row comes here only when read (KeptRows).
        self._rows = np.empty((2, max_depth, model.n_vocab), dtype=np.float32)
        self._turn = 0  # the set the latest draft wrote
        # The token this drafter guessed the target would choose after the last round's drafts,
        # and its position: decoded during the verify, its row still to be collected.
        self._guess: tuple[int, int] | None = None
        # Where the guess's row was collected during the verify after all.
        self._held: HeldRow | None = None
        self.guesses_made = self.guesses_kept = 0

    def prefill(self, history: list[int]) -> None:
        self._guess = self._held = None
        self.ctx.sync(history[:-1])

    def draft(
        self,
        history: list[int],
        k: int,
        sampler: Sampler,
        p_min: float = 0.0,
        banned: tuple[int, ...] = (),
        side: SideWork | None = None,
    ) -> Draft:
        k = min(k, self.ctx.n_ctx - len(history))
        if k <= 0:
            return Draft()
        ctx = self.ctx
        width = self.shape
        self._turn ^= 1
        rows = self._rows[self._turn]
        chained = self._chained(history, k, sampler, p_min, banned)
        if chained is not None:
            return chained
        first = len(history) - 1  # the position of this round's first row, where the device keeps them
        if ctx.keeps_rows:
            ctx.keep_banned(_kept_ban(banned))
        logits, held = self._guessed_row(history, side)
        guessed = logits is not None
        if logits is None:
            # The cache holds a prefix of history (the round rewound it); feed the rest, the
            # last committed token at least. With a steady shape every batch is the last two
            # tokens: a row already cached is decoded again, to the same keys and values.
            if ctx.n_past > len(history) - width:
                ctx.rewind(max(0, len(history) - width))
            logits = ctx.decode(history[ctx.n_past :], all_logits=False, side=side)
        # after the first decode: a context's first checks the device, and one that errs is detached
        kept = KeptRows(ctx, first, rows, banned) if ctx.keeps_rows else None
        tokens: list[int] = []
        # Where the round has side work (a GPU), the last step's row is copied while the target
        # verifies: only a row the next step's decode would overwrite is copied on the way (none
        # where the device keeps the rows).
        late_copy = side if sampler.greedy and kept is None else None
        ahead = side if self.overlaps else None
        known: dict[int, tuple[float, float]] = {}  # each row's softmax_parts, where the device took them
        for i in range(k):
            late = late_copy is not None and i + 1 == k
            held_row = held if i == 0 else None
            from_held = held_row is not None
            if held_row is not None:  # the guess's row, copied to rows[0] (or kept) during the last verify
                top, part, source, late = held_row.top, held_row.parts, rows[0], False
            else:
                tops = ctx.device_choices(banned)
                top = None if tops is None else tops[-1]  # where the device chose it
                part = _device_part(ctx, logits, banned)  # before choose_draft writes the ban into the row
                source = logits[-1]
            if kept is not None:
                token = _kept_choice(kept, i, sampler, p_min, banned, top, part)
            else:
                copy = not late and not from_held
                token = choose_draft(rows[i], source, sampler, p_min, banned, copy=copy, top=top, parts=part)
            if token is None:
                break
            tokens.append(token)
            if part is not None:
                known[i] = part
            if late and late_copy is not None:  # late is only ever set with late_copy
                late_copy.add(functools.partial(np.copyto, rows[i], logits[-1]), reads=ctx)
            if i + 1 == k and ahead is not None:  # launched right after the verify's launch
                ahead.add(functools.partial(ctx.feed, [token], ahead))
                if self.guesses and sampler.greedy:
                    ahead.add(functools.partial(self._guess_outcome, sampler, banned, ahead), last=True)
            if i + 1 < k:
                if width > 1:
                    ctx.rewind(ctx.n_past - 1)
                logits = ctx.decode((history[-1:] + tokens)[-width:], all_logits=False, side=side)  # no copy of history
        if kept is not None:
            kept.n = len(tokens)
        drafted = rows[: len(tokens)] if kept is None else kept
        return Draft(
            tokens, drafted, sampler, guessed=guessed and bool(tokens), parts=known, argmax_tokens=sampler.greedy
        )

    def _chained(
        self, history: list[int], k: int, sampler: Sampler, p_min: float, banned: tuple[int, ...]
    ) -> Draft | None:
        """A greedy draft as one chain on the device where the context offers it (MLX: each step's
        argmax feeds the next unevaluated, nothing waited for: the verify takes the ids in as they
        stand, one host sync a round); None for the step-by-step draft."""
        chain = getattr(self.ctx, "greedy_chain", None)
        if chain is None or not sampler.greedy or p_min > 0.0 or self._guess is not None or self.shape != 1:
            return None
        if self.ctx.n_past > len(history) - 1:
            self.ctx.rewind(len(history) - 1)
        launched = chain(history[self.ctx.n_past :], k, banned)
        return None if launched is None else UnreadDraft(launched, sampler)

    def _guess_outcome(self, sampler: Sampler, banned: tuple[int, ...], side: SideWork) -> None:
        """During the verify, once the last draft's decode is done: the drafter's own choice after
        it (the target's token, if the target keeps every draft and agrees), decoded in turn."""
        ctx = self.ctx
        if ctx.n_past >= ctx.n_ctx:
            return
        fed_at = ctx.fed_at
        logits = ctx.collect(side)
        took = time.perf_counter() - fed_at  # the last draft's decode beside the verify, at most
        tops = ctx.device_choices(banned)
        token = None if tops is None else tops[-1]  # greedy and p_min 0: the device's token, where it chose one
        if token is None:  # else the row's scan (where the device keeps the rows, the row fetched)
            row = (
                KeptRows(ctx, ctx.n_past - 1, self._rows[self._turn ^ 1, :1], banned)[0]
                if ctx.keeps_rows
                else logits[-1]
            )
            token = choose_draft(row, row, sampler, 0.0, banned, copy=False)
            assert token is not None  # at p_min 0 a token is always chosen
        nxt = self._turn ^ 1  # the set of rows the next round drafts into
        ctx.feed([token], side)
        self._guess = (ctx.n_past - 1, token)
        self.guesses_made += 1
        ends = side.ends_at
        if self._holds_in_time(ends, took):
            # Its row too, into the rows the next round drafts into (where the device keeps the
            # rows, it is kept at its position, the next round's first): that round takes no copy for it.
            logits = ctx.collect(side)
            tops = ctx.device_choices(banned)
            part = _device_part(ctx, logits, banned)
            if not ctx.keeps_rows:
                np.copyto(self._rows[nxt][0], logits[-1])
            self._held = HeldRow(ctx.n_past - 1, None if tops is None else tops[-1], part, nxt)

    @staticmethod
    def _holds_in_time(ends: float | None, took: float) -> bool:
        """Whether the guess's decode, which takes about what the last draft's took, is expected done
        before the verify (`ends`: when side work's gap is expected to end; None: no limit)."""
        return ends is None or time.perf_counter() + took <= ends

    def _guessed_row(self, history: list[int], side: SideWork | None) -> tuple[np.ndarray | None, HeldRow | None]:
        """The row after the last round's guess where it came true (the round kept every draft and
        the target chose the guess: the cache holds all of history), and where the verify's side work
        held it already (its position, the device's token, its set of rows, now this round's); else
        (None, None), the guess cut back as a refused draft is."""
        guess, self._guess = self._guess, None
        held, self._held = self._held, None
        if guess is None:
            return None, None
        ctx = self.ctx
        if guess != (len(history) - 1, history[-1]) or ctx.n_past != len(history):
            return None, None
        if held is not None and held.position == guess[0] and held.rows == self._turn:
            self.guesses_kept += 1
            return self._rows[self._turn][:1], held
        if not ctx.unread:
            return None, None
        self.guesses_kept += 1
        return ctx.collect(side), None

    def verified(self, batch: VerifyBatch) -> None:
        """Nothing to learn: the next draft feeds the committed tokens it has not seen."""

    def rewind(self, keep: int) -> None:
        guess = self._guess
        if guess is not None and guess[0] == keep:
            keep += 1  # the guess, just past what the round kept: the next draft sees whether it came true
        elif guess is not None:  # kept past by a round that drafted nothing, unchecked: cut back with it
            keep, self._guess, self._held = min(keep, guess[0]), None, None
        self.ctx.rewind(keep)

    def reset(self) -> None:
        self._guess = self._held = None
        self.ctx.clear()

    def stoppable(self, cancelled: Callable[[], bool]) -> AbstractContextManager[None]:
        return self.ctx.stoppable(cancelled)

    def close(self) -> None:
        self.ctx.close()


class KeptRows:
    """A draft's rows where the device kept them (Context.keeps_rows), from position `first` on:
    each copied into `host` the first time it is read, with the ban written in as choose_draft
    writes it. Valid until a decode at a position as many slots on (max_depth + 2) takes a slot:
    the round reads them all before the next draft, and no round reaches that far."""

    def __init__(self, ctx: RuntimeContext, first: int, host: np.ndarray, banned: tuple[int, ...]) -> None:
        self._ctx, self._first, self._host, self._banned = ctx, first, host, list(banned)
        self._fetched: set[int] = set()
        self.n = len(host)  # the rows the draft has (set once it is drafted)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> np.ndarray:
        row = self._host[i]
        if i not in self._fetched:
            self._ctx.kept_row(self._first + i, row)
            if self._banned:
                row[self._banned] = -np.inf
            self._fetched.add(i)
        return row


def _kept_choice(
    rows: KeptRows,
    i: int,
    sampler: Sampler,
    p_min: float,
    banned: tuple[int, ...],
    top: int | None,
    part: tuple[float, float] | None,
) -> int | None:
    """choose_draft where the device kept the row: greedy with the device's token and parts, no
    row is read; else the row is fetched and chosen from as on the host."""
    if sampler.greedy and top is not None and part is not None:
        return None if p_min > 0.0 and 1.0 / part[1] < p_min else top
    row = rows[i]
    return choose_draft(row, row, sampler, p_min, banned, copy=False, top=top, parts=part)


def _kept_ban(banned: tuple[int, ...]) -> tuple[int, ...]:
    """The ban whose logits come back with a kept row: all of it where there is room (else none,
    and the rows a choice needs are fetched)."""
    return banned if len(banned) <= MAX_BANNED else ()


def _device_part(ctx: RuntimeContext, logits: np.ndarray, banned: tuple[int, ...]) -> tuple[float, float] | None:
    """The last row's softmax_parts from the device (Context.device_parts), or None."""
    parts = ctx.device_parts(logits, banned)
    return None if parts is None else parts[-1]


def step_plan(acceleration: Acceleration, has_state: bool) -> tuple[bool, int]:
    """Whether a draft model takes in its round's last draft during the verify, and the rows of
    each step (but a catch-up's): one where it does, or where a one-token rewind would replay a
    recurrent state; else two where a steady shape pays (a GPU: the last two tokens a step)."""
    overlaps = acceleration.overlap_drafter and not has_state  # a rejected draft would cost a replay
    return overlaps, 2 if acceleration.steady_draft_shape and not overlaps and not has_state else 1
