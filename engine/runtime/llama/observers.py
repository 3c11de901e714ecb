"""Who is told about every batch a context decodes: a drafter that reads the target's hidden
states (an MTP head) sees each batch's tokens and, where it asks, the model's hidden state per
token; a plain reply pauses them all (no hidden states computed for nobody)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

import llama_cpp.llama_cpp as llama
import llama_cpp.llama_cpp_ext as llama_ext
import numpy as np

from engine.runtime.llama.options import LoadedModel
from engine.runtime.protocol import BatchObserver


class ObservedContext(Protocol):
    """What the observers read of their Context (which imports this module): the pointers."""

    ptr: object  # its llama.cpp context, None once closed

    @property
    def model(self) -> LoadedModel: ...


class BatchObservers:
    """One context's observers (Context.observe_batches), and whether its decodes compute hidden states."""

    def __init__(self, ctx: ObservedContext) -> None:
        self._ctx = ctx  # its llama.cpp pointer (None once closed) and its model
        self.entries: list[tuple[BatchObserver, bool]] = []  # and whether each wants hidden states
        self._paused = 0  # paused() nesting: while above 0, no observer is told anything
        self._hidden_width = 0

    @property
    def listening(self) -> bool:
        """Whether a decoded batch is to be handed on."""
        return bool(self.entries) and not self._paused

    def add(self, observer: BatchObserver, hidden_states: bool) -> Callable[[], None]:
        entry = (observer, hidden_states)
        self.entries.append(entry)
        self._want_hidden_states()

        def stop() -> None:
            if entry in self.entries:
                self.entries.remove(entry)
            if self._ctx.ptr:
                self._want_hidden_states()

        return stop

    @contextmanager
    def paused(self) -> Iterator[None]:
        self._paused += 1
        self._want_hidden_states()
        try:
            yield
        finally:
            self._paused -= 1
            if self._ctx.ptr:
                self._want_hidden_states()

    def tell(self, tokens: list[int], start: int) -> None:
        """Hand a decoded batch to every observer, with its hidden states where asked."""
        n, width = len(tokens), self._hidden_width
        hidden = None
        if width:
            ptr = llama_ext.llama_get_embeddings_nextn(self._ctx.ptr)
            hidden = np.ctypeslib.as_array(ptr, shape=(n * width,)).reshape(n, width).copy()
        for observer, wants in list(self.entries):
            observer(tokens, start, hidden if wants else None)

    def _want_hidden_states(self) -> None:
        wanted = not self._paused and any(hidden for _, hidden in self.entries)
        llama_ext.llama_set_embeddings_nextn(self._ctx.ptr, wanted, False)  # unmasked: a row for every token
        self._hidden_width = int(llama.llama_model_n_embd_out(self._ctx.model.ptr)) if wanted else 0
