"""The acceptance ledger on disk: SQLite in WAL mode, readable with `sqlite3`.

One row per reply (its drafts and acceptances by position), one per content kind within it,
and one per setup: the pair's identity (both files' fingerprints), the runtime and its
version, Draftlight's version, sampling and depth. Bounded: past MAX_REPLIES the oldest
replies go. A damaged or foreign file is moved aside under a new name and a fresh ledger
started; where nothing can be written the ledger lives in memory for this run. Either way
`notice` says so in a sentence. A failed write never reaches a reply: `failure` says it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

FORMAT = "draftlight acceptance ledger"
SCHEMA_VERSION = 1
MAX_REPLIES = 20_000  # about 4 MB: months of daily use
BUSY_TIMEOUT_S = 2.0
DAMAGED = {"SQLITE_CORRUPT", "SQLITE_NOTADB"}

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS setups (
    id INTEGER PRIMARY KEY,
    target TEXT NOT NULL,              -- the target's file or folder name
    drafter TEXT NOT NULL,             -- the drafter's file name, or its kind (ngram)
    drafter_kind TEXT NOT NULL,
    target_fingerprint TEXT NOT NULL,  -- format:size:hash of header and sampled tensor data
    drafter_fingerprint TEXT NOT NULL,
    target_modified REAL NOT NULL,
    drafter_modified REAL NOT NULL,
    runtime TEXT NOT NULL,             -- the runtime's name and version
    draftlight TEXT NOT NULL,          -- Draftlight's version
    sampling TEXT NOT NULL,            -- "greedy" or "temperature 0.7"
    depth TEXT NOT NULL,               -- "auto" or the fixed depth
    first_seen REAL NOT NULL,
    UNIQUE (target, drafter, drafter_kind, target_fingerprint, drafter_fingerprint, runtime, draftlight,
            sampling, depth)
);
CREATE TABLE IF NOT EXISTS replies (
    id INTEGER PRIMARY KEY,
    setup_id INTEGER NOT NULL REFERENCES setups(id) ON DELETE CASCADE,
    at REAL NOT NULL,                  -- seconds since the epoch
    source TEXT NOT NULL,              -- chat, app, serve, lab, pair, bench
    drafted INTEGER NOT NULL,
    accepted INTEGER NOT NULL,
    drafted_per_position TEXT NOT NULL,   -- "12,10,7": position 0 first
    accepted_per_position TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS replies_by_setup ON replies(setup_id, id);
CREATE TABLE IF NOT EXISTS reply_content (
    reply_id INTEGER NOT NULL REFERENCES replies(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,                -- thinking, code, json, list, prose
    drafted INTEGER NOT NULL,
    accepted INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS reply_content_by_reply ON reply_content(reply_id);
"""


@dataclass(frozen=True, slots=True)
class Setup:
    """What a reply's acceptance was measured with: the ledger's key."""

    target: str
    drafter: str
    drafter_kind: str
    target_fingerprint: str
    drafter_fingerprint: str
    runtime: str
    draftlight: str
    sampling: str
    depth: str
    target_modified: float = 0.0
    drafter_modified: float = 0.0

    @property
    def pair(self) -> tuple[str, str]:
        """The pair as the user names it: target and drafter by name."""
        return (self.target, self.drafter)


KEY_FIELDS = (
    "target",
    "drafter",
    "drafter_kind",
    "target_fingerprint",
    "drafter_fingerprint",
    "runtime",
    "draftlight",
    "sampling",
    "depth",
)


@dataclass(frozen=True, slots=True)
class LedgerReply:
    """One reply as the ledger keeps it."""

    at: float
    setup: Setup
    source: str
    drafted: int
    accepted: int
    drafted_per_position: tuple[int, ...]
    accepted_per_position: tuple[int, ...]
    content: dict[str, tuple[int, int]] = field(default_factory=dict)  # kind: (drafted, accepted)


def default_path() -> Path | None:
    """Where the ledger lives: $DRAFTLIGHT_LEDGER ("off": nowhere), else the user's data folder."""
    env = os.environ.get("DRAFTLIGHT_LEDGER")
    if env:
        return None if env.strip().lower() == "off" else Path(env).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "Draftlight" / "ledger.sqlite3"
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "draftlight" / "ledger.sqlite3"


class Foreign(Exception):
    """The file is a database, but not a ledger (or one from a newer Draftlight)."""


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        problems = [row[0] for row in db.execute("PRAGMA quick_check(3)")]
        if problems != ["ok"]:
            raise Foreign(f"SQLite's integrity check says: {problems[0].strip()[:120]}")
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if tables and "meta" not in tables:
            raise Foreign("it is a database, but not a ledger")
        if "meta" in tables:
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            if meta.get("format") != FORMAT:
                raise Foreign("it is a database, but not a ledger")
            if int(meta.get("schema", "0")) > SCHEMA_VERSION:
                raise Foreign(f"a newer Draftlight wrote it (schema {meta.get('schema')})")
        db.execute("PRAGMA foreign_keys=ON")
        db.executescript(SCHEMA)
        db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?), ('schema', ?)", (FORMAT, str(SCHEMA_VERSION)))
        db.commit()
    except sqlite3.DatabaseError as exc:
        db.close()
        if getattr(exc, "sqlite_errorname", "") in DAMAGED:
            raise Foreign(f"SQLite cannot read it: {' '.join(str(exc).split())[:120]}") from exc
        raise
    except Foreign:
        db.close()
        raise
    return db


def _set_aside(path: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.set-aside-{stamp}")
    n = 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.set-aside-{stamp}-{n}")
    path.rename(aside)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.rename(aside.with_name(aside.name + suffix))
    return aside


def open_ledger(path: Path | None) -> Ledger:
    """The ledger at `path` (None: in memory); never raises: `notice` says what went wrong."""
    if path is None:
        return Ledger(_connect_memory(), "memory")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            return Ledger(_connect(path), str(path))
        except Foreign as exc:
            aside = _set_aside(path)
            ledger = Ledger(_connect(path), str(path))
            ledger.notice = (
                f"The acceptance ledger at {path} could not be used, as {exc}: it was moved to {aside.name} "
                "and a new ledger started."
            )
            return ledger
    except (OSError, sqlite3.Error, Foreign) as exc:
        ledger = Ledger(_connect_memory(), "memory")
        reason = getattr(exc, "strerror", None) or " ".join(str(exc).split())[:120]
        ledger.notice = f"The acceptance ledger cannot be written at {path} ({reason}): this run's acceptance is kept in memory only."
        return ledger


def _connect_memory() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:", check_same_thread=False)
    db.execute("PRAGMA foreign_keys=ON")
    db.executescript(SCHEMA)
    db.execute("INSERT INTO meta VALUES ('format', ?), ('schema', ?)", (FORMAT, str(SCHEMA_VERSION)))
    return db


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip().lstrip("-").isdigit())


class Ledger:
    """Replies' acceptance in one SQLite connection, shared by threads under a lock."""

    def __init__(self, db: sqlite3.Connection, where: str) -> None:
        self.db = db
        self.where = where  # the file's path, or "memory"
        self.notice = ""  # a sentence about how it was opened, where one is needed
        self.failure = ""  # the last failed write's sentence
        self._lock = threading.Lock()

    def add(
        self, setup: Setup, source: str, drafted: tuple[int, ...], accepted: tuple[int, ...], content, at: float = 0.0
    ) -> None:
        """One reply: drafts and acceptances per position, and (kind, drafted, accepted) per content kind."""
        with self._lock:
            try:
                setup_id = self._setup_id(setup, at or time.time())
                cur = self.db.execute(
                    "INSERT INTO replies (setup_id, at, source, drafted, accepted, drafted_per_position, "
                    "accepted_per_position) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        setup_id,
                        at or time.time(),
                        source,
                        sum(drafted),
                        sum(accepted),
                        ",".join(map(str, drafted)),
                        ",".join(map(str, accepted)),
                    ),
                )
                self.db.executemany(
                    "INSERT INTO reply_content VALUES (?, ?, ?, ?)",
                    [(cur.lastrowid, kind, d, a) for kind, d, a in content if d],
                )
                self._prune()
                self.db.commit()
                self.failure = ""
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    self.db.rollback()
                self.failure = f"Could not add a reply to the acceptance ledger ({' '.join(str(exc).split())[:120]})."

    def _setup_id(self, setup: Setup, at: float) -> int:
        where = " AND ".join(f"{f} = ?" for f in KEY_FIELDS)
        values = [getattr(setup, f) for f in KEY_FIELDS]
        row = self.db.execute(f"SELECT id FROM setups WHERE {where}", values).fetchone()
        if row:
            return row[0]
        cur = self.db.execute(
            f"INSERT INTO setups ({', '.join(KEY_FIELDS)}, target_modified, drafter_modified, first_seen) "
            f"VALUES ({', '.join('?' * (len(KEY_FIELDS) + 3))})",
            [*values, setup.target_modified, setup.drafter_modified, at],
        )
        assert cur.lastrowid is not None  # sqlite3 sets it after an INSERT
        return int(cur.lastrowid)

    def _prune(self) -> None:
        (n,) = self.db.execute("SELECT COUNT(*) FROM replies").fetchone()
        if n > MAX_REPLIES:
            self.db.execute(
                "DELETE FROM replies WHERE id IN (SELECT id FROM replies ORDER BY id LIMIT ?)", (n - MAX_REPLIES,)
            )
            self.db.execute("DELETE FROM setups WHERE id NOT IN (SELECT DISTINCT setup_id FROM replies)")

    def replies(self, pair: tuple[str, str] | None = None) -> list[LedgerReply]:
        """Every reply kept (of one pair, by names), oldest first."""
        cols = ", ".join(f"s.{f}" for f in (*KEY_FIELDS, "target_modified", "drafter_modified"))
        sql = (
            f"SELECT r.id, r.at, r.source, r.drafted, r.accepted, r.drafted_per_position, r.accepted_per_position, "
            f"{cols} FROM replies r JOIN setups s ON s.id = r.setup_id"
        )
        args: tuple = ()
        if pair is not None:
            sql += " WHERE s.target = ? AND s.drafter = ?"
            args = pair
        with self._lock:
            try:
                rows = self.db.execute(sql + " ORDER BY r.id", args).fetchall()
                content: dict[int, dict[str, tuple[int, int]]] = {}
                for rid, kind, d, a in self.db.execute("SELECT reply_id, kind, drafted, accepted FROM reply_content"):
                    content.setdefault(rid, {})[kind] = (d, a)
            except sqlite3.Error as exc:
                self.failure = f"Could not read the acceptance ledger ({' '.join(str(exc).split())[:120]})."
                return []
        out = []
        for rid, at, source, drafted, accepted, dpp, app, *s in rows:
            setup = Setup(*s)
            out.append(LedgerReply(at, setup, source, drafted, accepted, _ints(dpp), _ints(app), content.get(rid, {})))
        return out

    def pairs(self) -> list[tuple[str, str]]:
        """Each pair (target, drafter by name) with replies, most recently used first."""
        with self._lock:
            rows = self.db.execute(
                "SELECT s.target, s.drafter FROM replies r JOIN setups s ON s.id = r.setup_id "
                "GROUP BY s.target, s.drafter ORDER BY MAX(r.id) DESC"
            ).fetchall()
        return [(t, d) for t, d in rows]

    def clear(self) -> int:
        """Forget every reply; how many were forgotten."""
        with self._lock:
            (n,) = self.db.execute("SELECT COUNT(*) FROM replies").fetchone()
            self.db.execute("DELETE FROM reply_content")
            self.db.execute("DELETE FROM replies")
            self.db.execute("DELETE FROM setups")
            self.db.commit()
        return int(n)

    def close(self) -> None:
        with self._lock:
            self.db.close()
