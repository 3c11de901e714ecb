"""A llama.cpp context's rows as the device chose them (engine.runtime.llama.devicegreedy): whether
llama.cpp takes each greedy argmax in the decode, whether the rows stay on the device, and the
greedy tokens and softmax parts of the latest decode. Context's device half."""

from __future__ import annotations

import numpy as np

from engine.errors import RuntimeFailure
from engine.runtime.contexts import device_choices
from engine.runtime.llama.devicegreedy import DeviceGreedy
from engine.runtime.llama.keptrows import RowKeeper
from engine.runtime.llama.options import LoadedModel


class DeviceRows:
    """The Context's methods on what its DeviceGreedy hands back; Context.__init__ sets the state."""

    model: LoadedModel
    _greedy: DeviceGreedy | None  # None where the device takes no argmax (acceleration.argmax_on_device)
    argmax: list[int] | None
    normalisers: list[float] | None

    @property
    def _keeper(self) -> RowKeeper | None:
        """Where each decode's row stays on the device (kept_rows), what keeps it."""
        return self._greedy.keeper if self._greedy is not None else None

    @property
    def device_argmax(self) -> bool:
        """Whether llama.cpp takes each greedy argmax in the decode (a backend sampler took here)."""
        return self._greedy is not None and self._greedy.attached

    @property
    def keeps_rows(self) -> bool:
        """Whether each decode's row stays on the device (kept_rows): `decode` then returns, a row,
        the argmax's logit and the banned tokens' (keep_banned), and `kept_row` fetches a row itself."""
        return self._greedy is not None and self._greedy.keeper is not None

    def keep_banned(self, banned: tuple[int, ...]) -> None:
        """The logits of `banned` (at most MAX_BANNED) come back with each kept row, from the next decode on."""
        keeper = self._keeper
        assert keeper is not None  # asked only where keeps_rows says the rows stay on the device
        keeper.ban(banned)

    def kept_row(self, position: int, out: np.ndarray) -> np.ndarray:
        """The row of the latest decode at `position`, copied into `out`, from a decode already read;
        a later decode at a position as many slots on (kept_rows) takes its place."""
        keeper = self._keeper
        if keeper is None:  # detached since the row was kept: its buffer is gone
            raise RuntimeFailure(
                f"{self.model.name}'s rows were handed back from the device during a round; ask again to go on."
            )
        return keeper.fetch(position, out)

    def device_choices(self, banned: tuple[int, ...] = ()) -> list[int | None] | None:
        """The latest decode's greedy token per output row, where the device took them: None for
        the whole decode where it did not, and for a row where it chose a banned token (the caller
        scans that row with the ban)."""
        return device_choices(self.argmax, banned)

    def device_parts(self, rows: np.ndarray, banned: tuple[int, ...] = ()) -> list[tuple[float, float] | None] | None:
        """Each of the latest decode's `rows` (as read, before any ban is written into them) as
        softmax_parts with `banned` tokens given no probability, from the device's argmax and its
        normaliser: a lookup, where softmax_parts passes over the row. None for the whole decode
        where the device gave neither, and for a row where its token is banned."""
        if self.argmax is None or self.normalisers is None:
            return None
        assert self._greedy is not None  # the argmax came from it (decode)
        return self._greedy.parts(rows, self.argmax, self.normalisers, banned)
