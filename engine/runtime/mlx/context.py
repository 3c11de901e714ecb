"""An MLX context as a RuntimeContext: mlx-lm's prompt cache, a decode that hands back rows, a rewind.

A decode runs the model on a [1, n] batch and evaluates it, its greedy tokens too where the device
takes them (argmax_on_device), in one mx.eval: one host sync a decode, counted by the eval audit (engine.runtime.mlx.audit). Its
rows come back as a float32 numpy array over the evaluated array's own memory, no copy. Rewind is the cache's own trim (mlx_lm.models.cache), which a
KV cache does; a recurrent layer's state (a hybrid model's) is undone from a snapshot taken before
each batch (engine.runtime.mlx.snapshots). A cache with a layer that can do neither says so and
decodes without speculation.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Protocol, cast

import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import can_trim_prompt_cache, make_prompt_cache, trim_prompt_cache

from engine.errors import Cancelled, ContextFullError, DraftlightError, RuntimeFailure
from engine.runtime.contexts import common_prefix
from engine.runtime.contextsize import auto_context
from engine.runtime.mlx import ahead, audit
from engine.runtime.mlx.chain import ban_row
from engine.runtime.mlx.hidden import BatchTaps
from engine.runtime.mlx.hostrows import DeviceRows, UnreadRows
from engine.runtime.mlx.options import MlxOptions
from engine.runtime.mlx.snapshots import StateSnapshots, unsupported_layers
from engine.runtime.mlx.window import droppable, windowed
from engine.runtime.mlx_check import one_line
from engine.runtime.protocol import BatchObserver, LaunchedDraft, RuntimeModel

if TYPE_CHECKING:
    from pathlib import Path

    import mlx.nn as nn

    from engine.runtime.mlx.ahead import Ahead
    from engine.runtime.mlx.chain import UnreadIds
    from engine.runtime.side import SideWork


class LoadedModel(RuntimeModel, Protocol):
    """What a context needs of its model (engine.runtime.mlx.model.MlxModel): the module and its limits."""

    module: nn.Module
    n_ctx_train: int
    path: Path | None  # the folder it was loaded from; None for a model built in memory


class MlxContext(DeviceRows):
    """One inference context on an MLX model (a RuntimeContext): its prompt cache, its rows, timing."""

    def __init__(self, model: LoadedModel, options: MlxOptions, max_rows: int = 1) -> None:
        self.model = model
        self.options = options
        self.acceleration = options.acceleration()  # resolved once: the device's argmax or none
        self.n_ctx = min(options.n_ctx, model.n_ctx_train) if options.n_ctx else auto_context(model.n_ctx_train)
        self.max_rows = max_rows
        self.tokens: list[int] = []  # what the cache holds, position by position
        self.decode_s = 0.0  # time inside the model's call and mx.eval, the rows' copy to numpy too
        self.argmax: list[int] | None = None  # the latest decode's greedy token per row, where the device took it
        self.normalisers: list[float] | None = None  # and each row's softmax normaliser there (ahead.Rows)
        self.largests: list[float] | None = None  # and each row's largest logit, its argmax's
        self._banned: tuple[int, ...] = ()  # the ban the latest decode added to its rows on the device
        self._defer_next = False  # the next decode's rows left on the device until read (defer_rows)
        self._cache: list[Any] | None = windowed(make_prompt_cache(model.module), max_rows)
        # A layer whose cache cannot drop a suffix holds a recurrent state (a hybrid model's
        # linear-attention or state-space layers): a draft is undone from the state kept before its batch.
        self.has_state = not can_trim_prompt_cache(self._cache)
        self._unsupported = unsupported_layers(self._cache) if self.has_state else []
        self.rollback_depth = 0 if self._unsupported else max_rows - 1
        self.snapshots = StateSnapshots(model.module, self._cache, max_rows)
        self.rewinds_replayed = 0  # rewinds past the latest snapshot, done by decoding the kept tokens again
        self._fed: np.ndarray | None = None  # a fed batch's row, until collected
        self.fed_at = 0.0  # and when it was launched
        self.launched: UnreadIds | None = None  # a draft chain launched on this context and not yet read
        self.ahead: Ahead | None = None  # a plain step launched on the device's greedy guess (mlx.ahead)
        self._greedy_next: tuple[int, ...] | None = None  # the next decode's ban, where a plain step follows it
        self._ban_next: tuple[int, ...] = ()  # the ban the next decode adds to its rows on the device (ban_in_rows)
        self._prefilled: tuple[list[int], np.ndarray] | None = None  # the last prefill's tokens and row
        self._cancelled: Callable[[], bool] | None = None  # while stoppable(): checked between chunks
        # Drafters that read the target's hidden states (engine.runtime.mlx.hidden): every decoded batch.
        self.observers = BatchTaps(model.module, model.name, options.compiles(), self.n_ctx, options.attention())
        self.observers.joined = getattr(model, "joined_groups", 0) > 0  # nothing joined: no switch to flip
        self.observers.head_apart = bool(getattr(model, "head_apart", False))  # checked once a model, here

    @property
    def n_past(self) -> int:
        return len(self.tokens)

    @property
    def host_syncs(self) -> int:
        """The host's waits for MLX so far, every context's and drafter's in this process (the eval audit)."""
        return audit.syncs()

    @property
    def can_rewind(self) -> bool:
        """Whether a verify batch of max_rows can be undone down to its first row."""
        return self.rollback_depth >= self.max_rows - 1

    def describe_rollback(self) -> str:
        """How this context undoes a rejected draft, in a sentence."""
        if not self.has_state:
            return "Rejected drafts are trimmed from the KV cache."
        if self.can_rewind and self.snapshots.steps is not None:
            return (
                f"{self.model.name} keeps a recurrent state: a rejected draft is undone from the states its "
                "verify batch computed at each position."
            )
        if self.can_rewind:
            return (
                f"{self.model.name} keeps a recurrent state: a rejected draft is undone from the state kept "
                "before its verify batch, decoding the accepted tokens again."
            )
        return (
            f"{self.model.name} keeps a recurrent state the MLX runtime cannot roll back "
            f"(its {', '.join(self._unsupported)} layers), so it decodes without speculation."
        )

    def decode(self, tokens: list[int], all_logits: bool, side: SideWork | None = None) -> np.ndarray:
        """Decode tokens at the next positions; their rows (all_logits) or the last, as float32.

        The array is this decode's own (over the evaluated rows' memory). `side` work runs after the
        decode, before its rows are handed back, as on a CPU: MLX's lazy evaluation overlapping it is for later.
        """
        ban, self._ban_next = self._ban_next, ()  # this decode's alone, whatever happens to it
        defer, self._defer_next = self._defer_next, False
        n = len(tokens)
        if n == 0:
            raise ValueError("nothing to decode")
        if all_logits and n > self.max_rows:
            raise ValueError(f"{n} rows of logits asked for; this context was made for {self.max_rows}")
        outside = next((t for t in tokens if not 0 <= t < self.model.n_vocab), None)
        if outside is not None:  # MLX reads past the embedding's end rather than refuse
            raise RuntimeFailure(
                f"token {outside:,} is outside {self.model.name}'s vocabulary of {self.model.n_vocab:,}: "
                "its tokenizer and its weights disagree."
            )
        cache = self._open_cache(room=n)
        self._fed = None
        self.argmax = self.normalisers = self.largests = None
        self._banned = ban
        self._settle()
        launched, banned, self._greedy_next = ahead.take(self, tokens), self._greedy_next, None
        if side is not None:
            side.run_reading(self)
        if self.has_state and launched is None:  # a launched step's was kept before it ran (mlx.ahead)
            self.snapshots.keep(cache, self.n_past, n)
        rows: np.ndarray | None = None
        step = max(self.options.prefill_chunk, self.max_rows)  # a verify batch is never split
        for start in range(0, n, step):
            if self._cancelled is not None and self._cancelled():
                self._prefilled = None
                raise Cancelled("Stopped.")
            chunk = tokens[start : start + step]
            last = start + len(chunk) == n
            t0 = time.perf_counter()
            with decode_errors(self.model.name):
                if launched is None:
                    logits = self.observers.forward(mx.array(chunk, dtype=mx.uint32)[None], cache, not all_logits)
                    waited = self._rows(logits, all_logits, ban) if last else None
                else:  # the step the last decode launched on the device's guess: this token
                    logits, waited = launched.logits, launched.waited
                    if launched.banned != ban:  # its rows were banned otherwise: this decode's own, from its logits
                        waited = self._rows(logits, True, ban)
                if waited is not None:
                    also = self.observers.batch_arrays()
                    if banned is not None and n == 1 and ahead.can_pipeline(self):  # the next step, launched
                        also.append(ahead.launch(self, logits, banned, waited, banned == ban))
                    rows = self._wait_for_rows(waited, *also, defer=defer)
                else:
                    audit.wait([c.state for c in cache], *self.observers.batch_arrays())
            self.decode_s += time.perf_counter() - t0
            self.observers.tell(chunk, self.n_past)
            self.tokens.extend(chunk)
        if side is not None and not side.running:
            side.run()
        assert rows is not None
        return rows

    def _rows(self, logits: mx.array, all_logits: bool, banned: tuple[int, ...]) -> ahead.Rows:
        """What a decode of `logits` waits for, `banned` added to its rows on the device."""
        return ahead.Rows(logits, all_logits, self.acceleration.argmax_on_device, ban_row(self.model.n_vocab, banned))

    def _wait_for_rows(self, waited: ahead.Rows, *also: mx.array, defer: bool = False) -> np.ndarray:
        """The one wait of a decode: its rows (float32), their argmax where the device takes it, and
        `also` (a draft the batch took in unread); the rows over the evaluated array's own memory, or,
        with `defer` where the device took the argmax, left there until read (hostrows.UnreadRows)."""
        audit.wait(*waited.arrays(), *also)
        if waited.top is not None and waited.normaliser is not None and waited.largest is not None:
            self.argmax = cast(list[int], waited.top.tolist())  # evaluated with the rows: no second sync
            self.normalisers = cast(list[float], waited.normaliser.tolist())
            self.largests = [row[0] for row in cast(list[list[float]], waited.largest.tolist())]
            if defer:
                return cast(np.ndarray, UnreadRows(waited.out))  # read as an array, copied on first use
        return np.asarray(waited.out)  # a host array on a CPU and on unified memory: no copy

    def decode_unread(self, last: int, draft: LaunchedDraft) -> np.ndarray:
        """The verify of a draft still on the device (Draft.unread): [last, *its ids] decoded with the
        ids as they stand, and one wait for the rows and the draft's tokens and rows together."""
        launched = draft.unread()
        if launched is None:
            return self.decode([last, *draft.tokens], all_logits=True)
        ban, self._ban_next = self._ban_next, ()
        defer, self._defer_next = self._defer_next, False
        n = 1 + launched.n
        if n > self.max_rows:
            raise ValueError(f"{n} rows of logits asked for; this context was made for {self.max_rows}")
        cache = self._open_cache(room=n)
        self._fed = self.argmax = self.normalisers = self.largests = None
        self._banned = ban
        self._settle()
        ahead.take(self, [])
        if self.has_state:
            self.snapshots.keep(cache, self.n_past, n)
        t0 = time.perf_counter()
        with decode_errors(self.model.name):  # the draft's chain is evaluated in this wait too
            batch = mx.concatenate([mx.array([last], dtype=mx.uint32), launched.ids.astype(mx.uint32)])[None]
            waited = self._rows(self.observers.forward(batch, cache), True, ban)
            rows = self._wait_for_rows(waited, *launched.arrays(), *self.observers.batch_arrays(), defer=defer)
        draft.settle(waited=True)
        self.decode_s += time.perf_counter() - t0
        tokens = [last, *draft.tokens]
        self.observers.tell(tokens, self.n_past)
        self.tokens.extend(tokens)
        return rows

    def greedy_chain(self, tokens: list[int], k: int, banned: tuple[int, ...]) -> UnreadIds | None:
        """A greedy draft of k tokens after `tokens` as one lazy chain, launched and not waited for
        (engine.runtime.mlx.chain); None where a chain cannot run here."""
        from engine.runtime.mlx.chain import can_chain, launch_chain

        if not can_chain(self):
            return None
        self._fed = None
        self._settle()
        ahead.take(self, [])
        with decode_errors(self.model.name):
            return launch_chain(self, tokens, k, banned)

    def _settle(self) -> None:
        """Read a chain launched here and not read yet: the cache holds its steps, `tokens` catch up."""
        if self.launched is not None:
            self.launched.read()

    def pipeline_greedy(self, banned: tuple[int, ...]) -> None:
        """The next decode is a plain step whose token is its row's argmax (`banned` aside), and a plain
        step follows it: it launches that step on the device's own guess before its wait (mlx.ahead)."""
        self._greedy_next = banned

    def ban_in_rows(self, banned: tuple[int, ...]) -> bool:
        """The next decode adds `banned`'s -inf to its rows on the device, before they are read: the host
        never writes into the memory MLX hands back (its first touch cost 60 us a token on a CPU)."""
        self._ban_next = banned
        return True

    def feed(self, tokens: list[int], side: SideWork | None = None) -> None:
        """Decode at once and keep the row for `collect`: nothing on MLX computes on behind the host yet."""
        self.fed_at = time.perf_counter()
        row = self.decode(tokens, all_logits=False, side=side)
        self._fed = row

    @property
    def unread(self) -> bool:
        """Whether the latest decode was fed and its row is still to be collected."""
        return self._fed is not None

    def collect(self, side: SideWork | None = None) -> np.ndarray:
        """The row of the latest fed batch."""
        row, self._fed = self._fed, None
        if row is None:
            raise RuntimeFailure("no fed batch to read")
        if side is not None and not side.running:
            side.run()
        return row

    def rewind(self, keep: int) -> None:
        """Forget every position from `keep` on: each layer's cache trimmed (mlx-lm's trim), a
        recurrent layer's state put back from its snapshot."""
        self._settle()
        if keep >= len(self.tokens):
            return
        ahead.take(self, [])
        if keep <= 0:
            self.clear()  # a fresh cache: any layer, a recurrent state too, starts again
            return
        cache = self._open_cache()
        if self.has_state:
            self._rewind_state(cache, keep)
            return
        drop = len(self.tokens) - keep
        if not droppable(cache, drop):  # further back than a sliding window keeps: from the start
            self._replay(self.tokens[:keep])
            return
        t0 = time.perf_counter()
        trimmed = trim_prompt_cache(cache, drop)
        self.decode_s += time.perf_counter() - t0
        if trimmed != drop:
            raise RuntimeFailure(f"{self.model.name}'s cache could trim {trimmed} of {drop} positions.")
        del self.tokens[keep:]
        self._fed = None  # a fed batch's row is for a position no longer held
        if self._prefilled is not None and keep < len(self._prefilled[0]):
            self._prefilled = None  # the prompt's pass is no longer whole in the cache

    def _rewind_state(self, cache: list[Any], keep: int) -> None:
        """Back to `keep` from the latest snapshot, the kept tokens after it decoded again; from
        nothing where the snapshot is past `keep` (engine.runtime.mlx.snapshots says why)."""
        if self._unsupported:
            raise RuntimeFailure(
                f"{self.model.name} keeps a recurrent state the MLX runtime cannot roll back: it cannot go "
                f"back to position {keep:,}; start a new conversation."
            )
        kept = self.tokens[:keep]
        t0 = time.perf_counter()
        start = self.snapshots.restore(cache, len(self.tokens), keep)
        self.decode_s += time.perf_counter() - t0
        if start is None:
            self._replay(kept)
            return
        del self.tokens[start:]
        self._fed = None
        if self._prefilled is not None and keep < len(self._prefilled[0]):
            self._prefilled = None
        if keep > start:
            with self.observers_paused():  # tokens already seen: no drafter reads them twice
                self.decode(kept[start:], all_logits=False)

    def _replay(self, kept: list[int]) -> None:
        """Hold `kept` from a fresh cache: what a rewind does that neither a trim nor a snapshot can."""
        self.clear()
        self.rewinds_replayed += 1
        if kept:
            with self.observers_paused():  # tokens already seen: no drafter reads them twice
                self.decode(kept, all_logits=False)

    def sync(self, tokens: list[int]) -> int:
        """Make the cache hold exactly `tokens`, keeping the longest common prefix; tokens decoded."""
        same = common_prefix(self.tokens, tokens)
        self.rewind(same)
        rest = tokens[same:]
        if rest:
            self.decode(rest, all_logits=False)
        return len(rest)

    def prefill(self, tokens: list[int]) -> tuple[np.ndarray, int]:
        """Make the cache hold `tokens`; the last token's row (a copy) and how many were decoded.

        As the llama.cpp context: the tokens the cache lacks are decoded in one pass, the last among
        them, and the same prompt again hands back the row its pass gave.
        """
        same = common_prefix(self.tokens, tokens)
        if same == len(tokens) and self._prefilled is not None and self._prefilled[0] == tokens:
            prefilled = self._prefilled
            self.rewind(same)  # a recurrent state replayed from nothing forgets the row: the same row again
            self._prefilled = prefilled
            return prefilled[1].copy(), 0
        same = min(same, len(tokens) - 1)  # the last token needs its row
        self.rewind(same)
        row = self.decode(tokens[same:], all_logits=False)[-1].copy()
        self._prefilled = (list(tokens), row)
        return row.copy(), len(tokens) - same

    def clear(self) -> None:
        self._open_cache()
        self.launched = self.ahead = None
        self._cache = windowed(make_prompt_cache(self.model.module), self.max_rows)
        self.tokens.clear()
        self.snapshots.forget()
        self._fed = None
        self._prefilled = None

    def close(self) -> None:
        self._cache = self.ahead = None
        self.snapshots.forget()
        self._fed = self._prefilled = None

    def _open_cache(self, room: int = 0) -> list[Any]:
        """The cache, with room for `room` more positions: else a sentence."""
        if self._cache is None:
            raise RuntimeFailure("this model context was closed")
        if self.n_past + room > self.n_ctx:
            raise ContextFullError(
                f"the context window is full ({self.n_ctx:,} tokens): start a new conversation "
                "or load the model with a larger context."
            )
        return self._cache

    @contextmanager
    def stoppable(self, cancelled: Callable[[], bool]) -> Iterator[None]:
        """Decodes inside end as soon as `cancelled()` says so, between a long prefill's chunks
        (MLX evaluates a chunk's graph whole), raising Cancelled."""
        self._cancelled = cancelled
        try:
            yield
        finally:
            self._cancelled = None

    def observe_batches(self, observer: BatchObserver, hidden_states: bool = True) -> Callable[[], None]:
        """Hand every batch this context decodes to `observer`: its tokens, first position and, where
        asked, the model's last layer (normed) for each token; returns the way to stop."""
        return self.observers.add(observer, hidden_states)

    def kv_cache(self) -> list[Any]:
        """The prompt cache itself, layer by layer: what a drafter that attends to the target's memory reads
        (Gemma 4's assistant). Read it, never write it: the context alone decodes and rewinds."""
        return self._open_cache()

    def observers_paused(self) -> AbstractContextManager[None]:
        """Decode without telling the observers (nor computing hidden states for them): a plain reply."""
        return self.observers.paused()


@contextmanager
def decode_errors(name: str) -> Iterator[None]:
    """What MLX raises inside a model's pass (a shape its weights cannot take, memory) is one sentence."""
    try:
        yield
    except DraftlightError:
        raise
    except Exception as e:  # the folder passed its checks and its pass still failed: say so, keep the app
        raise RuntimeFailure(f"MLX could not run {name}: {one_line(e)}") from e
