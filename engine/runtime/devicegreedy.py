"""Greedy tokens chosen on the device: llama.cpp's greedy sampler in a context's decode graph.

A backend sampler runs in the decode itself, so on a GPU the host never scans a row before
the next decode can launch; the rows still arrive (unchanged) for the probabilities. A second
sampler in the same chain (ours, `Normaliser`) sums each row's softmax terms on the device and
hands back one float a row, sum(exp(row - row[greedy token])): with it, any token's probability
in the row is a lookup on the host, not a pass over the vocabulary.
"""

from __future__ import annotations

import ctypes
import functools
import math

import llama_cpp.llama_cpp as llama
import numpy as np

from engine.errors import RuntimeFailure
from engine.sampling import softmax_parts

# How far the device's normaliser may sit from the host's own (softmax_parts) of the same row,
# relative, in the check each context makes once: float32 sums in another order differ in the 6th digit.
NORMALISER_TOLERANCE = 1e-4


class DeviceGreedy:
    """llama.cpp's greedy sampler attached to one context, and the rows it passes on."""

    def __init__(self, chain: object, n_vocab: int, max_rows: int, normalisers: bool) -> None:
        self._chain: object | None = chain
        self._shape = (max_rows, n_vocab)
        self._checked = False
        self._address = 0
        self._rows = np.empty((0, n_vocab), dtype=np.float32)
        self.normalisers = normalisers  # whether Normaliser is in the chain (and still asked)
        # the interface its llama_sampler points at, held as long as the chain that owns it
        self._interface = Normaliser.interface() if normalisers else None

    @classmethod
    def attach(cls, ctx: object, n_vocab: int, max_rows: int) -> DeviceGreedy | None:
        """The sampler in ctx's decodes, the Normaliser after it where ggml can be reached; None
        where the backend cannot run it."""
        chain = llama.llama_sampler_chain_init(llama.llama_sampler_chain_default_params())
        llama.llama_sampler_chain_add(chain, llama.llama_sampler_init_greedy())  # the chain owns it
        normaliser = Normaliser.make()
        if normaliser is not None:
            llama.llama_sampler_chain_add(chain, normaliser)  # after greedy: it reads the greedy token
        if llama.llama_set_sampler(ctx, 0, chain):
            return cls(chain, n_vocab, max_rows, normaliser is not None)
        llama.llama_sampler_free(chain)
        return None

    @property
    def attached(self) -> bool:
        return self._chain is not None

    def rows(self, ctx: object, rows: int, m: int) -> tuple[np.ndarray, list[int] | None, list[float] | None]:
        """The last `rows` rows of a batch of m (the logits, unchanged), the device's argmax of each
        and the row's softmax normaliser at it, sum(exp(row - row[argmax])); None for the argmax
        where the host must scan the rows, and for the normalisers where the device gave none."""
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
        sums = self._normalisers(ctx, first, rows) if named else None
        if named and sums is None:
            self.normalisers = False  # none came back: every probability is the host's from now on
        if not self._checked:
            # Once per context, the device's choice is checked against the rows it came with (a
            # tie may pick another index of the same value), and its normaliser against the
            # host's; a backend that errs, or names no token, is not used again.
            wrong = not named or any(view[i, t] != view[i].max() for i, t in enumerate(argmax))
            if not wrong and sums is not None:
                wrong = any(
                    not math.isclose(z, softmax_parts(view[i])[1], rel_tol=NORMALISER_TOLERANCE)
                    for i, z in enumerate(sums)
                )
            if wrong:
                self.detach(ctx)
                return view, None, None  # the host scans this decode's rows, and every one after
            self._checked = True
        elif not named:
            return view, None, None  # no token (a row of NaNs gives the kernel none above -FLT_MAX): the host scans
        return view, argmax, sums

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


class _SamplerI(ctypes.Structure):
    """llama.h's llama_sampler_i, every member a plain function pointer (NULL where unused)."""

    _fields_ = [
        (name, ctypes.c_void_p)
        for name in (
            "name", "accept", "apply", "reset", "clone", "free", "backend_init", "backend_accept",
            "backend_apply", "backend_set_input", "backend_reset", "copy_state",
        )
    ]  # fmt: skip


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
    def interface() -> tuple[_SamplerI, tuple[object, ...]] | None:
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
        iface = _SamplerI()
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
    """ggml's graph functions, typed, from the llama.cpp library in use (its own ggml: a symbol
    looked up through it searches the libraries it loaded); None where one is missing."""
    lib = llama._lib
    p, i64 = ctypes.c_void_p, ctypes.c_int64
    for fn, args, res in (
        ("ggml_nelements", [p], i64),
        ("ggml_reshape_1d", [p, p, i64], p),
        ("ggml_reshape_2d", [p, p, i64, i64], p),
        ("ggml_get_rows", [p, p, p], p),
        ("ggml_sub", [p, p, p], p),
        ("ggml_exp", [p, p], p),
        ("ggml_sum", [p, p], p),
    ):
        f = getattr(lib, fn, None)
        if f is None:
            return None
        f.argtypes, f.restype = args, res
    return lib
