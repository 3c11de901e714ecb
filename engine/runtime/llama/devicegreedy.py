"""Greedy tokens chosen on the device: llama.cpp's greedy sampler in a context's decode graph.

A backend sampler runs in the decode itself, so on a GPU the host never scans a row before
the next decode can launch; the rows still arrive (unchanged) for the probabilities. A second
sampler in the same chain (ours, `Normaliser`) sums each row's softmax terms on the device and
hands back one float a row, sum(exp(row - row[greedy token])): with it, any token's probability
in the row is a lookup on the host, not a pass over the vocabulary. A draft model's context may
put a third last (engine.runtime.llama.keptrows, `RowKeeper`): its rows then stay on the device, and
only the floats those lookups need come back.
"""

from __future__ import annotations

import ctypes
import functools
import math

import llama_cpp.llama_cpp as llama
import numpy as np

from engine.errors import RuntimeFailure
from engine.runtime.llama.ggmlapi import SamplerInterface, ggml_functions
from engine.runtime.llama.keptrows import KEPT_WIDTH, RowKeeper
from engine.runtime.protocol import MAX_BANNED
from engine.sampling import parts_from_top, softmax_parts

# How far the device's normaliser may sit from the host's own (softmax_parts) of the same row,
# relative, in the check each context makes once: float32 sums in another order differ in the 6th digit.
NORMALISER_TOLERANCE = 1e-4
# Where a kept row's banned logits sit in what came back (RowKeeper), by the ban's length
_KEPT_BANS = tuple(tuple(range(1, 1 + n)) for n in range(MAX_BANNED + 1))


class DeviceGreedy:
    """llama.cpp's greedy sampler attached to one context, and the rows it passes on."""

    def __init__(
        self, chain: object, n_vocab: int, max_rows: int, normalisers: bool, keeper: RowKeeper | None = None
    ) -> None:
        self._chain: object | None = chain
        self._shape = (max_rows, n_vocab)
        self._checked = False
        self._address = 0
        self._rows = np.empty((0, n_vocab), dtype=np.float32)
        self.normalisers = normalisers  # whether Normaliser is in the chain (and still asked)
        # the interface its llama_sampler points at, held as long as the chain that owns it
        self._interface = Normaliser.interface() if normalisers else None
        # where the rows stay on the device (RowKeeper, last in the chain) and a few floats come back
        self.keeper = keeper if keeper is not None and keeper.allocated else None
        self._owned_keeper = keeper  # freed with the chain, allocated or not

    @classmethod
    def attach(
        cls, ctx: object, n_vocab: int, max_rows: int, kept_rows: int = 0, positions: int = 0
    ) -> DeviceGreedy | None:
        """The sampler in ctx's decodes, the Normaliser after it where ggml can be reached, and a
        RowKeeper of `kept_rows` slots last where asked (one row a decode, with the Normaliser;
        `positions`: RowKeeper's); None where the backend cannot run it."""
        chain = llama.llama_sampler_chain_init(llama.llama_sampler_chain_default_params())
        llama.llama_sampler_chain_add(chain, llama.llama_sampler_init_greedy())  # the chain owns it
        normaliser = Normaliser.make()
        if normaliser is not None:
            llama.llama_sampler_chain_add(chain, normaliser)  # after greedy: it reads the greedy token
        keeper = None
        if kept_rows and normaliser is not None and max_rows == 1:
            keeper = RowKeeper(n_vocab, kept_rows, positions)
            if keeper.usable:
                llama.llama_sampler_chain_add(chain, keeper.sampler())  # last: it replaces what comes back
        if llama.llama_set_sampler(ctx, 0, chain):
            return cls(chain, n_vocab, max_rows, normaliser is not None, keeper)
        llama.llama_sampler_free(chain)
        if keeper is not None:
            keeper.close()
        return None

    @property
    def attached(self) -> bool:
        return self._chain is not None

    def rows(self, ctx: object, rows: int, m: int) -> tuple[np.ndarray, list[int] | None, list[float] | None]:
        """The last `rows` rows of a batch of m (the logits, unchanged), the device's argmax of each
        and the row's softmax normaliser at it, sum(exp(row - row[argmax])); None for the argmax
        where the host must scan the rows, and for the normalisers where the device gave none.
        Where a keeper holds the rows, each "row" is what came back instead (KEPT_WIDTH floats: the
        argmax's logit, then the banned tokens')."""
        first = m - rows  # the batch index of the first row with logits
        ptr = llama.llama_get_sampled_logits_ith(ctx, first)
        if not ptr:
            raise RuntimeFailure(f"llama.cpp returned no logits for a batch of {m} tokens.")
        address = ctypes.addressof(ptr.contents)
        if address != self._address:
            self._rows = np.ctypeslib.as_array(ptr, shape=self._shape)
            self._address = address
        keeper = self.keeper
        if keeper is not None and keeper.lost:  # its graph had no positions: the row itself came back
            self.detach(ctx)
            return self._rows[:rows], None, None
        view = self._rows[:rows] if keeper is None else self._rows[:rows, :KEPT_WIDTH]
        argmax = [llama.llama_get_sampled_token_ith(ctx, first + i) for i in range(rows)]
        named = min(argmax) >= 0 and max(argmax) < self._shape[1]
        sums = self._normalisers(ctx, first, rows) if named else None
        if named and sums is None:
            self.normalisers = False  # none came back: every probability is the host's from now on
        if not self._checked:
            # Once per context, the device's choice is checked against the rows it came with (a
            # tie may pick another index of the same value), and its normaliser against the
            # host's; a backend that errs, or names no token, is not used again.
            full = self._full(view)
            wrong = not named or any(full[i, t] != full[i].max() for i, t in enumerate(argmax))
            if not wrong and sums is not None:
                wrong = any(
                    not math.isclose(z, softmax_parts(full[i])[1], rel_tol=NORMALISER_TOLERANCE)
                    for i, z in enumerate(sums)
                )
            if not wrong and keeper is not None:  # what came back is the row's own
                wrong = view[0, 0] != full[0, argmax[0]] or any(
                    view[0, 1 + j] != full[0, b] for j, b in enumerate(keeper.banned)
                )
            if wrong:
                self.detach(ctx)
                return full, None, None  # the host scans this decode's rows, and every one after
            self._checked = True
        elif not named:
            return self._full(view), None, None  # no token (a row of NaNs has none above -FLT_MAX): the host scans
        return view, argmax, sums

    def parts(
        self, rows: np.ndarray, argmax: list[int], normalisers: list[float], banned: tuple[int, ...]
    ) -> list[tuple[float, float] | None] | None:
        """Context.device_parts: each row's softmax_parts from what came back with it (the row, or
        a keeper's floats: the argmax's logit, then the banned tokens' in turn)."""
        keeper = self.keeper
        if keeper is None:
            return [
                None if t in banned else parts_from_top(row, t, p, banned)
                for row, t, p in zip(rows, argmax, normalisers)
            ]
        if banned != keeper.banned:
            return None
        ban = _KEPT_BANS[len(banned)]
        return [None if t in banned else parts_from_top(row, 0, p, ban) for row, t, p in zip(rows, argmax, normalisers)]

    def _full(self, view: np.ndarray) -> np.ndarray:
        """The latest decode's rows themselves: `view`, or the row its keeper holds (fetched)."""
        keeper = self.keeper
        return view if keeper is None else keeper.fetch_slot(keeper.slot, np.empty(self._shape[1], np.float32))[None]

    def _normalisers(self, ctx: object, first: int, rows: int) -> list[float] | None:
        if not self.normalisers:
            return None
        out = []
        for i in range(rows):
            ptr = llama.llama_get_sampled_probs_ith(ctx, first + i)
            if not ptr:
                return None
            out.append(float(ptr[0]))
        return out

    def detach(self, ctx: object) -> None:
        """Take every argmax on the host from the next decode on."""
        llama.llama_set_sampler(ctx, 0, None)
        self.close()

    def close(self) -> None:
        """Free the sampler (after the context that used it, or once detached from it)."""
        if self._chain is not None:
            llama.llama_sampler_free(self._chain)
            self._chain = None
        self.keeper = None
        if self._owned_keeper is not None:
            self._owned_keeper.close()  # after the chain whose graphs read its tensors


class Normaliser:
    """A backend sampler for after greedy in a chain: a row's softmax normaliser at the greedy
    token, sum(exp(logits - logits[token])), summed on the device, as the chain's `probs` (one
    float a row, read with llama_get_sampled_probs_ith). The token's probability is its inverse.

    Its graph is elementwise work and one sum (no softmax kernel: CUDA's for a row this long is a
    cooperative launch, which waits for the whole device and so for the other context's decode
    beside it). It has no state (its llama_sampler's ctx is NULL, so llama.cpp clones and frees it
    itself); one interface serves every context. The graph is built with the decode's (not when
    llama.cpp reuses one).
    """

    _NAME = ctypes.create_string_buffer(b"draftlight-normaliser")

    @staticmethod
    @functools.cache
    def interface() -> tuple[SamplerInterface, tuple[object, ...]] | None:
        """The one llama_sampler_i of this kind and the callbacks it points at; None where ggml's
        graph functions cannot be found."""
        ggml = _ggml_base()
        if ggml is None:
            return None
        name_t = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
        apply_t = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
        init_t = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32)
        backend_apply_t = ctypes.CFUNCTYPE(
            None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(llama.llama_sampler_data)
        )

        def backend_apply(_smpl, gctx, _gf, data) -> None:
            d = data.contents
            if not d.logits or not d.sampled:
                return
            n = ggml.ggml_nelements(d.logits)
            row = ggml.ggml_reshape_1d(gctx, d.logits, n)
            top = ggml.ggml_get_rows(gctx, ggml.ggml_reshape_2d(gctx, row, 1, n), d.sampled)  # the token's logit
            d.probs = ggml.ggml_sum(gctx, ggml.ggml_exp(gctx, ggml.ggml_sub(gctx, row, top)))

        keep = (
            name_t(lambda _smpl: ctypes.addressof(Normaliser._NAME)),
            apply_t(lambda _smpl, _cur: None),  # never asked on the host: the chain's greedy sampler is
            # get_rows, sub, exp and sum, which every backend llama.cpp has runs; not probed here, as
            # greedy's own init does: the first decode's check stands for it (DeviceGreedy.rows)
            init_t(lambda _smpl, _buft, _n: True),
            backend_apply_t(backend_apply),
        )
        iface = SamplerInterface()
        iface.name, iface.apply, iface.backend_init, iface.backend_apply = (
            ctypes.cast(f, ctypes.c_void_p).value for f in keep
        )
        return iface, keep  # the callbacks live as long as the interface that points at them

    @classmethod
    def make(cls) -> object | None:
        """A new llama_sampler of this kind, for a chain to own; None where ggml cannot be reached."""
        found = cls.interface()
        if found is None:
            return None
        iface, _ = found
        return llama.llama_sampler_init(ctypes.cast(ctypes.pointer(iface), ctypes.POINTER(llama.llama_sampler_i)), None)


def _ggml_base() -> ctypes.CDLL | None:
    """ggml's graph functions the normaliser builds with; None where one is missing."""
    p, i64 = ctypes.c_void_p, ctypes.c_int64
    return ggml_functions(
        (
            ("ggml_nelements", [p], i64),
            ("ggml_reshape_1d", [p, p, i64], p),
            ("ggml_reshape_2d", [p, p, i64, i64], p),
            ("ggml_get_rows", [p, p, p], p),
            ("ggml_sub", [p, p, p], p),
            ("ggml_exp", [p, p], p),
            ("ggml_sum", [p, p], p),
        )
    )
