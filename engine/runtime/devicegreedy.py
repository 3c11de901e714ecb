"""Greedy tokens chosen on the device: llama.cpp's greedy sampler in a context's decode graph.

A backend sampler runs in the decode itself, so on a GPU the host never scans a row before
the next decode can launch; the rows still arrive (unchanged) for the probabilities.
"""

from __future__ import annotations

import ctypes

import llama_cpp.llama_cpp as llama
import numpy as np

from engine.errors import RuntimeFailure


class DeviceGreedy:
    """llama.cpp's greedy sampler attached to one context, and the rows it passes on."""

    def __init__(self, chain: object, n_vocab: int, max_rows: int) -> None:
        self._chain: object | None = chain
        self._shape = (max_rows, n_vocab)
        self._checked = False
        self._address = 0
        self._rows = np.empty((0, n_vocab), dtype=np.float32)

    @classmethod
    def attach(cls, ctx: object, n_vocab: int, max_rows: int) -> DeviceGreedy | None:
        """The sampler in ctx's decodes, or None where the backend cannot run it."""
        chain = llama.llama_sampler_chain_init(llama.llama_sampler_chain_default_params())
        llama.llama_sampler_chain_add(chain, llama.llama_sampler_init_greedy())  # the chain owns it
        if llama.llama_set_sampler(ctx, 0, chain):
            return cls(chain, n_vocab, max_rows)
        llama.llama_sampler_free(chain)
        return None

    @property
    def attached(self) -> bool:
        return self._chain is not None

    def rows(self, ctx: object, rows: int, m: int) -> tuple[np.ndarray, list[int] | None]:
        """The last `rows` rows of a batch of m (the logits, unchanged) and the device's argmax of
        each; None for the argmax where the host must scan them."""
        first = m - rows  # the batch index of the first row with logits
        ptr = llama.llama_get_sampled_logits_ith(ctx, first)
        if not ptr:
            raise RuntimeFailure(f"llama.cpp returned no logits for a batch of {m} tokens.")
        address = ctypes.addressof(ptr.contents)
        if address != self._address:
            self._rows = np.ctypeslib.as_array(ptr, shape=self._shape)
            self._address = address
        view = self._rows[:rows]
        argmax = [llama.llama_get_sampled_token_ith(ctx, first + i) for i in range(rows)]
        named = min(argmax) >= 0 and max(argmax) < view.shape[1]
        if not self._checked:
            # Once per context, the device's choice is checked against the rows it came with (a
            # tie may pick another index of the same value); a backend that errs, or names no
            # token, is not used again.
            if not named or any(view[i, t] != view[i].max() for i, t in enumerate(argmax)):
                self.detach(ctx)
                return view, None  # the host scans this decode's rows, and every one after
            self._checked = True
        elif not named:
            return view, None  # no token (a row of NaNs gives the kernel none above -FLT_MAX): the host scans
        return view, argmax

    def detach(self, ctx: object) -> None:
        """Take every argmax on the host from the next decode on."""
        llama.llama_set_sampler(ctx, 0, None)
        self.close()

    def close(self) -> None:
        """Free the sampler (after the context that used it, or once detached from it)."""
        if self._chain is not None:
            llama.llama_sampler_free(self._chain)
            self._chain = None
