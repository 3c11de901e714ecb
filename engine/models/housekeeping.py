"""The model cache's upkeep: files that an assembly killed mid-way left behind.

`fetch.assemble` writes a model as `NAME.partial-PID` and renames it when whole; a process
killed on the way (a closed terminal, a crash) leaves that file, about the model's size,
forever. The next run that resolves a catalog model removes those whose process is gone.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def remove_stale_partials(folder: Path) -> list[Path]:
    """Delete the `.partial-PID` files of assemblies whose process is gone (killed mid-way); return them."""
    removed = []
    for path in folder.glob("*.partial-*"):
        pid = path.name.rsplit(".partial-", 1)[1]
        if pid.isdigit() and not _alive(int(pid)):
            try:
                path.unlink()
                removed.append(path)
            except OSError:
                pass  # another run's cleanup won, or a read-only folder: nothing to do
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    if sys.platform == "win32":  # os.kill(pid, 0) would send CTRL_C_EVENT there: keep the file
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: alive
    return True
