"""Where a finished reply reaches the ledger: Engine.stream calls `record` with its RunStats.

Every local reply goes through Engine.stream (the app, `chat`, `serve`, the lab, the pairing
doctor's probe, `bench`), so each adds itself here once. The ledger is opened on the first
reply; a reply never waits on, or fails for, the ledger: a failure is kept as a sentence.
"""

from __future__ import annotations

import importlib.metadata
import threading
from pathlib import Path

from engine.events import RunStats
from engine.ledger.fingerprint import FileIdentity, identity
from engine.ledger.store import Ledger, Setup, default_path, open_ledger

_lock = threading.Lock()
_opened: dict[str, Ledger] = {}  # by path: one connection per file in a process


def ledger(path: Path | None = None) -> Ledger | None:
    """The ledger at `path` (default: default_path()); None where the ledger is turned off."""
    path = path or default_path()
    if path is None:
        return None
    with _lock:
        if str(path) not in _opened:
            _opened[str(path)] = open_ledger(path)
        return _opened[str(path)]


def draftlight_version() -> str:
    try:
        return importlib.metadata.version("draftlight")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def drafter_file(drafter) -> Path | None:
    """The file or folder a drafter was loaded from: a draft model's, DFlash's, EAGLE-3's, an MLX
    assistant's; None for n-grams and heads inside the target (the target's fingerprint stands for those)."""
    path = getattr(getattr(drafter, "model", None), "path", None) or getattr(drafter, "folder", None)
    return Path(path) if path is not None else None


def pair_identity(target_path: Path, drafter) -> tuple[FileIdentity, FileIdentity]:
    """Both files' identities; a file that cannot be read is named, its fingerprint unknown."""
    try:
        target = identity(target_path)
    except OSError:
        target = FileIdentity(Path(target_path).name, "unreadable", 0.0)
    try:
        made = identity(drafter_file(drafter), drafter.kind)
    except OSError:
        made = FileIdentity(drafter.name, "unreadable", 0.0)
    return target, made


def setup_for(
    identities: tuple[FileIdentity, FileIdentity], drafter_kind: str, runtime: str, stats: RunStats, temperature: float
) -> Setup:
    target, drafter = identities
    return Setup(
        target=target.name,
        drafter=drafter.name,
        drafter_kind=drafter_kind,
        target_fingerprint=target.fingerprint,
        drafter_fingerprint=drafter.fingerprint,
        runtime=runtime,
        draftlight=draftlight_version(),
        sampling="greedy" if temperature <= 0 else f"temperature {temperature:g}",
        depth=str(stats.depth),
        target_modified=target.modified,
        drafter_modified=drafter.modified,
    )


def record(setup: Setup, stats: RunStats, source: str, where: Ledger | None = None) -> None:
    """Add a finished reply that drafted something; the ledger keeps any failure as a sentence."""
    if stats.drafted == 0:
        return
    book = where or ledger()
    if book is None:
        return
    content = [(c.kind, c.drafted, c.accepted) for c in stats.by_content]
    book.add(setup, source, stats.drafted_per_position, stats.accepted_per_position, content)
