"""First run without models: download the default pair, or choose two GGUF files.

The window opens this dialog when its first load finds no model. A download is a Job
(app/jobs.py) on a thread of its own: it reports progress through signals and stops at
the next chunk when asked. An interrupted download resumes where it stopped:
huggingface_hub keeps the partial file in its cache and continues it on the next try.
engine.catalog checks every file against its SHA-256 before it is used. Files go to the
user's cache folders, never inside the app bundle.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QThread, Signal
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

from app.jobs import Job, ProgressReport, end_thread, own_thread
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


def fetch_pair(download: Download, progress: Progress) -> tuple[Path, Path]:
    """The default pair's local paths, each downloaded where it is missing: a job on its own thread."""
    target, drafter = (Path(download(model, progress)) for model in PAIR)
    return target, drafter


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
        self.job: Job | None = None

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
        self.job = Job("Something unexpected stopped it")  # after "The download failed: "
        self.job.yielded.connect(self._progress)
        self.job.returned.connect(self._fetched)
        self.job.errored.connect(self._failed)
        self.job.aborted.connect(self._stopped)
        self._set_busy(True)
        self.status.setText("Starting the download…")
        self.progress.setValue(0)
        self.progress.show()
        # A thread for each download, ended with it: nothing runs on after the dialog.
        self.download_thread = own_thread(self.job, self, "first-run download")
        self.job.finished.connect(self.download_thread.quit)
        self.job.start(fetch_pair, self.download, self.job.progress)

    def stop_download(self) -> None:
        if self.job is not None and self.downloading:
            self.job.cancel()
            self.status.setText("Stopping after the current chunk…")
            self.stop_button.setEnabled(False)

    def _progress(self, report: ProgressReport) -> None:
        done, total, label = report.done, report.total, report.label
        self.progress.setValue(int(1000 * done / max(total, 1)))
        self.progress.setFormat("%p%")
        self.status.setText(f"{label[:1].upper()}{label[1:]}: {done / 1e6:,.0f} of {total / 1e6:,.0f} MB")

    def _fetched(self, paths: tuple[Path, Path]) -> None:
        self.downloaded = paths
        self.progress.setValue(1000)
        self.status.setText("Both models are here and checked. Loading them…")
        # The catalog's own names: the side panel shows "(default)" and a later start finds
        # the files again through engine.catalog, wherever its cache put them.
        self._choose(LoadRequest("default", "default"))

    def _failed(self, message: str) -> None:
        self._set_busy(False)
        self.progress.hide()
        self.status.setText(f"The download failed: {message}")
        self.download_button.setText("Try the download again")

    def _stopped(self) -> None:
        self._set_busy(False)
        self.progress.show()  # how far it got
        self.status.setText("Download stopped. It resumes where it left off next time.")
        self.download_button.setText("Resume the download")

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
        if self.job is not None and self.downloading:
            end_thread(self.job, self.download_thread, 10_000)
