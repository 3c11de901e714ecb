"""First run without models: download the default pair, or choose two GGUF files.

The window opens this dialog when its first load finds no model. A download runs on its
own thread (a worker QObject moved to a QThread, like the engine's), reports progress
through signals and stops at the next chunk when asked. An interrupted download resumes
where it stopped: huggingface_hub keeps the partial file in its cache and continues it on
the next try. engine.catalog checks every file against its SHA-256 before it is used.
Files go to the user's cache folders, never inside the app bundle.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QObject, QThread, Signal, Slot
from PySide6.QtWidgets import (
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLayout,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.worker import LoadRequest
from engine import CatalogModel, Progress, catalog

# (model, progress) -> the model's local path; raises DraftlightError when it cannot.
Download = Callable[[CatalogModel, Progress], Path]
# (parent, title) -> a chosen file's path, or None when the user cancels.
ChooseFile = Callable[[QWidget, str], str | None]

PAIR = (catalog.DEFAULT_TARGET, catalog.DEFAULT_DRAFTER)


def download_from_hub(model: CatalogModel, progress: Progress) -> Path:
    """A catalog model from the user cache, or else fetched from the Hugging Face hub."""
    return catalog.resolve(model, progress=progress, download=True)


def choose_gguf(parent: QWidget, title: str) -> str | None:
    path, _ = QFileDialog.getOpenFileName(parent, title, str(Path.home()), "GGUF models (*.gguf);;All files (*)")
    return path or None


def is_missing_model(message: str) -> bool:
    """Whether a load failure says a catalog model could not be found anywhere."""
    return any(message.startswith(f"{m.title} is not available") for m in catalog.CATALOG.values())


class Cancelled(Exception):
    """Raised inside the download, from its progress callback, to stop it."""


class DownloadWorker(QObject):
    """Fetches the default pair on its thread; results and progress leave as signals."""

    progress = Signal(object, object, str)  # bytes done, bytes total, what; object: sizes pass 2 GB
    fetched = Signal(object, object)  # target path, drafter path
    failed = Signal(str, bool)  # message, whether the user stopped it

    def __init__(self, download: Download) -> None:
        super().__init__()
        self.download = download
        self._cancel = threading.Event()
        self._last = 0.0
        self._label = ""

    def cancel(self) -> None:
        """Called from the GUI thread: the download stops at its next progress report."""
        self._cancel.set()

    def _report(self, done: int, total: int, label: str) -> None:
        if self._cancel.is_set():
            raise Cancelled
        now = time.monotonic()
        if done >= total or label != self._label or now - self._last > 0.1:
            self._last, self._label = now, label
            self.progress.emit(done, total, label)

    @Slot()
    def run(self) -> None:
        try:
            paths = [self.download(model, self._report) for model in PAIR]
        except Exception as exc:  # a DraftlightError says what to do; anything else is shown too
            if self._cancel.is_set():
                self.failed.emit("Download stopped. It resumes where it left off next time.", True)
            else:
                self.failed.emit(str(exc), False)
            return
        self.fetched.emit(*paths)


class FirstRunDialog(QDialog):
    """Download the default pair, or choose a target and a drafter file; `chosen` says which."""

    chosen = Signal(object)  # LoadRequest for the window's worker

    def __init__(
        self,
        reason: str = "",
        parent: QWidget | None = None,
        download: Download = download_from_hub,
        choose_file: ChooseFile = choose_gguf,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Models for Draftlight")
        self.setObjectName("first_run")
        self.download = download
        self.choose_file = choose_file
        self.request: LoadRequest | None = None
        self.downloaded: tuple[Path, Path] | None = None
        self.download_thread: QThread | None = None
        self.worker: DownloadWorker | None = None

        target, drafter = PAIR
        total_gb = (target.size + drafter.size) / 1e9
        intro = QLabel(
            "<p>Draftlight needs two models: a <b>target</b> that writes the reply and a smaller "
            "<b>drafter</b> that guesses ahead of it.</p>"
            f"<p>The default pair is {target.title}, {target.size / 1e9:.1f} GB, drafted by "
            f"{drafter.title}, {drafter.size / 1e9:.1f} GB: {total_gb:.1f} GB in all from the "
            "Hugging Face hub. They go to your user cache folder, not into the app; an interrupted "
            "download picks up where it stopped, and each file is checked against its SHA-256 "
            "before use.</p>"
            "<p>Or choose GGUF files you already have: a target, then a drafter that shares its "
            "vocabulary.</p>"
        )
        intro.setWordWrap(True)
        intro.setMinimumWidth(540)  # wrapped text sets the dialog's width, and from it its height
        # The failure's first sentence ("... is not available."); where was tried, on hover.
        self.reason = QLabel(reason.split(" Tried: ")[0])
        self.reason.setObjectName("reason")
        self.reason.setToolTip(reason)
        self.reason.setWordWrap(True)
        self.reason.setVisible(bool(reason))
        self.status = QLabel()
        self.status.setObjectName("status")
        self.status.setWordWrap(True)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(True)
        self.progress.hide()

        self.download_button = QPushButton(f"Download the default pair ({total_gb:.1f} GB)")
        self.download_button.setDefault(True)
        self.choose_button = QPushButton("Choose GGUF files…")
        self.stop_button = QPushButton("Stop download")
        self.stop_button.hide()
        self.later_button = QPushButton("Not now")
        buttons = QHBoxLayout()
        buttons.addWidget(self.later_button)
        buttons.addStretch(1)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.choose_button)
        buttons.addWidget(self.download_button)

        layout = QVBoxLayout(self)
        layout.setSizeConstraint(QLayout.SizeConstraint.SetFixedSize)  # fits its wrapped text in every state
        layout.addWidget(self.reason)
        layout.addWidget(intro)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        layout.addLayout(buttons)

        self.download_button.clicked.connect(self.start_download)
        self.choose_button.clicked.connect(self.choose_files)
        self.stop_button.clicked.connect(self.stop_download)
        self.later_button.clicked.connect(self.reject)
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self._stop_for_exit)

    @property
    def downloading(self) -> bool:
        return self.download_thread is not None and self.download_thread.isRunning()

    # ---- download ----
    def start_download(self) -> None:
        if self.downloading:
            return
        self.download_thread = QThread(self)
        self.download_thread.setObjectName("first-run download")
        self.worker = DownloadWorker(self.download)
        self.worker.moveToThread(self.download_thread)
        self.download_thread.started.connect(self.worker.run)
        self.worker.progress.connect(self._progress)
        self.worker.fetched.connect(self._fetched)
        self.worker.failed.connect(self._failed)
        self.worker.fetched.connect(self.download_thread.quit)
        self.worker.failed.connect(self.download_thread.quit)
        self._set_busy(True)
        self.status.setText("Starting the download…")
        self.progress.setValue(0)
        self.progress.show()
        self.download_thread.start()

    def stop_download(self) -> None:
        if self.worker is not None and self.downloading:
            self.worker.cancel()
            self.status.setText("Stopping after the current chunk…")
            self.stop_button.setEnabled(False)

    def _progress(self, done: int, total: int, label: str) -> None:
        self.progress.setValue(int(1000 * done / max(total, 1)))
        self.progress.setFormat("%p%")
        self.status.setText(f"{label[:1].upper()}{label[1:]}: {done / 1e6:,.0f} of {total / 1e6:,.0f} MB")

    def _fetched(self, target: Path, drafter: Path) -> None:
        self.downloaded = (Path(target), Path(drafter))
        self.progress.setValue(1000)
        self.status.setText("Both models are here and checked. Loading them…")
        # The catalog's own names: the side panel shows "(default)" and a later start finds
        # the files again through engine.catalog, wherever its cache put them.
        self._choose(LoadRequest("default", "default"))

    def _failed(self, message: str, stopped: bool) -> None:
        self._set_busy(False)
        self.progress.setVisible(stopped)  # a stopped download shows how far it got
        self.status.setText(message if stopped else f"The download failed: {message}")
        self.download_button.setText("Resume the download" if stopped else "Try the download again")

    def _set_busy(self, busy: bool) -> None:
        """While downloading, the one thing to press is Stop."""
        for button in (self.download_button, self.choose_button, self.later_button):
            button.setVisible(not busy)
        self.stop_button.setVisible(busy)
        self.stop_button.setEnabled(busy)
        (self.stop_button if busy else self.download_button).setDefault(True)

    # ---- local files ----
    def choose_files(self) -> None:
        target = self.choose_file(self, "Choose the target model (GGUF)")
        if not target:
            return
        drafter = self.choose_file(self, "Choose the drafter model (GGUF), one that shares the target's vocabulary")
        if not drafter:
            self.status.setText("No drafter chosen: choose both files, or download the default pair.")
            return
        self._choose(LoadRequest(target, drafter))

    def _choose(self, request: LoadRequest) -> None:
        self.request = request
        self.chosen.emit(request)
        self.accept()

    # ---- closing ----
    def reject(self) -> None:
        """Esc or the close button: while downloading, stop the download and stay open."""
        if self.downloading:
            self.stop_download()
            return
        super().reject()

    def _stop_for_exit(self) -> None:
        if self.worker is not None and self.downloading:
            self.worker.cancel()
            self.download_thread.wait(10_000)
