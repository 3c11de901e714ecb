"""Progress on a terminal: a one-line bar for model assembly, checks and downloads."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable


def terminal_progress(stream=None) -> Callable[[int, int, str], None]:
    """A one-line progress bar: report(done, total, label), bytes."""
    stream = stream or sys.stderr
    last_label: list[str | None] = [None]
    last_at = [0.0]

    def report(done: int, total: int, label: str) -> None:
        now = time.monotonic()
        if label == last_label[0] and done < total and now - last_at[0] < 0.1:
            return
        last_label[0], last_at[0] = label, now
        frac = done / total if total else 1.0
        bar = "#" * int(frac * 30)
        stream.write(f"\r{label}: [{bar:<30}] {frac:6.1%} {done / 1e6:,.0f}/{total / 1e6:,.0f} MB")
        if done >= total:
            stream.write("\n")
        stream.flush()

    return report


def say_on_stderr(prefix: str) -> Callable[[str], None]:
    """A sentence at a time on standard error, e.g. while a box profile is measured."""
    return lambda message: print(f"{prefix}: {message}", file=sys.stderr)
