"""The engine's thread: started with the window, and always ended when it closes.

Closing cancels through the worker's one cancel path, asks the worker to free the models
on its own thread, and waits a bounded time. A llama.cpp call that cannot be interrupted
(a long prefill, a load) may outlast that; then the window has saved everything and the
process ends itself cleanly, where Qt would abort on destroying a running thread.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from PySide6.QtCore import QMetaObject, QObject, Qt, QThread

from app.worker import EngineWorker

# A round, or freeing the models, takes well under a second even on a loaded laptop.
CLOSE_WAIT_MS = 5_000
STILL_BUSY = "draftlight: the engine was still busy when the window closed; everything was saved first."


def start_engine_thread(parent: QObject) -> tuple[QThread, EngineWorker]:
    thread = QThread(parent)
    thread.setObjectName("engine")
    worker = EngineWorker()
    worker.moveToThread(thread)
    return thread, worker


def stop_engine_thread(thread: QThread, worker: EngineWorker, wait_ms: int | None = None) -> bool:
    """Cancel, free the models on the engine's thread, end it; whether it ended within `wait_ms`."""
    wait_ms = CLOSE_WAIT_MS if wait_ms is None else wait_ms
    worker.closing = True
    worker.cancel()
    QMetaObject.invokeMethod(worker, "shutdown", Qt.ConnectionType.QueuedConnection)
    return thread.wait(wait_ms)


def end_process(hard_exit: Callable[[int], None]) -> None:
    """The engine thread is stuck in a llama.cpp call: end the process now, saying so in a line."""
    print(STILL_BUSY, file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    hard_exit(0)
