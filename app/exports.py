"""File > Export: a conversation as markdown, as its token trace or as replays, and the charts, as files."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QMessageBox

from app.transcript import summary  # the figures the transcript shows under a reply
from engine import DraftlightError


def export_trace(store, conversation_id: int, path: Path) -> int:
    """The conversation's replies as `draftlight chat --json` lines; returns lines written."""
    lines = store.trace_lines(conversation_id)
    Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return len(lines)


def conversation_markdown(store, conversation_id: int, title: str) -> str:
    """The conversation as markdown: the title, then each message under who wrote it; a reply's figures in italics."""
    parts = [f"# {title}"]
    for m in store.messages(conversation_id):
        who = {"user": "You", "assistant": "Assistant", "error": "Error"}.get(m.role, m.role.title())
        parts.append(f"**{who}:**\n\n{m.content.strip()}")
        if m.stats is not None:
            parts.append(f"*{summary(m.stats, m.stopped)}*")
    return "\n\n".join(parts) + "\n"


def export_markdown(store, conversation_id: int, title: str, path: Path) -> None:
    Path(path).write_text(conversation_markdown(store, conversation_id, title), encoding="utf-8")


def export_markdown_dialog(window, conversation_id: int, title: str) -> None:
    name = safe_name(title)
    path, _ = QFileDialog.getSaveFileName(window, "Export as markdown", f"{name}.md", "Markdown (*.md)")
    if path:
        try:
            export_markdown(window.store, conversation_id, title, Path(path))
        except OSError as exc:
            window._say(f"Could not write {path} ({exc.strerror or exc}): choose another place.")
            return
        window._say(f"Wrote '{title}' to {path}.")


def export_conversation_trace_dialog(window, conversation_id: int) -> None:
    path, _ = QFileDialog.getSaveFileName(window, "Export token trace", "trace.jsonl", "JSON lines (*.jsonl)")
    if path:
        try:
            lines = export_trace(window.store, conversation_id, Path(path))
        except OSError as exc:
            window._say(f"Could not write {path} ({exc.strerror or exc}): choose another place.")
            return
        window._say(f"Wrote {lines} lines to {path}.")


def export_replay_dialog(window, replay, name: str) -> None:
    path, _ = QFileDialog.getSaveFileName(window, "Export as replay", f"{name}.json", "Draftlight replays (*.json)")
    if path:
        try:
            replay.save(path)
        except OSError as exc:
            window._say(f"Could not write {path} ({exc.strerror or exc}): choose another place.")
            return
        window._say(f"Wrote the replay to {path}: open it in teaching mode to step through its rounds.")


def export_replays_dialog(window, conversation_id: int, title: str) -> None:
    """One replay file per reply of the conversation, into a folder the user picks."""
    from app import replaystore

    if not replaystore.replays_in(window.store, conversation_id):
        window._say("This conversation has no replies with rounds to export (server replies keep none).")
        return
    folder = QFileDialog.getExistingDirectory(window, "Export replays into a folder")
    if folder:
        try:
            files = replaystore.export_conversation(window.store, conversation_id, Path(folder), safe_name(title))
        except (OSError, DraftlightError) as exc:
            window._say(f"Could not write the replays into {folder} ({getattr(exc, 'strerror', None) or exc}).")
            return
        window._say(f"Wrote {len(files)} replay file{'s' * (len(files) != 1)} into {folder}.")


def safe_name(title: str) -> str:
    return "".join(c if c.isalnum() or c in " -_" else "_" for c in title).strip() or "conversation"


def export_trace_dialog(window) -> None:
    path, _ = QFileDialog.getSaveFileName(window, "Export token trace", "trace.jsonl", "JSON lines (*.jsonl)")
    if path:
        window._say(f"Wrote {window.export_trace(Path(path))} lines to {path}.")


def export_charts_dialog(window) -> None:
    path, _ = QFileDialog.getSaveFileName(window, "Export charts", "charts.png", "PNG images (*.png)")
    if path and not window.export_charts(Path(path)):
        QMessageBox.warning(window, "Draftlight", f"Could not write {path}.")
