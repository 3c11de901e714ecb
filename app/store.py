"""Conversations on disk: SQLite in WAL mode, one row per finished message.

Every assistant message keeps its tokens with their provenance, so a reopened
conversation shows its colours. A message is written when it is finished (or stopped),
so a crash mid-reply loses nothing that came before.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

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
"""


@dataclass
class StoredMessage:
    role: str
    content: str
    tokens: list[TokenEvent] = field(default_factory=list)
    stats: RunStats | None = None
    stopped: bool = False
    id: int | None = None


@dataclass
class Conversation:
    id: int
    title: str
    updated: float


class Store:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA foreign_keys=ON")
        self.db.executescript(SCHEMA)
        self.db.commit()

    def new_conversation(self, title: str = "New conversation") -> int:
        now = time.time()
        cur = self.db.execute("INSERT INTO conversations(title, created, updated) VALUES (?, ?, ?)", (title, now, now))
        self.db.commit()
        return int(cur.lastrowid)

    def conversations(self) -> list[Conversation]:
        rows = self.db.execute("SELECT id, title, updated FROM conversations ORDER BY updated DESC, id DESC")
        return [Conversation(*row) for row in rows]

    def rename(self, conversation_id: int, title: str) -> None:
        self.db.execute("UPDATE conversations SET title = ? WHERE id = ?", (title, conversation_id))
        self.db.commit()

    def delete(self, conversation_id: int) -> None:
        self.db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
        self.db.commit()

    def add_message(self, conversation_id: int, message: StoredMessage) -> int:
        tokens = "\n".join(json.dumps(t.to_json(), ensure_ascii=False) for t in message.tokens) or None
        stats = json.dumps(message.stats.to_json(), ensure_ascii=False) if message.stats else None
        now = time.time()
        cur = self.db.execute(
            "INSERT INTO messages(conversation_id, role, content, tokens, stats, stopped, created) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (conversation_id, message.role, message.content, tokens, stats, int(message.stopped), now),
        )
        self.db.execute("UPDATE conversations SET updated = ? WHERE id = ?", (now, conversation_id))
        self.db.commit()
        message.id = int(cur.lastrowid)
        return message.id

    def messages(self, conversation_id: int) -> list[StoredMessage]:
        rows = self.db.execute(
            "SELECT id, role, content, tokens, stats, stopped FROM messages WHERE conversation_id = ? ORDER BY id",
            (conversation_id,),
        )
        out = []
        for mid, role, content, tokens, stats, stopped in rows:
            events = [TokenEvent.from_json(json.loads(line)) for line in tokens.splitlines()] if tokens else []
            out.append(
                StoredMessage(
                    role=role,
                    content=content,
                    tokens=events,
                    stats=RunStats.from_json(json.loads(stats)) if stats else None,
                    stopped=bool(stopped),
                    id=mid,
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

    def close(self) -> None:
        self.db.close()
