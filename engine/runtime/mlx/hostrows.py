"""Rows left where the device computed them until something reads them.

On MLX's CUDA build an evaluated array lives in the GPU's own memory, and the host's first read of it
(numpy's view of a row included) moves the whole buffer to memory the host can read: a verify's rows
are the vocabulary's width each, 600 KB a row at Qwen's, moved every round. mlx-lm's generate_step
never reads a row. A greedy round needs none either where the device took each row's argmax, largest
logit and softmax normaliser (ahead.Rows): its tokens are the argmaxes and their probabilities those
parts alone. `UnreadRows` stands in for the rows a decode hands back there: reading it in any way
copies the rows to the host once (counted by the eval audit) and reads the copy, so a caller that
needs a row (the teaching mode's alternatives, a replaced draft's rank) still gets it.
`DeviceRows` is the context's half that answers the round from the device's choices.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import numpy as np

from engine.errors import RuntimeFailure
from engine.runtime.contexts import device_choices
from engine.runtime.mlx import audit
from engine.runtime.protocol import Acceleration
from engine.sampling import parts_from_top


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


class DeviceRows:
    """MlxContext's rows as the device chose them: each row's greedy token, largest logit and softmax
    normaliser where the device took them (ahead.Rows), and whether a decode leaves its rows there.
    MlxContext.__init__ and its decodes set the state."""

    acceleration: Acceleration
    argmax: list[int] | None
    normalisers: list[float] | None
    largests: list[float] | None
    _banned: tuple[int, ...]  # the ban the latest decode added to its rows on the device
    _defer_next: bool

    def defer_rows(self) -> bool:
        """The next decode's rows stay on the device until something reads them, where the device takes
        each row's argmax and softmax parts (a GPU): a greedy round reads nothing more, and on MLX's CUDA
        build a row read is the row's buffer moved to the host (engine.runtime.mlx.hostrows)."""
        self._defer_next = self.acceleration.argmax_on_device
        return self._defer_next

    def device_choices(self, banned: tuple[int, ...] = ()) -> list[int | None] | None:
        """The latest decode's greedy token per row, where the device took them: None for a row whose
        token is banned (the caller scans that row with the ban), as llama.cpp's context answers."""
        return device_choices(self.argmax, banned)

    def device_parts(self, rows: np.ndarray, banned: tuple[int, ...] = ()) -> list[tuple[float, float] | None] | None:
        """The latest decode's `rows` (as read: the ban added on the device, or none) as softmax_parts,
        `banned` given no probability, from the device's argmax and normaliser (None where it took neither)."""
        if self.argmax is None or self.normalisers is None:
            return None
        if self.largests is not None and all(b in self._banned for b in banned):  # nothing of a row to read:
            return [  # a banned token's term is exp(-inf), nothing (parts_from_top's own test of the rest)
                None if t in banned or not p >= 1.0 else (top, p)
                for t, p, top in zip(self.argmax, self.normalisers, self.largests, strict=True)
            ]
        return [
            None if t in banned else parts_from_top(row, t, p, banned)
            for row, t, p in zip(rows, self.argmax, self.normalisers, strict=True)
        ]

    @property
    def keeps_rows(self) -> bool:
        return False

    def keep_banned(self, banned: tuple[int, ...]) -> None:
        """Nothing to do: no row stays on the device."""

    def kept_row(self, position: int, out: np.ndarray) -> np.ndarray:
        raise RuntimeFailure("the MLX runtime keeps no rows on the device.")
