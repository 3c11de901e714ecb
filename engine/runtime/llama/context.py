"""The llama.cpp binding's second half: a context that decodes batches, hands out logits, rewinds.

One model and one context per role; one batch allocated up front and reused; logits read as
numpy views of llama.cpp's own buffer, never copied. A recurrent target keeps a state
snapshot per token of each batch, so a verify pass can be undone.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import llama_cpp.llama_cpp as llama
import numpy as np

from engine.errors import Cancelled, ContextFullError, RuntimeFailure
from engine.runtime.contexts import common_prefix
from engine.runtime.llama.backend import clear_log, llama_reason
from engine.runtime.llama.batch import Batch
from engine.runtime.llama.contextparams import context_params, has_state
from engine.runtime.llama.devicegreedy import DeviceGreedy
from engine.runtime.llama.devicerows import DeviceRows
from engine.runtime.llama.observers import BatchObservers
from engine.runtime.llama.options import LoadedModel, RuntimeOptions
from engine.runtime.protocol import BatchObserver, LaunchedDraft
from engine.runtime.side import DEVICE_BUSY_S, BusyTimes, SideWork


class Context(DeviceRows):
    """One inference context on a model (a RuntimeContext): its KV cache, one reusable batch, timing."""

    def __init__(
        self, model: LoadedModel, options: RuntimeOptions | None = None, max_rows: int = 1, kept_rows: int = 0
    ):
        if model.vocab_only:
            raise ValueError("a vocabulary-only model cannot decode")
        self.model = model
        self.options = options or model.options
        self.acceleration = self.options.acceleration()  # resolved once: every switch a decode reads
        params = context_params(model, self.options, max_rows)
        self.has_state = has_state(model)
        clear_log()
        ptr = llama.llama_init_from_model(model.ptr, params)
        if not ptr:
            reason = llama_reason() or "out of memory?"
            raise RuntimeFailure(f"llama.cpp could not create a context for {model.path.name}: {reason}")
        self.ptr = ptr
        # Greedy tokens chosen on the device (acceleration.argmax_on_device): llama.cpp's greedy sampler
        # runs in the decode's graph, and the rows come from its output instead of the raw logits;
        # each row's softmax normaliser too, so its probabilities are lookups (DeviceGreedy).
        # With kept_rows (a draft model's steps) each row stays on the device, in a slot of its
        # position's, and only the floats the round reads come back (RowKeeper). Where positions
        # are plain and nothing replays a state, the graph finds the slot itself.
        plain = llama.llama_model_rope_type(model.ptr) in (llama.LLAMA_ROPE_TYPE_NORM, llama.LLAMA_ROPE_TYPE_NEOX)
        positions = int(llama.llama_n_ctx(ptr)) if plain and not self.has_state else 0
        self._greedy = (
            DeviceGreedy.attach(ptr, model.n_vocab, max_rows, kept_rows, positions)
            if self.acceleration.argmax_on_device
            else None
        )
        self.argmax: list[int] | None = None  # the latest decode's argmax per output row, where the device took it
        # and its row's softmax normaliser there (softmax_parts' second half), where the device took that too
        self.normalisers: list[float] | None = None
        self.memory = llama.llama_get_memory(ptr)
        self.n_ctx: int = llama.llama_n_ctx(ptr)
        self.capacity = min(int(params.n_batch), int(llama.llama_n_batch(ptr)))  # what llama.cpp took, not asked
        self.max_rows = max_rows
        self._logits_address = 0
        self._prefilled: tuple[list[int], np.ndarray] | None = None  # the last prefill's tokens and row
        self._logits = np.empty((0, model.n_vocab), dtype=np.float32)
        self._unread = 0  # the rows of the latest decode when it was fed (Context.feed), until collected
        self.fed_at = 0.0  # and when it was launched
        self._batch = Batch(self.capacity)  # the one batch every decode fills
        self.tokens: list[int] = []  # what the KV cache holds, position by position
        self.decode_s = 0.0  # time inside llama_decode and logits access, for overhead accounting
        # The time side work (engine.runtime.side: work done between launching a decode and reading
        # its logits) took that no decode hid: it counts as the engine's own, not llama.cpp's.
        self.side_exposed_s = 0.0
        self._busy = BusyTimes()  # on a GPU, how long a decode keeps the device busy: side work's budget
        self.rewinds_replayed = 0  # rewinds past the snapshots, done by decoding the kept tokens again
        # Drafters that read the target's hidden states (an MTP head): every decoded batch.
        self.observers = BatchObservers(self)
        self._cancelled: Callable[[], bool] | None = None  # while stoppable(): ends a decode mid-batch
        # How far back the latest batch can be undone: anything for a KV cache; for a
        # recurrent state, the snapshots llama.cpp keeps (0 where the architecture has none).
        self.rollback_depth = int(llama.llama_n_rs_seq(ptr)) if self.has_state else max_rows - 1

    def observe_batches(self, observer: BatchObserver, hidden_states: bool = True) -> Callable[[], None]:
        """Hand every batch this context decodes to `observer`: its tokens, first position and, where
        asked, the model's hidden state for each token (the input of its MTP head; else None).
        Returns the way to stop."""
        return self.observers.add(observer, hidden_states)

    def observers_paused(self) -> AbstractContextManager[None]:
        """Decode without telling the observers (nor computing hidden states for them): a plain reply."""
        return self.observers.paused()

    @property
    def _observers(self) -> list:
        return self.observers.entries

    @contextmanager
    def stoppable(self, cancelled: Callable[[], bool]) -> Iterator[None]:
        """Decodes inside end as soon as `cancelled()` says so, mid-batch too, raising Cancelled.

        For a prompt's prefill, which takes minutes on a CPU for a long prompt: llama.cpp's
        abort callback is asked between the graph's operations, and the engine between batches.
        Not for rounds, whose own loop checks between them.
        """
        callback = llama.ggml_abort_callback(lambda _data: bool(cancelled()))
        llama.llama_set_abort_callback(self.ptr, callback, None)
        self._cancelled = cancelled
        try:
            yield
        finally:
            self._cancelled = None
            if self.ptr:
                llama.llama_set_abort_callback(self.ptr, llama.ggml_abort_callback(), None)

    def _stopped(self) -> Cancelled:
        """After a cancelled batch the cache may hold part of it: make it hold exactly `tokens` again."""
        if not llama.llama_memory_seq_rm(self.memory, 0, len(self.tokens), -1):
            self.clear()
        self._prefilled = None
        return Cancelled("Stopped.")

    @property
    def can_rewind(self) -> bool:
        """Whether a verify batch of max_rows can be undone down to its first row, as speculation needs."""
        return self.rollback_depth >= self.max_rows - 1

    def describe_rollback(self) -> str:
        """How this context undoes a rejected draft, in a sentence."""
        if not self.has_state:
            return "Rejected drafts are dropped from the KV cache."
        if self.can_rewind:
            return (
                f"{self.model.name} keeps a recurrent state: rejected drafts are undone from per-token "
                f"snapshots (up to {self.rollback_depth} tokens)."
            )
        return (
            f"{self.model.name} keeps a recurrent state that llama.cpp cannot roll back for its architecture "
            f"({self.model.info.architecture}), so it decodes without speculation."
        )

    @property
    def n_past(self) -> int:
        return len(self.tokens)

    def decode_unread(self, last: int, draft: LaunchedDraft) -> np.ndarray:
        """A llama.cpp draft is read as it is made: its tokens decoded as any batch's."""
        return self.decode([last, *draft.tokens], all_logits=True)

    @property
    def host_syncs(self) -> int | None:
        """Not counted: each llama_decode returns once its batch is done."""
        return None

    def pipeline_greedy(self, banned: tuple[int, ...]) -> None:
        """Nothing to launch: a llama.cpp decode returns once its batch is done."""

    def ban_in_rows(self, banned: tuple[int, ...]) -> bool:
        """No: the caller writes the ban into the rows llama.cpp hands back."""
        return False

    def defer_rows(self) -> bool:
        """No: llama.cpp's rows are the host's (or kept on the device by keep_banned)."""
        return False

    def decode(self, tokens: list[int], all_logits: bool, side: SideWork | None = None) -> np.ndarray:
        """Decode tokens at the next positions; return the logits rows as a view.

        With all_logits every row has logits (a verify pass), else only the last.
        The returned array is valid until the next decode. `side` is the reply's side work:
        what reads this context's rows in place runs before the decode overwrites them, and
        the rest in the decode's gap (within what is left of it on a GPU).
        """
        logits = self._decode(tokens, all_logits, read=True, side=side)
        assert logits is not None
        return logits

    def feed(self, tokens: list[int], side: SideWork | None = None) -> None:
        """Decode tokens at the next positions without waiting for them: on a GPU the host goes on
        while the device computes, and this context's next decode follows on the device. The
        batch asks for its last row as `decode` does, so it has decode's shape (and reuses its
        graph); nothing reads that row unless `collect` does, and the next decode overwrites it."""
        self._decode(tokens, all_logits=False, read=False, side=side)
        self._unread, self.fed_at = len(tokens), time.perf_counter()

    @property
    def unread(self) -> bool:
        """Whether the latest decode was fed and its row is still to be collected."""
        return self._unread > 0

    def collect(self, side: SideWork | None = None) -> np.ndarray:
        """The row of the latest fed batch, once the device has it: what `decode` would have returned
        for it (and `argmax`, where the device takes it). Valid until the next decode. Outside side
        work, side work runs first, in what is left of the fed batch's gap."""
        m, self._unread = self._unread, 0
        if not m or not self.ptr:
            raise RuntimeFailure("no fed batch to read")
        t0 = time.perf_counter()
        self.argmax = self.normalisers = None
        logits, side_llama, exposed = self._read(1, m, self.fed_at, False, side)
        took = time.perf_counter() - t0 - side_llama - exposed
        self.decode_s += took
        self.side_exposed_s += exposed
        if side is not None and side.running:  # a side job's wait: its own context counts it
            side.llama_s += took
        return logits

    def _decode(self, tokens: list[int], all_logits: bool, read: bool, side: SideWork | None) -> np.ndarray | None:
        n = len(tokens)
        if n == 0:
            raise ValueError("nothing to decode")
        if not self.ptr:
            raise RuntimeFailure("this model context was closed")
        if all_logits and n > self.max_rows:
            raise ValueError(f"{n} rows of logits asked for; this context was made for {self.max_rows}")
        if self.n_past + n > self.n_ctx:
            raise ContextFullError(
                f"the context window is full ({self.n_ctx:,} tokens): start a new conversation "
                "or load the model with a larger context."
            )
        logits = None
        self.argmax = self.normalisers = None
        self._unread = 0
        keeper = self._keeper
        start = 0
        while start < n:
            chunk = tokens[start : start + self.capacity]
            m = len(chunk)
            last_chunk = start + m == n
            past = len(self.tokens)
            self._batch.fill(chunk, past, all_logits, last_chunk)
            if keeper is not None:
                keeper.aim(self.ptr, past + m - 1)
            if side is not None:
                side.run_reading(self)  # before this decode overwrites the logits they read
            if self._cancelled is not None and self._cancelled():
                raise self._stopped()
            t0 = time.perf_counter()
            rc = llama.llama_decode(self.ptr, self._batch.raw)
            if rc != 0:
                self.decode_s += time.perf_counter() - t0
                if rc == 2 and self._cancelled is not None:  # the abort callback said stop
                    raise self._stopped()
                if rc == 1:
                    raise ContextFullError(
                        f"no room left in the context window ({self.n_ctx:,} tokens): start a new conversation."
                    )
                raise RuntimeFailure(f"llama.cpp failed to decode a batch of {m} tokens (code {rc}).")
            self.tokens.extend(chunk)
            if not read and side is not None:  # a side job's decode: its own context counts it
                side.llama_s += time.perf_counter() - t0
            exposed = side_llama = 0.0  # the side work's own time that no decode hid; its decodes' time
            if last_chunk and read:
                logits, side_llama, exposed = self._read(m if all_logits else 1, m, time.perf_counter(), True, side)
            self.decode_s += time.perf_counter() - t0 - side_llama - exposed
            self.side_exposed_s += exposed
            if self.observers.listening:
                self.observers.tell(chunk, past)
            start += m
        return logits

    def _read(
        self, rows: int, m: int, launched: float, learn: bool, side: SideWork | None
    ) -> tuple[np.ndarray, float, float]:
        """A batch of m launched at `launched`: side work in its gap (on a GPU, within what is left of
        the time such a batch keeps the device busy), then its last `rows` rows, which waits for the
        device. Returns them, the side work's own time inside llama.cpp, and the side work's time
        that the device did not hide. With `learn`, the wait teaches the busy time (a batch read
        right after its launch)."""
        exposed = side_llama = 0.0
        on_gpu = self.options.on_gpu
        if side is not None and not side.running:
            g0 = time.perf_counter()
            budget = self._busy.budget(m) if on_gpu else None
            l0 = side.llama_s
            if side.run(None if budget is None else max(0.0, budget - (g0 - launched))):
                side_llama = side.llama_s - l0
                exposed = time.perf_counter() - g0 - side_llama
        w0 = time.perf_counter()
        if self.device_argmax:
            assert self._greedy is not None  # device_argmax says it is attached
            logits, self.argmax, self.normalisers = self._greedy.rows(self.ptr, rows, m)
        else:
            logits = self._logits_view()[:rows]
        done = time.perf_counter()
        if on_gpu and (self._busy.saw(m, done - launched, done - w0) if learn else done - w0 > DEVICE_BUSY_S):
            exposed = 0.0  # the device was still busy: the side work cost nothing
        return logits, side_llama, exposed

    def _logits_view(self) -> np.ndarray:
        """llama.cpp's logits buffer as an array; rebuilt only if the buffer moves."""
        ptr = llama.llama_get_logits(self.ptr)
        address = ctypes.addressof(ptr.contents)
        if address != self._logits_address:
            self._logits = np.ctypeslib.as_array(ptr, shape=(self.max_rows, self.model.n_vocab))
            self._logits_address = address
        return self._logits

    def rewind(self, keep: int) -> None:
        """Forget every position from `keep` on (llama_memory_seq_rm)."""
        if keep >= len(self.tokens):
            return
        if not self.ptr:
            raise RuntimeFailure("this model context was closed")
        t0 = time.perf_counter()
        ok = llama.llama_memory_seq_rm(self.memory, 0, keep, -1)
        self.decode_s += time.perf_counter() - t0
        if not ok and self.has_state:
            # Past the latest batch's snapshots (a follow-up that shares only part of the
            # conversation): start the state again from the kept tokens.
            kept = self.tokens[:keep]
            self.clear()
            keeper = self._keeper
            if kept and keeper is not None:  # its row is no draft's: not over one a round still reads
                keeper.aside = True
            try:
                if kept:
                    self.decode(kept, all_logits=False)
            finally:
                if keeper is not None:
                    keeper.aside = False
            self.rewinds_replayed += 1
            return
        if not ok:
            raise RuntimeFailure(f"{self.model.path.name} cannot rewind its cache to position {keep:,}.")
        del self.tokens[keep:]
        self._unread = 0  # a fed batch's row is for a position no longer held
        if self._prefilled is not None and keep < len(self._prefilled[0]):
            self._prefilled = None  # the prompt's pass is no longer whole in the cache

    def sync(self, tokens: list[int]) -> int:
        """Make the cache hold exactly `tokens`, keeping the longest common prefix.

        Returns how many tokens had to be decoded.
        """
        same = common_prefix(self.tokens, tokens)
        self.rewind(same)
        rest = tokens[same:]
        if rest:
            self.decode(rest, all_logits=False)
        return len(rest)

    def prefill(self, tokens: list[int]) -> tuple[np.ndarray, int]:
        """Make the cache hold `tokens` and return the last token's logits (a copy).

        The tokens the cache lacks are decoded in one batch, the last among them, as
        llama.cpp's own prefill does, so the first reply token comes from the prompt's
        pass. Returns the row and how many tokens were decoded.
        """
        same = common_prefix(self.tokens, tokens)
        if same == len(tokens) and self._prefilled is not None and self._prefilled[0] == tokens:
            # The same prompt again (a regenerated reply, a repeated run): its pass is still
            # in the cache, and so is the row it gave. Decoding the last token again alone
            # would round differently from the batch that first took it in. Taken before the
            # rewind: a recurrent state past its snapshots is decoded again from the kept tokens,
            # which clears the cache and what it remembers of the prompt's pass.
            row = self._prefilled[1]
            self.rewind(same)
            self._prefilled = (list(tokens), row)
            return row.copy(), 0
        same = min(same, len(tokens) - 1)  # the last token needs logits
        self.rewind(same)
        row = self.decode(tokens[same:], all_logits=False)[-1].copy()
        self._prefilled = (list(tokens), row)
        return row.copy(), len(tokens) - same

    def clear(self) -> None:
        llama.llama_memory_clear(self.memory, True)
        self.tokens.clear()
        self._unread = 0
        self._prefilled = None

    def close(self) -> None:
        if getattr(self, "ptr", None):
            self._batch.free()
            llama.llama_free(self.ptr)
            self.ptr = None
        greedy = getattr(self, "_greedy", None)  # None too where __init__ failed before it
        if greedy is not None:
            greedy.close()  # after the context that used it

    def __del__(self) -> None:
        self.close()
