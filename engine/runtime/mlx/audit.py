"""The eval audit: every time the host waits for MLX (an mx.eval, or a read of an array not yet
evaluated), counted once for the process, as MTPLX's eval audit logs each one.

Every MLX wait in the engine, a context's decode and each drafter's steps, goes through `wait`, so a
round's host syncs are the count's difference across it (RuntimeContext.host_syncs). mx.async_eval
launches work without waiting and is not counted. Rows copied from the device to the host
(engine.runtime.mlx.hostrows) are counted apart: on MLX's CUDA build each is a buffer moved.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx

_count = 0
_copies = 0


def wait(*arrays: Any) -> None:
    """mx.eval of `arrays`, counted: one host sync."""
    global _count
    mx.eval(*arrays)
    _count += 1


def syncs() -> int:
    """Host syncs so far in this process."""
    return _count


def copied() -> None:
    """A decode's rows read on the host (hostrows.UnreadRows): counted."""
    global _copies
    _copies += 1


def copies() -> int:
    """Rows read on the host that a decode left on the device, so far in this process."""
    return _copies
