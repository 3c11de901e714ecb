"""File > Export: the conversation's token trace and the charts, as files."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QMessageBox


def export_trace(store, conversation_id: int, path: Path) -> int:
    """The conversation's replies as `draftlight chat --json` lines; returns lines written."""
    lines = store.trace_lines(conversation_id)
    Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return len(lines)


def export_trace_dialog(window) -> None:
    path, _ = QFileDialog.getSaveFileName(window, "Export token trace", "trace.jsonl", "JSON lines (*.jsonl)")
    if path:
        window._say(f"Wrote {window.export_trace(Path(path))} lines to {path}.")


def export_charts_dialog(window) -> None:
    path, _ = QFileDialog.getSaveFileName(window, "Export charts", "charts.png", "PNG images (*.png)")
    if path and not window.export_charts(Path(path)):
        QMessageBox.warning(window, "Draftlight", f"Could not write {path}.")
