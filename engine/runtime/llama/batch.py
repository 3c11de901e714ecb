"""The one llama.cpp batch a context allocates up front and reuses for every decode."""

from __future__ import annotations

import llama_cpp.llama_cpp as llama
import numpy as np


class Batch:
    """A llama_batch of `capacity` rows for one sequence, written through numpy views of its arrays."""

    def __init__(self, capacity: int):
        self.raw = llama.llama_batch_init(capacity, 0, 1)
        b = self.raw
        self._tokens = np.ctypeslib.as_array(b.token, shape=(capacity,))
        self._pos = np.ctypeslib.as_array(b.pos, shape=(capacity,))
        self._want = np.ctypeslib.as_array(b.logits, shape=(capacity,))
        n_seq = np.ctypeslib.as_array(b.n_seq_id, shape=(capacity,))
        n_seq[:] = 1
        for i in range(capacity):
            b.seq_id[i][0] = 0

    def fill(self, chunk: list[int], past: int, all_logits: bool, last_chunk: bool) -> None:
        """`chunk` at the positions after `past`, asking for logits on every row (all_logits) or, in
        the last chunk of a decode, on its last row."""
        m = len(chunk)
        if m == 1:  # a step: numpy's scalar stores, not its slice assignment from a list
            self._tokens[0], self._pos[0], self._want[0] = chunk[0], past, 1 if all_logits or last_chunk else 0
        else:
            self._tokens[:m] = chunk
            self._pos[:m] = np.arange(past, past + m, dtype=np.int32)
            self._want[:m] = 1 if all_logits else 0
            if last_chunk:
                self._want[m - 1] = 1
        self.raw.n_tokens = m

    def free(self) -> None:
        llama.llama_batch_free(self.raw)
