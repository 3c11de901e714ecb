"""A context on a model's own draft heads: MTP (NextN) blocks that ride on the target.

The head reads pairs (token at position p, the target's hidden state at p-1) and answers
with logits and its own hidden state for the next step, as llama.cpp's draft-mtp driver
feeds it (common/speculative.cpp). It shares the target's weights (one model, a second
context of type MTP) and keeps its own small KV cache, whose suffix can always be dropped.
"""

from __future__ import annotations

import ctypes
import time

import llama_cpp.llama_cpp as llama
import llama_cpp.llama_cpp_ext as llama_ext
import numpy as np

from engine.errors import IncompatibleDrafter, RuntimeFailure
from engine.runtime.llama import KV_TYPES, Context, _log_state

_FLOATS = ctypes.POINTER(ctypes.c_float)

# (token, position, the hidden state it reads or None, whether its logits are wanted)
Entry = tuple[int, int, np.ndarray | None, bool]


class HeadContext:
    """The MTP head of `target`'s model, on its own KV cache."""

    def __init__(self, target: Context) -> None:
        model = target.model
        self.n_heads = int(llama.llama_model_n_layer_nextn(model.ptr))
        if self.n_heads <= 0:
            raise IncompatibleDrafter(
                f"{model.name} has no multi-token-prediction (NextN) heads, so it cannot draft for itself: "
                "choose a draft model or the n-gram drafter."
            )
        self.model = model
        self.width = int(llama.llama_model_n_embd_out(model.ptr))
        params = llama.llama_context_default_params()
        params.n_ctx = target.n_ctx
        params.n_batch = params.n_ubatch = target.capacity
        params.n_seq_max = 1
        params.n_outputs_max = params.n_outputs_max_per_seq = 1  # one draft step at a time
        params.n_threads = params.n_threads_batch = target.options.threads
        params.type_k = params.type_v = KV_TYPES[target.options.kv_type]
        params.ctx_type = llama.LLAMA_CONTEXT_TYPE_MTP
        params.ctx_other = target.ptr
        params.no_perf = True
        ptr = llama.llama_init_from_model(model.ptr, params)
        if not ptr:
            reason = "; ".join(_log_state["recent"]) or "out of memory?"
            raise RuntimeFailure(f"llama.cpp could not make a context on {model.name}'s MTP head: {reason}")
        self.ptr = ptr
        llama_ext.llama_set_embeddings_nextn(ptr, True, True)  # the head's own state, per output row
        self.memory = llama.llama_get_memory(ptr)
        self.n_vocab = model.n_vocab
        self._batch = llama.llama_batch_ext_init(ptr)
        self.n_past = 0  # positions the head's cache holds
        self.decode_s = 0.0

    def decode(self, entries: list[Entry]) -> tuple[np.ndarray, np.ndarray]:
        """Decode entries in one batch; return (logits, hidden state) rows of the outputs, copies."""
        b = self._batch
        llama.llama_batch_ext_clear(b)
        outputs = []
        keep_alive = []
        for token, pos, hidden, output in entries:
            i = llama.llama_batch_ext_add_token(b, 0, token)
            if i < 0:
                raise RuntimeFailure(f"the MTP head's batch refused token {token} (code {i}).")
            llama.llama_batch_ext_set_pos(b, i, (ctypes.c_int32 * 1)(pos))
            if hidden is not None:
                row = np.ascontiguousarray(hidden, dtype=np.float32)
                keep_alive.append(row)
                llama.llama_batch_ext_set_embd_token(b, i, llama.llama_embd(row.ctypes.data_as(_FLOATS), 1, row.size))
            if output:
                llama.llama_batch_ext_set_output_logits(b, i, True)
                outputs.append(i)
        t0 = time.perf_counter()
        rc = llama.llama_process(self.ptr, llama.LLAMA_PROCESS_TYPE_DECODE, b)
        if rc != 0:
            self.decode_s += time.perf_counter() - t0
            raise RuntimeFailure(f"llama.cpp failed to run the MTP head on {len(entries)} tokens (code {rc}).")
        logits = np.empty((len(outputs), self.n_vocab), dtype=np.float32)
        hidden_out = np.empty((len(outputs), self.width), dtype=np.float32)
        for row, i in enumerate(outputs):
            logits[row] = np.ctypeslib.as_array(llama.llama_get_logits_ith(self.ptr, i), shape=(self.n_vocab,))
            hidden_out[row] = np.ctypeslib.as_array(
                llama_ext.llama_get_embeddings_nextn_ith(self.ptr, i), shape=(self.width,)
            )
        self.decode_s += time.perf_counter() - t0
        self.n_past = max(self.n_past, max(pos for _, pos, _, _ in entries) + 1)
        return logits, hidden_out

    def rewind(self, keep: int) -> None:
        """Forget positions from `keep` on (a plain KV cache: always possible)."""
        if keep >= self.n_past:
            return
        t0 = time.perf_counter()
        llama.llama_memory_seq_rm(self.memory, 0, keep, -1)
        self.decode_s += time.perf_counter() - t0
        self.n_past = keep

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
