"""Tools → Acceptance ledger: export it (CSV or JSON) and clear it, as `draftlight ledger` does."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QMenu, QMessageBox

from engine import export_csv, export_json, ledger


def export_ledger(path: Path, fmt: str) -> str:
    """Write the ledger to `path` as "csv" or "json"; the sentence the window says."""
    book = ledger()
    if book is None:
        return "The acceptance ledger is turned off (DRAFTLIGHT_LEDGER=off): nothing to export."
    try:
        path.write_text(export_csv(book) if fmt == "csv" else export_json(book), encoding="utf-8")
    except OSError as exc:
        return f"Could not write the acceptance ledger to {path}: {exc.strerror or exc}."
    return f"Exported the acceptance ledger ({len(book.replies()):,} replies) to {path}."


def clear_ledger() -> str:
    book = ledger()
    if book is None:
        return "The acceptance ledger is turned off (DRAFTLIGHT_LEDGER=off): nothing to clear."
    return f"Forgot {book.clear():,} replies from the acceptance ledger: each pair's baseline starts again."


def add_ledger_menu(tools: QMenu, window) -> QMenu:
    menu = tools.addMenu("Acceptance ledger")

    def export(fmt: str) -> None:
        name, _ = QFileDialog.getSaveFileName(
            window, "Export the acceptance ledger", f"draftlight-ledger.{fmt}", f"{fmt.upper()} (*.{fmt})"
        )
        if name:
            window.notice.say(export_ledger(Path(name), fmt))

    def clear() -> None:
        asked = QMessageBox.question(
            window,
            "Clear the acceptance ledger",
            "Forget every pair's acceptance on this machine? Baselines start again from the next replies.",
        )
        if asked == QMessageBox.StandardButton.Yes:
            window.notice.say(clear_ledger())
            if window.pair is not None and window.pair.ledger:
                window.ledger_said("")

    menu.addAction("Export as CSV…", lambda: export("csv"))
    menu.addAction("Export as JSON…", lambda: export("json"))
    menu.addSeparator()
    menu.addAction("Clear…", clear)
    return menu
