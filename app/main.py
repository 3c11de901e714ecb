"""Start the app, or run its self-test: a fixed prompt through the window, colours checked."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

SELF_TEST_PROMPT = "Write a bubble sort in C++."
SELF_TEST_DEPTH = 2


def _ensure_display() -> None:
    """Offscreen where there is no display (a CI box, ssh); a real window elsewhere."""
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def make_app():
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setOrganizationName("Draftlight")
    app.setApplicationName("Draftlight")
    return app


def main(self_test: bool = False, screenshot: str | None = None, runtime: str = "auto") -> int:
    if self_test:
        _ensure_display()
    from app.display import display_problem

    problem = display_problem()  # else Qt aborts the process with its own message
    if problem:
        print(f"draftlight: {problem}", file=sys.stderr)
        return 2
    app = make_app()
    from app.window import MainWindow

    if not self_test:
        window = MainWindow(runtime=runtime)
        window.show()
        return app.exec()

    from app import settings
    from app.selftest import run_self_test

    with tempfile.TemporaryDirectory(prefix="draftlight-selftest-") as tmp:
        prefs = settings.Preferences(depth=SELF_TEST_DEPTH, max_tokens=64)
        window = MainWindow(store_path=Path(tmp) / "selftest.sqlite3", prefs=prefs, runtime=runtime)
        window.show()
        return run_self_test(app, window, SELF_TEST_PROMPT, screenshot)


if __name__ == "__main__":
    sys.exit(main())
