"""A chat reply's replay, kept in the store beside it: its rounds, drafts, candidates and the
text of every token they mention, as teaching mode records one.

The worker records a reply made on this machine's models just before its stats (a server's
reply carries no drafts' text, so it has none). From the store, a reply can be exported as a
replay file, a whole conversation as one file per reply, or stepped through in teaching mode.
Like the store itself, a failed read or write says a sentence through `on_failure` and never raises.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from app.store import Store
from engine import DraftlightError, Replay, replay_from_json


def keep(store: Store, message_id: int, replay: Replay) -> None:
    if message_id:
        text = json.dumps(replay.to_json(), ensure_ascii=False)
        store._write("keep the reply's rounds", "UPDATE messages SET replay = ? WHERE id = ?", (text, message_id))


def _rows(store: Store, sql: str, args: tuple) -> list[tuple[int, str]]:
    try:
        return list(store.db.execute(sql, args))
    except sqlite3.Error as exc:
        store._failed(exc, "read the reply's rounds")
        return []


def _parse(message_id: int, text: str) -> Replay:
    """A stored replay, checked as a file would be: the database is no more trusted than a file."""
    try:
        return replay_from_json(json.loads(text), f"reply {message_id}")
    except (ValueError, RecursionError) as exc:
        raise DraftlightError(f"The rounds kept with reply {message_id} are damaged ({exc}).") from exc


def replay_of(store: Store, message_id: int) -> Replay | None:
    """The reply's replay, or None where it has none (a server's reply, one from before replays
    were kept, one cut by an error). A damaged one raises DraftlightError with a sentence."""
    rows = _rows(store, "SELECT id, replay FROM messages WHERE id = ? AND replay IS NOT NULL", (message_id,))
    return _parse(*rows[0]) if rows else None


def has_replay(store: Store, message_id: int) -> bool:
    sql = "SELECT id, '' FROM messages WHERE id = ? AND replay IS NOT NULL"
    return bool(_rows(store, sql, (message_id,)))


def replays_in(store: Store, conversation_id: int) -> list[tuple[int, Replay]]:
    """Every reply of the conversation shown on screen that has a replay, oldest first."""
    sql = (
        "SELECT id, replay FROM messages WHERE conversation_id = ? AND role = 'assistant' "
        "AND hidden = 0 AND replay IS NOT NULL ORDER BY id"
    )
    return [(mid, _parse(mid, text)) for mid, text in _rows(store, sql, (conversation_id,))]


def export_conversation(store: Store, conversation_id: int, folder: Path, name: str) -> list[Path]:
    """One replay file per reply, `NAME reply N.json` in `folder`; returns the files written."""
    written = []
    for n, (_mid, replay) in enumerate(replays_in(store, conversation_id), 1):
        written.append(replay.save(Path(folder) / f"{name} reply {n}.json"))
    return written
