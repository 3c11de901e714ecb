"""Rows left where the device computed them until something reads them.

On MLX's CUDA build an evaluated array lives in the GPU's own memory, and the host's first read of it
(numpy's view of a row included) moves the whole buffer to memory the host can read: a verify's rows
are the vocabulary's width each, 600 KB a row at Qwen's, moved every round. mlx-lm's generate_step
never reads a row. A greedy round needs none either where the device took each row's argmax, largest
logit and softmax normaliser (ahead.Rows): its tokens are the argmaxes and their probabilities those
parts alone. `UnreadRows` stands in for the rows a decode hands back there: reading it in any way
copies the rows to the host once (counted by the eval audit) and reads the copy, so a caller that
needs a row (the teaching mode's alternatives, a replaced draft's rank) still gets it.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import numpy as np

from engine.runtime.mlx import audit


class UnreadRows:
    """An evaluated [n, vocab] float32 array on the device, read as a numpy array on first use."""

    def __init__(self, rows: mx.array) -> None:
        self._rows: mx.array | None = rows
        self._host: np.ndarray | None = None
        self.shape: tuple[int, ...] = tuple(rows.shape)

    @property
    def copied(self) -> bool:
        """Whether the rows were read (copied to the host)."""
        return self._host is not None

    def host(self) -> np.ndarray:
        """The rows as a numpy array: copied from the device the first time."""
        if self._host is None:
            assert self._rows is not None
            self._host, self._rows = np.asarray(self._rows), None
            audit.copied()
        return self._host

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        host = self.host()
        return host if dtype is None else host.astype(dtype)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key: Any) -> Any:
        return self.host()[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self.host()[key] = value

    def __iter__(self) -> Any:
        return iter(self.host())

    def __getattr__(self, name: str) -> Any:  # copy(), argmax(), dtype, ...: the numpy array's own
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.host(), name)
