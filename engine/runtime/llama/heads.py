"""Contexts for drafters that read the target: a model's own MTP (NextN) head, a DFlash drafter.

A draft context decodes entries that carry a token, a token with a hidden-state row, or a
row alone (DFlash writes the target's features into its cache that way), as llama.cpp's
drivers feed theirs (common/speculative.cpp, through llama_batch_ext). The MTP head shares
the target's weights (one model, a second context of type MTP); a DFlash drafter is a model
of its own that may borrow the target's embeddings (`ctx_other`). Either keeps its own
small KV cache, whose suffix can always be dropped.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Iterator
from contextlib import contextmanager

import llama_cpp.llama_cpp as llama
import llama_cpp.llama_cpp_ext as llama_ext
import numpy as np

from engine.errors import IncompatibleDrafter, RuntimeFailure
from engine.runtime.llama.backend import clear_log, llama_reason
from engine.runtime.llama.context import Context
from engine.runtime.llama.options import KV_TYPES

_FLOATS = ctypes.POINTER(ctypes.c_float)

# (token, or None for a row alone; position; the hidden-state row it carries, or None; whether its logits are wanted)
Entry = tuple[int | None, int, np.ndarray | None, bool]


def _bind(symbol: str, argtypes: list, restype):
    """A llama.cpp function exported under its C++ name only (src/llama-ext.h)."""
    fn = getattr(llama._lib, symbol)
    fn.argtypes, fn.restype = argtypes, restype
    return fn


def set_layer_inputs(ctx_ptr, layers, on: bool) -> None:
    """Ask a context to keep (or stop keeping) the inputs of these trunk layers for every token it decodes."""
    args = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_bool]
    fn = _bind("_Z30llama_set_embeddings_layer_inpP13llama_contextjb", args, None)
    for layer in layers:
        fn(ctx_ptr, layer, on)


def layer_inputs(ctx_ptr, layer: int, n_tokens: int, width: int) -> np.ndarray:
    """The input of trunk layer `layer` for each token of the last batch: [n_tokens, width], a copy."""
    fn = _bind("_Z30llama_get_embeddings_layer_inpP13llama_contextj", [ctypes.c_void_p, ctypes.c_uint32], _FLOATS)
    return np.ctypeslib.as_array(fn(ctx_ptr, layer), shape=(n_tokens * width,)).reshape(n_tokens, width).copy()


def target_layers(model_ptr) -> list[int]:
    """Which target layers a drafter (EAGLE-3, DFlash) reads, from its file."""
    ids = _bind("_Z28llama_model_target_layer_idsPK11llama_model", [ctypes.c_void_p], ctypes.POINTER(ctypes.c_int32))
    count = _bind("_Z30llama_model_target_layer_ids_nPK11llama_model", [ctypes.c_void_p], ctypes.c_uint32)
    n = int(count(model_ptr))
    found = ids(model_ptr) if n else None
    return [int(found[i]) for i in range(n)] if found else []


def selector_top_k(model_ptr) -> int:
    """A DFlash2 drafter's selector width (0 for DFlash)."""
    return int(
        _bind("_Z33llama_model_dflash_selector_top_kPK11llama_model", [ctypes.c_void_p], ctypes.c_int32)(model_ptr)
    )


class DraftContext:
    """A drafter's context beside the target's: its own KV cache, entries in, logits and states out."""

    def __init__(self, model, target: Context, what: str, outputs: int = 1, mtp: bool = False) -> None:
        self.model = model
        self.what = what  # for sentences: "the MTP head", "the DFlash drafter"
        self.width = int(llama.llama_model_n_embd_out(model.ptr))
        params = llama.llama_context_default_params()
        params.n_ctx = target.n_ctx
        params.n_batch = params.n_ubatch = max(target.capacity, outputs)
        params.n_seq_max = 1
        params.n_outputs_max = params.n_outputs_max_per_seq = outputs
        params.n_threads = params.n_threads_batch = target.options.threads
        params.type_k = params.type_v = KV_TYPES[target.options.kv_type]
        if mtp:
            params.ctx_type = llama.LLAMA_CONTEXT_TYPE_MTP
        params.ctx_other = target.ptr
        params.no_perf = True
        clear_log()
        ptr = llama.llama_init_from_model(model.ptr, params)
        if not ptr:
            reason = llama_reason() or "out of memory?"
            raise RuntimeFailure(f"llama.cpp could not make a context for {what}: {reason}")
        self.ptr = ptr
        self.memory = llama.llama_get_memory(ptr)
        self.n_vocab = model.n_vocab
        self._batch = llama.llama_batch_ext_init(ptr)
        self.n_past = 0  # positions the cache holds
        self.decode_s = 0.0

    def encode(self, rows: np.ndarray, first_pos: int) -> np.ndarray:
        """Run the drafter's encoder over feature rows (EAGLE-3): its output per row, [n, width]; no cache change."""
        b = self._batch
        llama.llama_batch_ext_clear(b)
        rows = np.ascontiguousarray(rows, dtype=np.float32)
        for j, row in enumerate(rows):
            i = llama.llama_batch_ext_add_embd(b, 0, llama.llama_embd(row.ctypes.data_as(_FLOATS), 1, row.size))
            if i < 0:
                raise RuntimeFailure(f"{self.what}'s encoder batch refused a row (code {i}).")
            llama.llama_batch_ext_set_pos(b, i, (ctypes.c_int32 * 4)(first_pos + j, 0, 0, 0))
            llama.llama_batch_ext_set_output_logits(b, i, True)
        t0 = time.perf_counter()
        rc = llama.llama_process(self.ptr, llama.LLAMA_PROCESS_TYPE_ENCODE, b)
        if rc != 0:
            self.decode_s += time.perf_counter() - t0
            raise RuntimeFailure(f"llama.cpp failed to run {self.what}'s encoder on {len(rows)} rows (code {rc}).")
        ptr = llama_ext.llama_get_embeddings_nextn(self.ptr)
        out = np.ctypeslib.as_array(ptr, shape=(len(rows) * self.width,)).reshape(len(rows), self.width).copy()
        self.decode_s += time.perf_counter() - t0
        return out

    def last_position(self) -> int:
        """The last position the cache holds (-1 when empty)."""
        return int(llama.llama_memory_seq_pos_max(self.memory, 0))

    @contextmanager
    def nextn_layer(self, offset: int) -> Iterator[None]:
        """Run the model's `offset`-th NextN head (chained heads), then the first again."""
        if offset:
            llama_ext.llama_set_nextn_layer_offset(self.ptr, offset)
        try:
            yield
        finally:
            if offset:
                llama_ext.llama_set_nextn_layer_offset(self.ptr, 0)

    def all_hidden_states(self, n: int) -> np.ndarray:
        """Every row's hidden state of the last batch (`keep_hidden_states(masked=False)`): [n, width], a copy."""
        ptr = llama_ext.llama_get_embeddings_nextn(self.ptr)
        if not ptr:
            raise RuntimeFailure(f"llama.cpp handed out no hidden states for {self.what}.")
        return np.ctypeslib.as_array(ptr, shape=(n * self.width,)).reshape(n, self.width).copy()

    def keep_hidden_states(self, masked: bool = True) -> None:
        """Hand out the drafter's own hidden state (its next step's input), per output row."""
        llama_ext.llama_set_embeddings_nextn(self.ptr, True, masked)

    def decode(self, entries: list[Entry]) -> tuple[np.ndarray, np.ndarray]:
        """Decode entries in one batch; return (logits, hidden state) rows of the outputs, copies."""
        b = self._batch
        llama.llama_batch_ext_clear(b)
        outputs = []
        rows = []  # alive until the batch is decoded
        for token, pos, hidden, output in entries:
            row = None if hidden is None else np.ascontiguousarray(hidden, dtype=np.float32)
            embd = None if row is None else llama.llama_embd(row.ctypes.data_as(_FLOATS), 1, row.size)
            rows.append(row)
            if token is None:  # a row alone; positions as M-RoPE wants them: (p, p, p, 0)
                i = llama.llama_batch_ext_add_embd(b, 0, embd)
                positions = (ctypes.c_int32 * 4)(pos, pos, pos, 0)
            else:
                i = llama.llama_batch_ext_add_token(b, 0, token)
                positions = (ctypes.c_int32 * 1)(pos)
            if i < 0:
                raise RuntimeFailure(f"{self.what}'s batch refused an entry (code {i}).")
            llama.llama_batch_ext_set_pos(b, i, positions)
            if token is not None and embd is not None:
                llama.llama_batch_ext_set_embd_token(b, i, embd)
            if output:
                llama.llama_batch_ext_set_output_logits(b, i, True)
                outputs.append(i)
        t0 = time.perf_counter()
        rc = llama.llama_process(self.ptr, llama.LLAMA_PROCESS_TYPE_DECODE, b)
        if rc != 0:
            self.decode_s += time.perf_counter() - t0
            raise RuntimeFailure(f"llama.cpp failed to run {self.what} on {len(entries)} entries (code {rc}).")
        logits = np.empty((len(outputs), self.n_vocab), dtype=np.float32)
        states = np.zeros((len(outputs), self.width), dtype=np.float32)
        for at, i in enumerate(outputs):
            logits[at] = np.ctypeslib.as_array(llama.llama_get_logits_ith(self.ptr, i), shape=(self.n_vocab,))
            state = llama_ext.llama_get_embeddings_nextn_ith(self.ptr, i)
            if state:
                states[at] = np.ctypeslib.as_array(state, shape=(self.width,))
        self.decode_s += time.perf_counter() - t0
        self.n_past = max(self.n_past, max(pos for _, pos, _, _ in entries) + 1)
        return logits, states

    def rewind(self, keep: int) -> None:
        """Forget positions from `keep` on (a plain KV cache: always possible)."""
        t0 = time.perf_counter()
        llama.llama_memory_seq_rm(self.memory, 0, keep, -1)
        self.decode_s += time.perf_counter() - t0
        self.n_past = min(self.n_past, keep)

    def clear(self) -> None:
        llama.llama_memory_clear(self.memory, True)
        self.n_past = 0

    def close(self) -> None:
        if getattr(self, "ptr", None):
            llama.llama_batch_ext_free(self._batch)
            llama.llama_free(self.ptr)
            self.ptr = None

    def __del__(self) -> None:
        self.close()


def mtp_head(target: Context, sidecar=None) -> DraftContext:
    """The MTP head of `target`'s model (or of a file of its heads alone) on its own KV cache.

    A model without heads is refused in a sentence.
    """
    model = sidecar or target.model
    if int(llama.llama_model_n_layer_nextn(model.ptr)) <= 0:
        raise IncompatibleDrafter(
            f"{model.name} has no multi-token-prediction (NextN) heads, so it cannot draft for itself: "
            "choose a draft model or the n-gram drafter."
        )
    head = DraftContext(model, target, "the MTP head", outputs=1, mtp=True)
    head.keep_hidden_states(masked=True)
    return head
