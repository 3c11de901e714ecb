"""The first-run dialog: the default pair downloaded off the GUI thread, or two chosen files."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.firstrun import PAIR, FirstRunDialog, is_missing_model
from app.worker import LoadRequest
from engine.errors import ModelFileError, ModelNotAvailable
from engine.models import catalog

MISSING = f"{catalog.DEFAULT_TARGET.title} is not available. Tried: the cache folder /nowhere (not there)."


class FakeHub:
    """Stands in for the hub: reports progress in steps, then gives the real cached files."""

    def __init__(self, paths: dict[str, Path], fail: Exception | None = None, endless: bool = False) -> None:
        self.paths = paths
        self.fail = fail
        self.endless = endless
        self.threads: set[threading.Thread] = set()
        self.asked: list[str] = []

    def __call__(self, model: catalog.CatalogModel, progress) -> Path:
        self.threads.add(threading.current_thread())
        self.asked.append(model.key)
        steps = 10**6 if self.endless else 4
        for i in range(steps + 1):
            progress(model.size * min(i, steps) // steps, model.size, f"downloading {model.filename}")
            time.sleep(0.15)  # past the job's 0.1 s throttle: every step reaches the bar
        if self.fail is not None:
            raise self.fail
        return self.paths[model.key]


@pytest.fixture
def hub(target_path, drafter_path):
    return FakeHub({catalog.DEFAULT_TARGET.key: target_path, catalog.DEFAULT_DRAFTER.key: drafter_path})


@pytest.fixture
def open_dialog(qtbot):
    dialogs = []

    def open_(**kwargs) -> FirstRunDialog:
        dialog = FirstRunDialog(MISSING, **kwargs)
        qtbot.addWidget(dialog)
        dialog.open()
        dialogs.append(dialog)
        return dialog

    yield open_
    for d in dialogs:  # no download thread outlives its test, even a failed one
        if d.job is not None:
            d.job.cancel()
        qtbot.waitUntil(lambda d=d: not d.downloading, timeout=60_000)


def test_missing_model_messages_are_recognised():
    assert is_missing_model(MISSING)
    assert is_missing_model(f"{catalog.DEFAULT_DRAFTER.title} is not available. Tried: nothing.")
    assert not is_missing_model("No model file at /tmp/x.gguf, and no catalog model of that name.")


def test_download_reports_progress_off_the_gui_thread_then_loads_the_default_pair(
    qtbot, open_dialog, hub, target_path, drafter_path
):
    dialog = open_dialog(download=hub)
    assert "is not available" in dialog.reason.text() and "Tried" in dialog.reason.toolTip()
    values = []
    dialog.progress.valueChanged.connect(values.append)
    with qtbot.waitSignal(dialog.chosen, timeout=30_000) as blocker:
        qtbot.mouseClick(dialog.download_button, Qt.MouseButton.LeftButton)
        assert not dialog.download_button.isVisible() and dialog.stop_button.isVisible()
    assert blocker.args == [LoadRequest("default", "default")]
    assert dialog.request == LoadRequest("default", "default")
    assert dialog.downloaded == (target_path, drafter_path)
    assert hub.asked == [m.key for m in PAIR]
    assert threading.main_thread() not in hub.threads and len(hub.threads) == 1
    # Each file climbs to full in steps on the bar: the target, then the drafter.
    assert values.count(1000) == 2 and any(0 < v < 1000 for v in values)
    assert dialog.result() == FirstRunDialog.DialogCode.Accepted and not dialog.isVisible()


def test_a_failed_download_says_why_and_can_be_tried_again(qtbot, open_dialog, hub):
    hub.fail = ModelNotAvailable("The Hugging Face hub could not be reached (ConnectError).")
    dialog = open_dialog(download=hub)
    qtbot.mouseClick(dialog.download_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "The download failed" in dialog.status.text(), timeout=30_000)
    assert "could not be reached" in dialog.status.text()
    assert dialog.isVisible() and dialog.request is None
    assert dialog.download_button.isVisible() and dialog.download_button.text() == "Try the download again"
    assert dialog.choose_button.isVisible() and not dialog.stop_button.isVisible()


def test_stopping_a_download_keeps_the_dialog_open_to_resume(qtbot, open_dialog, hub):
    hub.endless = True
    dialog = open_dialog(download=hub)
    qtbot.mouseClick(dialog.download_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "Downloading" in dialog.status.text(), timeout=10_000)
    qtbot.keyClick(dialog, Qt.Key.Key_Escape)  # Esc while downloading stops the download, not the dialog
    qtbot.waitUntil(lambda: not dialog.downloading, timeout=10_000)
    assert "Download stopped" in dialog.status.text() and "resumes" in dialog.status.text()
    assert dialog.isVisible() and dialog.request is None
    assert dialog.download_button.text() == "Resume the download"


def test_chosen_files_are_loaded_as_the_pair(qtbot, open_dialog, target_path, drafter_path):
    answers = iter([str(target_path), str(drafter_path)])
    titles = []

    def choose(parent, title):
        titles.append(title)
        return next(answers)

    dialog = open_dialog(choose_file=choose)
    with qtbot.waitSignal(dialog.chosen, timeout=5_000) as blocker:
        qtbot.mouseClick(dialog.choose_button, Qt.MouseButton.LeftButton)
    assert blocker.args == [LoadRequest(str(target_path), str(drafter_path))]
    assert "target" in titles[0] and "drafter" in titles[1]
    assert not dialog.isVisible()


def test_choosing_no_drafter_keeps_the_dialog_open(qtbot, open_dialog, target_path):
    answers = iter([str(target_path), None])
    dialog = open_dialog(choose_file=lambda parent, title: next(answers))
    qtbot.mouseClick(dialog.choose_button, Qt.MouseButton.LeftButton)
    assert dialog.request is None and dialog.isVisible()
    assert "No drafter chosen" in dialog.status.text()


def test_the_window_offers_the_dialog_when_no_model_was_ever_loaded(qtbot, make_window, tmp_path, hub):
    window = make_window(target=str(tmp_path / "missing.gguf"), drafter="none")
    assert window.pair is None
    # Preferences handed in (tests, the self-test): no dialog, and a missing file is no missing model.
    assert not window.offer_first_run and getattr(window, "first_run_dialog", None) is None
    window.offer_first_run = True
    window.worker.load_failed.emit(str(ModelFileError("No model file at /nowhere.gguf.")))
    assert getattr(window, "first_run_dialog", None) is None
    window.worker.load_failed.emit(MISSING)
    dialog = window.first_run_dialog
    assert dialog.isVisible() and dialog.isModal()
    dialog.download = hub
    qtbot.mouseClick(dialog.download_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.pair is not None, timeout=180_000)
    assert window.pair.target == "default" and window.pair.drafter == "default"
    assert window.send_button.isEnabled() or window.busy
    qtbot.waitUntil(lambda: not dialog.downloading, timeout=10_000)
