"""Opening the chat database so that the app always starts.

A damaged file (cut short, not a database, a page that fails SQLite's quick check) is
moved aside under a new name with a timestamp, kept and never overwritten, and a fresh
database is started. Where no file can be written (a read-only folder, a folder in the
file's place, another program holding a lock), conversations are kept in memory for this
session. Either way the window says so in a sentence.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from PySide6.QtCore import QStandardPaths

from app.store import Store

DAMAGED = {"SQLITE_CORRUPT", "SQLITE_NOTADB"}  # what SQLite names a file it cannot trust
BUSY_TIMEOUT_S = 2.0  # another process's transaction; a chat write takes milliseconds


def default_store_path() -> Path:
    base = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.AppDataLocation)
    return Path(base or Path.home() / ".draftlight") / "conversations.sqlite3"


class Damaged(Exception):
    """The database file cannot be trusted; the reason in SQLite's words."""


def _connect(path: Path) -> sqlite3.Connection:
    """Open, switch to WAL and run the quick integrity check; Damaged if the file fails it."""
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S)
    try:
        # WAL: a reply streamed to disk survives a killed process; NORMAL syncs at checkpoints,
        # which loses nothing when only the app dies.
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        problems = [row[0] for row in db.execute("PRAGMA quick_check(3)")]
        if problems == ["ok"]:
            db.execute("BEGIN IMMEDIATE")  # can we write here at all? (a read-only file says so now, not later)
            db.rollback()
    except sqlite3.DatabaseError as exc:
        db.close()
        if getattr(exc, "sqlite_errorname", "") in DAMAGED:
            raise Damaged(str(exc)) from exc
        raise
    if problems != ["ok"]:
        db.close()
        found = [p for p in "\n".join(problems).splitlines() if p.strip() and not p.startswith("***")]
        raise Damaged(f"SQLite's integrity check: {found[0].strip() if found else 'no answer'}")
    return db


def _open(path: Path) -> Store:
    db = _connect(path)
    try:
        return Store(db, str(path))
    except sqlite3.DatabaseError as exc:
        db.close()
        if getattr(exc, "sqlite_errorname", "") in DAMAGED:
            raise Damaged(str(exc)) from exc
        raise


def cut_short(path: Path) -> bool:
    """Whether the file ends part way through a page: a copy or a write that stopped early."""
    try:
        with open(path, "rb") as f:
            header = f.read(100)
        size = path.stat().st_size
    except OSError:
        return False
    if len(header) < 100 or not header.startswith(b"SQLite format 3\0"):
        return len(header) < 100
    page = int.from_bytes(header[16:18], "big")
    page = 65536 if page == 1 else page
    return page >= 512 and size % page != 0


def aside_name(path: Path, now: float | None = None) -> Path:
    """A name beside `path` that no file has yet: conversations.damaged-20261201-004500.sqlite3."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    for n in range(1, 1000):
        tail = "" if n == 1 else f"-{n}"
        candidate = path.with_name(f"{path.stem}.damaged-{stamp}{tail}{path.suffix}")
        if not any(Path(f"{candidate}{end}").exists() for end in ("", "-wal", "-shm")):
            return candidate
    raise OSError(f"no free name beside {path}")


def move_aside(path: Path) -> Path:
    """Rename the file (and its WAL and shared-memory files, which belong to it); the new path."""
    target = aside_name(path)
    os.rename(path, target)
    for end in ("-wal", "-shm"):
        if Path(f"{path}{end}").exists():
            os.rename(f"{path}{end}", f"{target}{end}")
    return target


def _in_memory(path: Path, sentence: str, copy_from: Path | None = None) -> tuple[Store, str]:
    db = sqlite3.connect(":memory:")
    if copy_from is not None:  # a readable database in a place we cannot write: show what it holds
        try:
            source = sqlite3.connect(f"file:{copy_from}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
            source.backup(db)
            source.close()
        except sqlite3.Error:
            db.close()
            db = sqlite3.connect(":memory:")
    try:
        return Store(db, "memory"), sentence
    except sqlite3.Error:  # the copy came from an older or odd schema: start empty
        return Store(sqlite3.connect(":memory:"), "memory"), sentence


MEMORY_ONLY = "until then, conversations are kept in memory only and are lost when Draftlight closes."


def open_store(path: Path) -> tuple[Store, str]:
    """The store at `path`, or the best the app can do; and a sentence for the user ("" when all is well)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _in_memory(
            path,
            f"Cannot make the folder {path.parent} for the chat database ({exc.strerror}): make sure it can be "
            f"made there (a file in its place? a read-only disk?) and restart Draftlight; {MEMORY_ONLY}",
        )
    if path.exists() and not path.is_file():
        kind = "a folder" if path.is_dir() else "something that is not a file"
        return _in_memory(
            path,
            f"There is {kind} at {path}, where the chat database should be: move or rename it and restart "
            f"Draftlight; {MEMORY_ONLY}",
        )
    try:
        return _open(path), ""
    except Damaged as exc:
        reason = "the file is cut short" if cut_short(path) else str(exc)
    except sqlite3.Error as exc:
        return _unwritable(path, exc)
    try:
        kept = move_aside(path)
    except OSError as exc:
        return _in_memory(
            path,
            f"The chat database {path} is damaged ({reason}) and could not be moved aside ({exc.strerror or exc}): "
            f"move it away yourself and restart Draftlight; {MEMORY_ONLY}",
        )
    sentence = (
        f"The chat database was damaged ({reason}): it was kept as {kept.name} in {kept.parent} and a fresh one "
        "was started, so earlier conversations are not listed."
    )
    try:
        return _open(path), sentence
    except (Damaged, sqlite3.Error) as exc:
        return _unwritable(path, exc, prefix=f"{sentence} ")


def _unwritable(path: Path, exc: Exception, prefix: str = "") -> tuple[Store, str]:
    name = getattr(exc, "sqlite_errorname", "")
    if name == "SQLITE_BUSY":
        cause = "another program (another Draftlight?) is holding it: close that one and restart Draftlight"
    elif name in ("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM") or not os.access(path.parent, os.W_OK):
        cause = f"{exc}: make {path.parent} writable (or free some disk space) and restart Draftlight"
    else:
        cause = f"{exc}: check the disk, then restart Draftlight"
    readable = path.is_file() and name not in DAMAGED and not isinstance(exc, Damaged)
    return _in_memory(
        path, f"{prefix}Cannot write the chat database {path} ({cause}); {MEMORY_ONLY}", path if readable else None
    )
