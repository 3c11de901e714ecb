"""Windows on a private store and private preferences, with real models."""

from __future__ import annotations

import gc

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

LOAD_TIMEOUT_MS = 180_000
REPLY_TIMEOUT_MS = 300_000


@pytest.fixture(autouse=True)
def collected(qapp):
    """Delete each test's closed windows and collect its Qt garbage now, on the main thread, once its
    engine threads have ended: left to Python's collector, a widget would be deleted on whatever
    thread the collector next runs on, an engine thread of a later test included (a crash on a freed
    widget's timer, or a deadlock with that thread's signals)."""
    from PySide6.QtCore import QCoreApplication, QEvent

    yield
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    gc.collect()


@pytest.fixture(autouse=True)
def themed(qapp):
    """Leave the application in the platform's own colours and font, whatever a test switched
    (Preferences, the View menu, a window opened on a saved dark theme)."""
    from PySide6.QtGui import QGuiApplication

    from app import theme

    font = QGuiApplication.font()
    yield
    theme.apply("system")
    QGuiApplication.setFont(font)


@pytest.fixture
def make_window(qtbot, tmp_path, target_path, drafter_path):
    """A factory: MainWindow(store in tmp_path, given preferences), loaded and shown."""
    from app import settings
    from app.window import MainWindow

    windows = []

    def make(store_name: str = "conversations.sqlite3", wait: bool = True, **prefs):
        prefs.setdefault("target", str(target_path))
        prefs.setdefault("drafter", str(drafter_path))
        prefs.setdefault("max_tokens", 24)
        prefs.setdefault("depth", 2)  # speculation to watch (the app's own default is Auto)
        prefs.setdefault("context", 4096)  # the app's own default (Auto) makes the trained length's KV cache
        window = MainWindow(store_path=tmp_path / store_name, prefs=settings.Preferences(**prefs))
        qtbot.addWidget(window)
        window.show()
        windows.append(window)
        if wait:
            qtbot.waitUntil(
                lambda: (window.pair is not None and not window.busy) or "Error" in window.transcript.toPlainText(),
                timeout=LOAD_TIMEOUT_MS,
            )
        return window

    yield make
    for w in windows:
        if w.isVisible():
            w.close()


@pytest.fixture
def send(qtbot):
    """send(window, text): type a message, press Enter, wait for the reply; its RunStats or None."""
    from PySide6.QtCore import Qt

    def send(window, text: str):
        qtbot.waitUntil(lambda: not window.busy, timeout=LOAD_TIMEOUT_MS)  # a load may still be winding down
        window.input.setPlainText(text)
        with qtbot.waitSignal(window.reply_finished, timeout=REPLY_TIMEOUT_MS) as blocker:
            qtbot.keyClick(window.input, Qt.Key.Key_Return)
        return blocker.args[0]

    return send


@pytest.fixture
def window_at(qtbot, tmp_path):
    """window_at(store_path): a window whose model cannot load (no model needed), shown."""
    from app import settings
    from app.window import MainWindow

    made = []

    def make(store_path):
        prefs = settings.Preferences(target=str(tmp_path / "missing.gguf"), drafter="none")
        window = MainWindow(store_path=store_path, prefs=prefs)
        qtbot.addWidget(window)
        window.show()
        made.append(window)
        qtbot.waitUntil(lambda: "Error" in window.transcript.toPlainText(), timeout=20_000)
        return window

    yield make
    for w in made:
        if w.isVisible():
            w.close()
