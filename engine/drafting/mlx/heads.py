"""What an MLX MTP head and an EAGLE-3 drafter share: a small model chained on the target's states.

Both keep a KV cache whose entry p holds (the token at p+1, what the target computed at p) and
answer with a guess for p+2. As mlx-vlm 0.7.10's round loops drive them (`_mtp_rounds`,
`_eagle3_rounds`):

- every target batch hands its states over (MlxContext.observe_batches); a draft first feeds, in
  one batch, the entries the drafter lacks (the prompt's after a prefill, the verified ones after a
  round), and its last output gives the first draft;
- each further draft steps the drafter on its own output and appends that entry; the draft's last
  token is not fed, since the verify pass hands its state over;
- after the verify an MTP head keeps its own entries for the drafts the target kept (the round's
  rewind drops the rest), though they read the head's state, not the target's; EAGLE-3 drops them
  all and feeds the kept drafts again with the target's states (`keeps_own_entries`).
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from typing import Any

import mlx.core as mx
import numpy as np

from engine.drafting.base import Draft, OnTarget, UnreadDraft, VerifyBatch, choose_draft
from engine.errors import RuntimeFailure
from engine.runtime.contexts import common_prefix
from engine.runtime.mlx import audit
from engine.runtime.mlx.chain import UnreadIds, ban_row, pick
from engine.runtime.mlx.context import MlxContext, decode_errors
from engine.sampling import Sampler

PENDING = -1  # an entry's token drafted on the device and not read yet


class TargetStates:
    """The target's states a drafter has yet to take in, by position: what each decoded batch handed
    over, kept on the device as the decode's wait left them (read by the next draft's graph, unread)."""

    def __init__(self, who: str) -> None:
        self.who = who
        self.first = 0
        self.rows: mx.array | None = None  # rows[i] is position first + i's

    def add(self, start: int, rows: mx.array) -> None:
        """A batch's rows from position `start` on, replacing any held from there on."""
        if self.rows is not None and self.first <= start <= self.first + self.rows.shape[0]:
            self.rows = mx.concatenate([self.rows[: start - self.first], rows])
            mx.async_eval(self.rows)  # its parts are evaluated: no graph grows round by round
        else:
            self.first, self.rows = start, rows

    def held(self, first: int, end: int) -> mx.array:
        """The rows of positions first..end-1, or a sentence for a drafter that missed them."""
        s = self.rows
        if first < end and (s is None or first < self.first or end > self.first + s.shape[0]):
            raise RuntimeFailure(f"{self.who} missed part of the target's cache; reset both before a reply")
        if s is None:
            return mx.zeros((0, 0), dtype=mx.float32)
        return s[first - self.first : end - self.first]

    def forget_from(self, keep: int) -> None:
        if self.rows is not None and keep < self.first + self.rows.shape[0]:
            self.rows = self.rows[: max(keep - self.first, 0)]


class ChainedHead(OnTarget[MlxContext]):
    """A drafter whose entries chain the target's states (an MLX MTP head, EAGLE-3): the round's part."""

    has_distribution = True
    needs_hidden_states = True
    keeps_own_entries = True  # MTP's: the drafts' own entries stay where the target kept the token
    # What reset() starts afresh:
    _cache: list[Any]
    _fed: list[int]  # the token each entry embeds, entry by entry (PENDING: a draft not read yet)
    _out: mx.array | None  # the output at the last entry, where a draft can start
    _states: TargetStates
    _launched: UnreadIds | None  # the latest draft chosen on the device, read or not

    def __init__(self, target: MlxContext, max_depth: int, name: str, source: str = "") -> None:
        self.target, self.max_depth, self.name = target, max_depth, name
        self.who = f"the {name} in {source}" if source else name  # named where one of its passes fails
        self.decode_s = 0.0
        self.ctx = self  # the round counts the drafter's time inside MLX as its own
        self._rows = np.empty((max_depth, target.model.n_vocab), dtype=np.float32)
        self.reset()
        self._stop = target.observe_batches(self._seen, hidden_states=False)  # read on the device (states)

    # What a kind says: its cache, the state it keeps of a target batch, one forward, its logits.

    def make_cache(self) -> list[Any]:
        raise NotImplementedError

    def states(self) -> mx.array:
        """What the drafter reads of the batch the target just decoded, a row a position, on the device
        (its last layer, normed; or chosen layers)."""
        hidden = self.target.observers.hidden
        assert hidden is not None  # the target decodes with its hidden states while a drafter listens
        return hidden[0]

    def forward(self, tokens: mx.array, states: mx.array, first: int) -> mx.array:
        """Append entries (tokens[i], states[i]) at entry positions first, first+1, ...; the outputs."""
        raise NotImplementedError

    def device_logits(self, out: mx.array) -> mx.array:
        """The drafter's row over the target's vocabulary for one output ([1, 1, width]), float32, unevaluated."""
        raise NotImplementedError

    # The round's part.

    def _seen(self, tokens: list[int], start: int, hidden: np.ndarray | None) -> None:
        """A batch the target decoded: keep its states until the drafter's entries take them in."""
        self._states.add(start, self.states())

    def prefill(self, history: list[int]) -> None:
        """The target's prefill handed its states over; the drafter takes them in at the first draft."""
        self._states.held(len(self._fed), len(history) - 1)

    def _feed(self, tokens: list[int], states: mx.array) -> mx.array:
        out = self.forward(mx.array([tokens], dtype=mx.int32), states, len(self._fed))
        self._fed += tokens
        return out

    def failing(self) -> AbstractContextManager[None]:
        return decode_errors(self.who)

    def _draft(self, history: list[int], k: int, sampler: Sampler, p_min: float, banned: tuple[int, ...]) -> Draft:
        t0 = time.perf_counter()
        self._settle()
        self._trim(common_prefix(self._fed, history[1:]))  # entry p embeds history[p + 1]
        end = len(history) - 1  # the target holds the states of every position before the last token's
        if len(self._fed) < end:
            first = len(self._fed)
            self._out = self._feed(history[first + 1 :], self._states.held(first, end)[None])[:, -1:, :]
        out, fed = self._out, len(self._fed)
        if out is None:
            return Draft()
        self._out = None  # the next draft starts from entries the round kept
        if sampler.greedy and p_min <= 0.0:
            draft = self._on_device(out, k, sampler, banned)
        else:
            draft = self._on_host(out, k, sampler, p_min, banned)
        if not self.keeps_own_entries:
            self._trim(fed)
        self.decode_s += time.perf_counter() - t0
        return draft

    def _on_device(self, out: mx.array, k: int, sampler: Sampler, banned: tuple[int, ...]) -> Draft:
        """A greedy draft chosen on the device, each draft fed to the next step unread: the verify
        takes the ids in as they stand, and its wait is the round's one (engine.runtime.mlx.chain)."""
        ban = ban_row(self.target.model.n_vocab, banned)
        fed, entries = len(self._fed), self._fed
        rows, ids = [], []
        for i in range(k):
            row, token = pick(self.device_logits(out), ban)
            rows.append(row)
            ids.append(token)
            if i < k - 1:  # the last draft's state comes from the verify pass
                out = self.forward(token.astype(mx.int32).reshape(1, 1), out, fed + i)
        entries += [PENDING] * (k - 1)

        def caught_up(drafted: list[int]) -> None:
            for i, token in enumerate(drafted[:-1]):  # the entries the round kept (none once reset)
                if fed + i < len(entries) and entries[fed + i] == PENDING:
                    entries[fed + i] = token

        self._launched = UnreadIds(mx.stack(ids), mx.stack(rows), caught_up)
        return UnreadDraft(self._launched, sampler)

    def _on_host(self, out: mx.array, k: int, sampler: Sampler, p_min: float, banned: tuple[int, ...]) -> Draft:
        """A draft chosen on the host, a row read a step: sampling, or a p_min that may end it early."""
        tokens: list[int] = []
        for i in range(k):
            logits = self.device_logits(out)
            audit.wait(logits)
            token = choose_draft(self._rows[i], np.asarray(logits), sampler, p_min, banned)
            if token is None:
                break
            tokens.append(token)
            if i < k - 1:  # the last draft's state comes from the verify pass
                out = self._feed([token], out)
        return Draft(tokens, self._rows[: len(tokens)], sampler)

    def _settle(self) -> None:
        """Read a draft chosen on the device that no verify read (its entries' tokens catch up)."""
        launched, self._launched = self._launched, None
        if launched is not None:
            launched.read()

    def verified(self, batch: VerifyBatch) -> None:
        """Nothing to carry: the verify pass's states came with its batch."""

    def rewind(self, keep: int) -> None:
        """Forget positions from `keep` on: the entries that embed them, the states held for them."""
        self._trim(max(keep - 1, 0))
        self._states.forget_from(keep)

    def _trim(self, entries: int) -> None:
        drop = len(self._fed) - entries
        if drop > 0:
            for c in self._cache:
                c.trim(drop)
            del self._fed[entries:]
            self._out = None

    def reset(self) -> None:
        self._cache = self.make_cache()
        self._fed = []
        self._out = None
        self._launched = None
        self._states = TargetStates(self.name)

    def close(self) -> None:
        self._stop()
