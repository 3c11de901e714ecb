"""Conversations on disk: SQLite in WAL mode, one row per message.

Every assistant message keeps its tokens with their provenance, so a reopened
conversation shows its colours. A reply is written as it streams (a chunk of tokens per
batch, marked interrupted until it ends), so a killed app keeps what was on screen.
Opening never stops the app: see app/storeopen.py for damaged files and read-only places.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from engine import RunStats, TokenEvent

SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role TEXT NOT NULL,            -- user, assistant, system, error
    content TEXT NOT NULL,
    tokens TEXT,                   -- JSON lines of `draftlight chat --json` token objects
    stats TEXT,                    -- JSON of the reply's RunStats
    stopped INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, id);
-- A streaming reply's tokens, a batch a row; folded into messages.tokens when it ends.
CREATE TABLE IF NOT EXISTS reply_chunks (
    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    tokens TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS reply_chunks_by_message ON reply_chunks(message_id);
"""

DAMAGED_RECORD = "Part of a reply in the chat database is damaged: its text is shown without its colours."
# Shown under a reply that was still streaming when the app was killed or closed.
CUT_SHORT = "this reply was cut short when the app closed"

# Columns added after the first release, each with a default that reads an older row as it was meant.
MIGRATIONS = (
    ("messages", "interrupted", "INTEGER NOT NULL DEFAULT 0"),  # streamed to disk
    ("messages", "reply_of", "INTEGER"),  # a regenerated reply: the first reply of its group
    ("messages", "hidden", "INTEGER NOT NULL DEFAULT 0"),  # an alternative not shown (nor sent)
    ("conversations", "deleted", "REAL"),  # deleted, undoable until the app closes
    ("messages", "replay", "TEXT"),  # a local reply's rounds, drafts and pieces (app/replaystore.py)
    ("messages", "above", "TEXT"),  # a reply's line above its text: the oldest turns its prompt left out
)


@dataclass
class StoredMessage:
    role: str
    content: str
    tokens: list[TokenEvent] = field(default_factory=list)
    stats: RunStats | None = None
    stopped: bool = False
    id: int | None = None
    interrupted: bool = False  # the app ended while this reply streamed
    group: int = 0  # a reply's alternatives share it: the first one's id
    alternative: int = 1  # this reply is alternative `alternative` of `alternatives`
    alternatives: int = 1
    above: str = ""  # the line drawn above the reply's text: which oldest turns its prompt left out


@dataclass
class Conversation:
    id: int
    title: str
    updated: float


def _token_lines(tokens: list[TokenEvent]) -> str:
    return "\n".join(json.dumps(t.to_json(), ensure_ascii=False) for t in tokens)


class Store:
    """The conversations in one SQLite connection (a file, or ":memory:" where no file can be written).

    A failed write or read never raises into the window: `on_failure` gets a sentence and
    the call returns a harmless value, so the window keeps what it shows on screen.
    """

    def __init__(self, db: sqlite3.Connection, where: str) -> None:
        self.db = db
        # Damage the quick check cannot see (a flipped byte inside a text) must not hide a whole
        # conversation: bad UTF-8 reads as U+FFFD, and a damaged token list is dropped (below).
        self.db.text_factory = lambda raw: raw.decode("utf-8", "replace")
        self.where = where  # the file's path, or "memory"
        self.on_failure: Callable[[str], None] = lambda sentence: None
        self.failure = ""  # the last failure's sentence
        self.db.execute("PRAGMA foreign_keys=ON")
        self.db.executescript(SCHEMA)
        for table, column, kind in MIGRATIONS:
            if column not in {row[1] for row in self.db.execute(f"PRAGMA table_info({table})")}:
                self.db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
        self.purge_deleted()  # a conversation deleted before a kill: its undo ended with the app
        self.db.commit()

    @property
    def in_memory(self) -> bool:
        return self.where == "memory"

    def _failed(self, exc: sqlite3.Error, doing: str) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.db.rollback()
        reason = " ".join(str(exc).split())[:160]
        self.failure = (
            f"Could not {doing} in the chat database ({reason}): what is on screen is kept until Draftlight "
            "closes; restart it to check the database."
        )
        self.on_failure(self.failure)

    def _write(self, doing: str, sql: str, args: tuple = ()) -> int | None:
        """One statement and a commit; the new row's id, or None where it failed."""
        try:
            cur = self.db.execute(sql, args)
            self.db.commit()
            return int(cur.lastrowid) if cur.lastrowid is not None else 0
        except sqlite3.Error as exc:
            self._failed(exc, doing)
            return None

    def new_conversation(self, title: str = "New conversation") -> int:
        now = time.time()
        sql = "INSERT INTO conversations(title, created, updated) VALUES (?, ?, ?)"
        return self._write("start a conversation", sql, (title, now, now)) or 0

    def conversations(self) -> list[Conversation]:
        try:
            rows = self.db.execute(
                "SELECT id, title, updated FROM conversations WHERE deleted IS NULL ORDER BY updated DESC, id DESC"
            )
            return [Conversation(*row) for row in rows]
        except sqlite3.Error as exc:
            self._failed(exc, "read the conversations")
            return []

    def rename(self, conversation_id: int, title: str) -> None:
        self._write(
            "rename the conversation", "UPDATE conversations SET title = ? WHERE id = ?", (title, conversation_id)
        )

    def delete(self, conversation_id: int) -> None:
        self._write("delete the conversation", "DELETE FROM conversations WHERE id = ?", (conversation_id,))

    def add_message(self, conversation_id: int, message: StoredMessage) -> int:
        tokens = _token_lines(message.tokens) or None
        stats = json.dumps(message.stats.to_json(), ensure_ascii=False) if message.stats else None
        now = time.time()
        try:
            cur = self.db.execute(
                "INSERT INTO messages(conversation_id, role, content, tokens, stats, stopped, interrupted, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (conversation_id, message.role, message.content, tokens, stats, int(message.stopped), 0, now),
            )
            self.db.execute("UPDATE conversations SET updated = ? WHERE id = ?", (now, conversation_id))
            self.db.commit()
        except sqlite3.Error as exc:
            self._failed(exc, "save the message")
            return 0
        message.id = int(cur.lastrowid)
        return message.id

    # ---- a reply as it streams ----
    def begin_reply(self, conversation_id: int) -> int:
        """An empty assistant message, marked interrupted until `finish_reply`; its id (0 if not written)."""
        sql = (
            "INSERT INTO messages(conversation_id, role, content, stopped, interrupted, created) "
            "VALUES (?, 'assistant', '', 0, 1, ?)"
        )
        return self._write("save the reply", sql, (conversation_id, time.time())) or 0

    def append_reply(self, message_id: int, tokens: list[TokenEvent]) -> None:
        """Tokens that just arrived, in one transaction: text and provenance together."""
        if not message_id or not tokens:
            return
        try:
            with self.db:
                self.db.execute(
                    "INSERT INTO reply_chunks(message_id, tokens) VALUES (?, ?)", (message_id, _token_lines(tokens))
                )
                self.db.execute(
                    "UPDATE messages SET content = content || ? WHERE id = ?",
                    ("".join(t.text for t in tokens), message_id),
                )
        except sqlite3.Error as exc:
            self._failed(exc, "save the reply as it streams")

    def finish_reply(self, message_id: int, conversation_id: int, message: StoredMessage) -> int:
        """The reply has ended: its final text, tokens and stats replace the streamed chunks."""
        if not message_id:
            return self.add_message(conversation_id, message)
        tokens = _token_lines(message.tokens) or None
        stats = json.dumps(message.stats.to_json(), ensure_ascii=False) if message.stats else None
        now = time.time()
        try:
            with self.db:
                self.db.execute(
                    "UPDATE messages SET content = ?, tokens = ?, stats = ?, stopped = ?, interrupted = 0 WHERE id = ?",
                    (message.content, tokens, stats, int(message.stopped), message_id),
                )
                self.db.execute("DELETE FROM reply_chunks WHERE message_id = ?", (message_id,))
                self.db.execute("UPDATE conversations SET updated = ? WHERE id = ?", (now, conversation_id))
        except sqlite3.Error as exc:
            self._failed(exc, "save the reply")
            return 0
        message.id = message_id
        return message_id

    def set_above(self, message_id: int, line: str) -> None:
        """The line shown above a reply's text (the oldest turns its prompt left out), kept with it."""
        if message_id and line:
            self._write("save the reply", "UPDATE messages SET above = ? WHERE id = ?", (line, message_id))

    def drop_reply(self, message_id: int) -> None:
        """A reply that ended before its first token: nothing to keep."""
        if message_id:
            self._write("save the reply", "DELETE FROM messages WHERE id = ?", (message_id,))

    # ---- reading ----
    def messages(self, conversation_id: int) -> list[StoredMessage]:
        try:
            return self._messages(conversation_id)
        except (sqlite3.Error, ValueError, KeyError, TypeError) as exc:  # ValueError: JSON, KeyError: a field
            self._failed(sqlite3.DatabaseError(str(exc)), "read the conversation")
            return []

    def _messages(self, conversation_id: int) -> list[StoredMessage]:
        rows = self.db.execute(
            "SELECT id, role, content, tokens, stats, stopped, interrupted, coalesce(reply_of, id), above FROM messages "
            "WHERE conversation_id = ? AND hidden = 0 ORDER BY id",
            (conversation_id,),
        ).fetchall()
        groups: dict[int, list[int]] = {}  # every alternative, shown or not, by group
        for mid, group in self.db.execute(
            "SELECT id, coalesce(reply_of, id) FROM messages WHERE conversation_id = ? ORDER BY id", (conversation_id,)
        ):
            groups.setdefault(group, []).append(mid)
        out = []
        for mid, role, content, tokens, stats, stopped, interrupted, group, above in rows:
            if interrupted:
                chunks = self.db.execute("SELECT tokens FROM reply_chunks WHERE message_id = ? ORDER BY rowid", (mid,))
                tokens = "\n".join(chunk for (chunk,) in chunks)
            try:
                events = [TokenEvent.from_json(json.loads(line)) for line in tokens.splitlines()] if tokens else []
                run_stats = RunStats.from_json(json.loads(stats)) if stats else None
            except (ValueError, KeyError, TypeError):  # a damaged record: the text without its colours
                events, run_stats = [], None
                self.on_failure(DAMAGED_RECORD)
            out.append(
                StoredMessage(
                    role=role,
                    content=content,
                    tokens=events,
                    stats=run_stats,
                    stopped=bool(stopped),
                    id=mid,
                    interrupted=bool(interrupted),
                    group=group,
                    alternative=groups[group].index(mid) + 1,
                    alternatives=len(groups[group]),
                    above=above or "",
                )
            )
        return out

    def recent_prompts(self, limit: int = 6) -> list[str]:
        """The user's latest messages across conversations, newest first, each text once."""
        rows = self.db.execute("SELECT content FROM messages WHERE role = 'user' ORDER BY id DESC LIMIT 200")
        seen: list[str] = []
        for (content,) in rows:
            text = content.strip()
            if text and text not in seen:
                seen.append(text)
                if len(seen) == limit:
                    break
        return seen

    def trace_lines(self, conversation_id: int) -> list[str]:
        """The replies as `draftlight chat --json` lines: each reply's tokens, then its stats."""
        lines = []
        for m in self.messages(conversation_id):
            if m.role == "assistant":
                lines += [json.dumps(t.to_json(), ensure_ascii=False) for t in m.tokens]
                if m.stats:
                    lines.append(json.dumps(m.stats.to_json(), ensure_ascii=False))
        return lines

    def purge_deleted(self) -> None:
        """Forget the conversations deleted this session: their undo ends here."""
        self._write("delete the conversations", "DELETE FROM conversations WHERE deleted IS NOT NULL")

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.purge_deleted()
            self.db.close()
