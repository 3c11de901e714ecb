"""Changes to stored conversations that the message and conversation actions make.

A regenerated reply is a new row in its first reply's group (`reply_of`); one row of a
group is shown (and sent to the model), the others are `hidden`. A deleted conversation is
marked `deleted` so Undo can bring it back; the store forgets it when the app closes.
Like the store itself, a failed write says a sentence through `on_failure` and never raises.
"""

from __future__ import annotations

import sqlite3
import time

from app.store import Conversation, Store


def _edit(store: Store, doing: str, statements: list[tuple[str, tuple]]) -> bool:
    """Statements in one transaction; False (and a sentence) where it failed."""
    try:
        with store.db:
            for sql, args in statements:
                store.db.execute(sql, args)
    except sqlite3.Error as exc:
        store._failed(exc, doing)
        return False
    return True


# ---- reply alternatives ----
def add_alternative(store: Store, reply_id: int, new_id: int) -> None:
    """`new_id` (a reply just begun) joins `reply_id`'s group and is the one shown."""
    if not reply_id or not new_id:
        return
    group = "(SELECT coalesce(reply_of, id) FROM messages WHERE id = ?)"
    _edit(
        store,
        "keep the earlier reply",
        [
            (f"UPDATE messages SET reply_of = {group} WHERE id = ?", (reply_id, new_id)),
            (f"UPDATE messages SET hidden = 1 WHERE coalesce(reply_of, id) = {group} AND id != ?", (new_id, new_id)),
        ],
    )


def alternative_ids(store: Store, group: int) -> list[int]:
    """Every reply of a group, oldest first."""
    try:
        rows = store.db.execute("SELECT id FROM messages WHERE coalesce(reply_of, id) = ? ORDER BY id", (group,))
        return [mid for (mid,) in rows]
    except sqlite3.Error as exc:
        store._failed(exc, "read the reply's alternatives")
        return []


def show_alternative(store: Store, message_id: int) -> None:
    """Show (and send from now on) this reply of its group; hide the others."""
    group = "(SELECT coalesce(reply_of, id) FROM messages WHERE id = ?)"
    _edit(
        store,
        "switch the reply",
        [(f"UPDATE messages SET hidden = (id != ?) WHERE coalesce(reply_of, id) = {group}", (message_id, message_id))],
    )


def keep_one_shown(store: Store, group: int) -> None:
    """Where a group's shown reply was dropped (it ended before its first token), show its newest."""
    ids = alternative_ids(store, group)
    try:
        shown = store.db.execute(
            "SELECT count(*) FROM messages WHERE coalesce(reply_of, id) = ? AND hidden = 0", (group,)
        ).fetchone()[0]
    except sqlite3.Error as exc:
        store._failed(exc, "read the reply's alternatives")
        return
    if ids and not shown:
        show_alternative(store, ids[-1])


# ---- messages ----
def truncate_from(store: Store, conversation_id: int, message_id: int) -> None:
    """Remove this message and everything after it (edit and resend starts again from here)."""
    _edit(
        store,
        "remove the later messages",
        [("DELETE FROM messages WHERE conversation_id = ? AND id >= ?", (conversation_id, message_id))],
    )


def delete_message(store: Store, conversation_id: int, message_id: int) -> None:
    """Delete a message: a user message with its replies (up to the next user message, so the
    turns still alternate), a reply with only the alternative shown (the newest other one shows)."""
    messages = store.messages(conversation_id)
    index = next((i for i, m in enumerate(messages) if m.id == message_id), None)
    if index is None:
        return
    message = messages[index]
    if message.role == "assistant":
        _edit(store, "delete the reply", [("DELETE FROM messages WHERE id = ?", (message_id,))])
        keep_one_shown(store, message.group)
        return
    end = index + 1
    while message.role == "user" and end < len(messages) and messages[end].role != "user":
        end += 1
    groups = [m.group for m in messages[index:end] if m.role == "assistant"]
    statements = [("DELETE FROM messages WHERE id = ?", (m.id,)) for m in messages[index:end]]
    statements += [("DELETE FROM messages WHERE coalesce(reply_of, id) = ?", (g,)) for g in groups]
    _edit(store, "delete the message", statements)


# ---- conversations ----
def title_of(store: Store, conversation_id: int) -> str:
    try:
        row = store.db.execute("SELECT title FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
    except sqlite3.Error as exc:
        store._failed(exc, "read the conversation's title")
        return ""
    return row[0] if row else ""


def mark_deleted(store: Store, conversation_id: int) -> None:
    sql = "UPDATE conversations SET deleted = ? WHERE id = ?"
    _edit(store, "delete the conversation", [(sql, (time.time(), conversation_id))])


def restore(store: Store, conversation_id: int) -> None:
    sql = "UPDATE conversations SET deleted = NULL WHERE id = ?"
    _edit(store, "bring the conversation back", [(sql, (conversation_id,))])


def search(store: Store, text: str) -> list[Conversation]:
    """Conversations whose title or any message holds `text` (any case), newest first."""
    pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    try:
        rows = store.db.execute(
            "SELECT id, title, updated FROM conversations c WHERE deleted IS NULL AND (title LIKE ?1 ESCAPE '\\' "
            "OR EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.id AND m.content LIKE ?1 ESCAPE '\\')) "
            "ORDER BY updated DESC, id DESC",
            (pattern,),
        )
        return [Conversation(*row) for row in rows]
    except sqlite3.Error as exc:
        store._failed(exc, "search the conversations")
        return []
