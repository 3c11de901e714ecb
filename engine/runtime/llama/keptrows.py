"""A draft model's logits rows kept where the device computed them.

A drafter step on a GPU used to hand its whole row (the vocabulary's logits: 600 KB for Qwen's)
to the host, which copied it again for the round's figures: about 100 us of the host's a step,
on the critical path, for a row nothing reads unless the target refuses that draft. `RowKeeper`
is a backend sampler placed last in the drafter's chain: it writes each step's row into a slot
of a tensor the device holds (ggml's set_rows, the op a KV cache is written with) and hands the
host, in place of the row, a few floats: the greedy token's logit and the banned tokens'. The row
of position p goes to slot p % slots. Where the model's positions are plain (one a token), the
graph reads the slot off the decode's own positions, so the host writes nothing before a step
(naming it took a synchronous copy to the device, 18 us of a step on CUDA); else the host names
it (`aim`). A row is fetched (`fetch`) only where all of it is read: a refused draft's rank and
the target's token there, sampling, a scan.
"""

from __future__ import annotations

import ctypes

import llama_cpp.llama_cpp as llama
import numpy as np

from engine.runtime.llama.ggmlapi import SamplerInterface, ggml_functions
from engine.runtime.protocol import MAX_BANNED

# Banned tokens whose logits come back with each row (ignore_eog's end-of-generation ids: a
# handful); a longer ban is served by fetching the rows.
KEPT_WIDTH = 1 + MAX_BANNED  # the floats that come back a row: the greedy token's logit, the banned'
_F32, _I32 = 0, 26  # ggml_type


class _InitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


class RowKeeper:
    """The rows of one context's decodes, one a decode, the row of position p in slot p % slots.

    Its tensors (the rows, `slots` x n_vocab floats; the inputs: the host's slot and the banned
    ids; where `positions` is given, a table of p % slots for every position below it) live in a
    buffer of the device's own, allocated when llama.cpp attaches the chain, so every graph that
    reads them finds them whole (a graph input would hold stale bytes in a ubatch with no output
    row, whose sampler llama.cpp never asks to set it). The host writes the inputs only between
    decodes (`aim` waits for the device first), and only when they change.
    """

    _NAME = ctypes.create_string_buffer(b"draftlight-row-keeper")
    _POSITIONS = b"inp_pos"  # llama.cpp's name for a decode's positions tensor (llm_graph_context)

    def __init__(self, n_vocab: int, slots: int, positions: int = 0) -> None:
        self.n_vocab, self.slots = n_vocab, slots
        # the positions the table covers (a context's n_ctx) where the graph finds each row's slot
        # itself; 0 where the host names it before each decode
        self.positions = positions
        self._ggml = _ggml()
        self._gctx = self._buffer = None
        self._rows = self._inputs = self._table = None  # the tensors, once allocated
        self._wanted = np.zeros(KEPT_WIDTH, dtype=np.int32)  # [slot, banned ids..., 0...]
        self._held: tuple[int, tuple[int, ...]] | None = None  # what the device's inputs hold
        self._ban: tuple[int, ...] = ()  # the ban the next decode is to come back with (ban)
        self.slot = 0  # the slot the latest decode's row went to
        self.banned: tuple[int, ...] = ()  # and the ban whose logits came back with it
        self.lost = False  # a graph without the positions it was to read its slot from: not to be used
        # Where the host names slots: the rows of the decodes now under way are no draft's (a
        # state's replay), and go to the spare slot past the positions' (`slots`), not over a draft's.
        self.aside = False
        self._interface, self._keep = self._make_interface()

    @property
    def usable(self) -> bool:
        return self._ggml is not None

    def sampler(self) -> object:
        """A new llama_sampler of this keeper, for a chain to own (it frees nothing of ours)."""
        return llama.llama_sampler_init(
            ctypes.cast(ctypes.pointer(self._interface), ctypes.POINTER(llama.llama_sampler_i)), None
        )

    @property
    def allocated(self) -> bool:
        return self._rows is not None

    def ban(self, banned: tuple[int, ...]) -> None:
        """The logits of `banned` (at most MAX_BANNED) come back with each row from the next decode on."""
        if len(banned) > MAX_BANNED:
            raise ValueError(f"{len(banned)} banned tokens, more than {MAX_BANNED}")
        self._ban = banned

    def aim(self, ctx: object, position: int) -> None:
        """Before a decode whose last row is at `position`: its row goes to that position's slot,
        with the ban's logits. Writes the device's inputs only where they change: the ban (rarely),
        or the slot where the host names it."""
        slot = self.slots if self.aside and not self.positions else position % self.slots
        banned = self._ban
        self.slot, self.banned = slot, banned
        if self._inputs is None:
            return
        held = self._held
        if (held[1] is banned or held[1] == banned) and (self.positions or held[0] == slot):
            return
        wanted = self._wanted
        wanted[0] = slot
        wanted[1 : 1 + len(banned)] = banned
        wanted[1 + len(banned) :] = 0
        llama.llama_synchronize(ctx)  # no graph of this context reads the inputs while they change
        self._ggml.ggml_backend_tensor_set(self._inputs, wanted.ctypes.data, 0, wanted.nbytes)
        self._held = (slot, banned)

    def fetch(self, position: int, out: np.ndarray) -> np.ndarray:
        """The row kept for `position` (of the latest decode there), copied into `out` (n_vocab
        float32). Its decode must have been read."""
        if self._rows is None or position < 0:
            raise ValueError(f"no row kept for position {position}")
        return self.fetch_slot(position % self.slots, out)

    def fetch_slot(self, slot: int, out: np.ndarray) -> np.ndarray:
        """The row in `slot` (`slots`: the spare), copied into `out`."""
        if self._rows is None or not 0 <= slot <= self.slots:
            raise ValueError(f"no slot {slot}")
        assert out.dtype == np.float32 and out.shape == (self.n_vocab,) and out.flags.c_contiguous
        row_bytes = self.n_vocab * 4
        self._ggml.ggml_backend_tensor_get(self._rows, out.ctypes.data, slot * row_bytes, row_bytes)
        return out

    def close(self) -> None:
        """Free the device's buffer (after the chain that used it)."""
        if self._buffer is not None:
            self._ggml.ggml_backend_buffer_free(self._buffer)
            self._buffer = None
        if self._gctx is not None:
            self._ggml.ggml_free(self._gctx)
            self._gctx = None
        self._rows = self._inputs = self._table = self._held = None

    def _allocate(self, buft: int) -> bool:
        g = self._ggml
        assert g is not None  # usable() said so before any allocation
        self.close()
        params = _InitParams(4 * g.ggml_tensor_overhead(), None, True)
        self._gctx = g.ggml_init(params)
        if not self._gctx:
            return False
        rows = g.ggml_new_tensor_2d(self._gctx, _F32, self.n_vocab, self.slots + 1)  # and the spare
        inputs = g.ggml_new_tensor_1d(self._gctx, _I32, KEPT_WIDTH)
        table = g.ggml_new_tensor_2d(self._gctx, _I32, 1, self.positions) if self.positions else None
        self._buffer = g.ggml_backend_alloc_ctx_tensors_from_buft(self._gctx, buft)
        if not self._buffer:
            self.close()
            return False
        self._rows, self._inputs, self._table = rows, inputs, table
        self._wanted[:] = 0
        g.ggml_backend_tensor_set(inputs, self._wanted.ctypes.data, 0, self._wanted.nbytes)
        self._held = (0, ())
        if table is not None:
            slots = np.arange(self.positions, dtype=np.int32) % self.slots
            g.ggml_backend_tensor_set(table, slots.ctypes.data, 0, slots.nbytes)
        return True

    def _slot_index(self, gctx: int, gf: int) -> int | None:
        """The graph's slot for the decode's row: looked up for its last position in the table, or
        the host's (positions 0); None where the positions are not in the graph."""
        g = self._ggml
        assert g is not None
        if self._table is None:
            return g.ggml_view_1d(gctx, self._inputs, 1, 0)
        pos = g.ggml_graph_get_tensor(gf, self._POSITIONS)
        if not pos:
            return None
        n = g.ggml_nelements(pos)  # one a token (plain positions): the last is the row's
        last = g.ggml_view_1d(gctx, pos, 1, (n - 1) * 4)
        return g.ggml_reshape_1d(gctx, g.ggml_get_rows(gctx, self._table, last), 1)

    def _apply(self, gctx: int, gf: int, d: llama.llama_sampler_data) -> None:
        g = self._ggml
        if not d.logits or not d.sampled or self._rows is None:
            return
        n = g.ggml_nelements(d.logits)
        if n != self.n_vocab:  # the chain's probe graph (a made-up row): nothing of ours to keep
            return
        slot = self._slot_index(gctx, gf)
        if slot is None:
            self.lost = True  # what comes back is the row's own: the next read detaches us (DeviceGreedy.rows)
            return
        # In a ubatch with no output row (a long prefill's chunks) the row is llama.cpp's dummy one,
        # and it lands in the slot of that chunk's last position: no row a round reads is there then.
        kept = g.ggml_set_rows(gctx, self._rows, g.ggml_reshape_2d(gctx, d.logits, n, 1), slot)
        g.ggml_build_forward_expand(gf, kept)
        column = g.ggml_reshape_2d(gctx, d.logits, 1, n)
        top = g.ggml_get_rows(gctx, column, d.sampled)
        bans = g.ggml_get_rows(gctx, column, g.ggml_view_1d(gctx, self._inputs, MAX_BANNED, 4))
        d.logits = g.ggml_reshape_1d(gctx, g.ggml_concat(gctx, top, bans, 1), KEPT_WIDTH)  # what comes back

    def _make_interface(self) -> tuple[SamplerInterface, tuple[object, ...]]:
        name_t = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
        apply_t = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
        init_t = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32)
        backend_apply_t = ctypes.CFUNCTYPE(
            None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(llama.llama_sampler_data)
        )
        keep = (
            name_t(lambda _smpl: ctypes.addressof(RowKeeper._NAME)),
            apply_t(lambda _smpl, _cur: None),  # never asked on the host: the chain's greedy sampler is
            # set_rows, get_rows and concat run on every backend llama.cpp has; the first decode's
            # check (DeviceGreedy.rows) stands for a probe
            init_t(lambda _smpl, buft, _n: self.usable and self._allocate(buft)),
            backend_apply_t(lambda _smpl, gctx, gf, data: self._apply(gctx, gf, data.contents)),
        )
        iface = SamplerInterface()
        iface.name, iface.apply, iface.backend_init, iface.backend_apply = (
            ctypes.cast(f, ctypes.c_void_p).value for f in keep
        )
        return iface, keep


def _ggml() -> ctypes.CDLL | None:
    """ggml's functions a keeper needs; None where one is missing."""
    p, i64, size, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_size_t, ctypes.c_int
    return ggml_functions(
        (
            ("ggml_tensor_overhead", [], size),
            ("ggml_init", [_InitParams], p),
            ("ggml_free", [p], None),
            ("ggml_new_tensor_1d", [p, i32, i64], p),
            ("ggml_new_tensor_2d", [p, i32, i64, i64], p),
            ("ggml_backend_alloc_ctx_tensors_from_buft", [p, p], p),
            ("ggml_backend_buffer_free", [p], None),
            ("ggml_backend_tensor_set", [p, p, size, size], None),
            ("ggml_backend_tensor_get", [p, p, size, size], None),
            ("ggml_nelements", [p], i64),
            ("ggml_reshape_1d", [p, p, i64], p),
            ("ggml_reshape_2d", [p, p, i64, i64], p),
            ("ggml_view_1d", [p, p, i64, size], p),
            ("ggml_get_rows", [p, p, p], p),
            ("ggml_set_rows", [p, p, p, p], p),
            ("ggml_concat", [p, p, p, i32], p),
            ("ggml_build_forward_expand", [p, p], None),
            ("ggml_graph_get_tensor", [p, ctypes.c_char_p], p),
        )
    )
