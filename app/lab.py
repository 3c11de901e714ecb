"""The prompt lab: a list of prompts through the loaded pair at several depths, side by side.

Each prompt runs greedy for a fixed number of tokens (end-of-generation banned) at each
chosen depth. The table shows what each run's RunStats say (acceptance per position,
mean accepted length, decode tok/s) and the depth this machine's box profile predicts
is best for the prompt's measured acceptance. The runs use the window's engine on the
window's engine thread, so the lab and the chat never run at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QAbstractTableModel, QEvent, QModelIndex, QSortFilterProxyModel, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.jobs import Job, ProgressReport
from app.labresults import (  # noqa: F401  (re-exported: the lab's public names)
    DEFAULT_DEPTHS,
    Column,
    LabRequest,
    LabResults,
    LabRun,
    as_jsonl,
    best_for_prompt,
    load_prompts,
    parse_prompts,
)
from app.worker import EngineWorker
from engine import (
    MAX_DEPTH,
    BoxProfile,
    Cancelled,
    DraftlightError,
    FinishReason,
    GenerationConfig,
    Message,
    RoundEvent,
    RunStats,
)

SORT_ROLE = Qt.ItemDataRole.UserRole
OFFERED_DEPTHS = tuple(range(MAX_DEPTH + 1))
NO_PROFILE = (
    "No box profile for this pair yet (run `draftlight tune` or pick Auto once): "
    "the best depth shown is the measured fastest."
)


@dataclass(frozen=True)
class LabBasis:
    """What the best depth is predicted from: the pair's saved box profile, or None (the measured fastest)."""

    profile: BoxProfile | None


def lab_runs(engine_worker: EngineWorker, request: LabRequest, cancelled: Callable[[], bool]) -> Iterator[object]:
    """A lab request as a job on the engine thread (the engine_worker's own): yields the LabBasis,
    then a ProgressReport before each run and each LabRun as it completes."""
    engine = engine_worker.engine
    if engine is None:
        raise DraftlightError(engine_worker.missing())
    if engine.drafter is None and any(request.depths):
        raise DraftlightError("No drafter is loaded: choose one in the side panel, or run depth 0 only.")
    yield LabBasis(engine.saved_profile())
    n, total = len(request.prompts), len(request.prompts) * len(request.depths)
    done = 0
    for i, prompt in enumerate(request.prompts):
        ids = engine.prompt_ids([Message("user", prompt.text)])
        for depth in request.depths:
            yield ProgressReport(done, total, f"prompt {i + 1} of {n}, depth {depth}")
            config = GenerationConfig(max_tokens=request.max_tokens, depth=depth, ignore_eog=True, probabilities=False)
            rounds, stats = [], None
            for event in engine.stream(ids, config, cancelled, source="lab"):
                if isinstance(event, RoundEvent) and not event.from_prefill:
                    rounds.append((event.drafted, event.accepted))
                elif isinstance(event, RunStats):
                    stats = event
            if stats is None or stats.finish_reason is FinishReason.CANCELLED:
                raise Cancelled("Cancelled mid-run.")  # a run cut short measures nothing: it is dropped
            yield LabRun(i, prompt, depth, stats, tuple(rounds))
            done += 1
    yield ProgressReport(total, total, "done")


# ---- the table --------------------------------------------------------------------------


class LabTableModel(QAbstractTableModel):
    """LabResults for a QTableView: text to show, raw figures under SORT_ROLE for sorting."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.results = LabResults()
        self._columns = self.results.columns()

    def column_index(self, header: str) -> int:
        return [c.header for c in self._columns].index(header)

    def begin(self, request: LabRequest) -> None:
        self.beginResetModel()
        self.results = LabResults(max_depth=max(request.depths))
        self._columns = self.results.columns()
        self.endResetModel()

    def set_costs(self, profile: BoxProfile | None) -> None:
        self.results.profile = profile
        self._changed()

    def add(self, run: LabRun) -> None:
        n = len(self.results.runs)
        self.beginInsertRows(QModelIndex(), n, n)
        self.results.runs.append(run)
        self.endInsertRows()
        self._changed()  # a prompt's best depth and speedups move with each run

    def _changed(self) -> None:
        if self.results.runs:
            self.dataChanged.emit(self.index(0, 0), self.index(self.rowCount() - 1, self.columnCount() - 1))

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.results.runs)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._columns)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return self._columns[section].header
        return None

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        run, column = self.results.runs[index.row()], self._columns[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            return self.results.shown(column, run)
        if role == SORT_ROLE:
            value = column.value(run)
            return ("" if column.text else -1.0) if value is None else value
        if role == Qt.ItemDataRole.ToolTipRole and column.header == "Prompt":
            return run.prompt.text
        return None


class _NumericSort(QSortFilterProxyModel):
    """Numbers compare as numbers (not as text); text compares without case."""

    def lessThan(self, left, right) -> bool:
        a, b = left.data(SORT_ROLE), right.data(SORT_ROLE)
        if isinstance(a, int | float) and isinstance(b, int | float):
            return a < b
        return str(a).casefold() < str(b).casefold()


# ---- the window -------------------------------------------------------------------------


class PromptLab(QWidget):
    """Paste or load prompts, choose depths and a token count, run, sort, export."""

    running_changed = Signal(bool)

    def __init__(self, main_window) -> None:
        super().__init__(main_window)
        self.setWindowFlag(Qt.WindowType.Window, True)
        self.setWindowTitle("Prompt lab")
        self.main = main_window
        self.running = False

        self.prompts = QPlainTextEdit()
        self.prompts.setPlaceholderText(
            'One prompt per line; or JSON lines of {"category": …, "prompt": …}; or Spec-Bench\'s question.jsonl.'
        )
        self.prompts.setMaximumHeight(140)
        self.load_button = QPushButton("Load file…")
        self.depth_boxes = {d: QCheckBox(str(d)) for d in OFFERED_DEPTHS}
        for d, box in self.depth_boxes.items():
            box.setChecked(d in DEFAULT_DEPTHS)
        self.max_tokens = QSpinBox()
        self.max_tokens.setRange(1, 4096)
        self.max_tokens.setValue(64)
        self.start_button = QPushButton("Run")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setFormat("")
        self.status = QLabel()
        self.status.setObjectName("lab_status")
        self.status.setWordWrap(True)
        self.basis = QLabel()
        self.basis.setWordWrap(True)

        self.model = LabTableModel(self)
        self.proxy = _NumericSort(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(SORT_ROLE)
        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, Qt.SortOrder.AscendingOrder)  # run order: the sort is stable
        self.table.verticalHeader().hide()
        header = self.table.horizontalHeader()  # every column as wide as its title or its figures
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(self.model.column_index("Prompt"), QHeaderView.ResizeMode.Stretch)
        self.csv_button = QPushButton("Export CSV…")
        self.markdown_button = QPushButton("Export markdown…")

        settings = QHBoxLayout()
        settings.addWidget(self.load_button)
        settings.addSpacing(12)
        settings.addWidget(QLabel("Depths"))
        for box in self.depth_boxes.values():
            settings.addWidget(box)
        settings.addSpacing(12)
        settings.addWidget(QLabel("Tokens (greedy)"))
        settings.addWidget(self.max_tokens)
        settings.addStretch(1)
        settings.addWidget(self.start_button)
        settings.addWidget(self.cancel_button)
        exports = QHBoxLayout()
        exports.addWidget(self.basis, 1)
        exports.addWidget(self.csv_button)
        exports.addWidget(self.markdown_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.prompts)
        layout.addLayout(settings)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        layout.addWidget(self.table, 1)
        layout.addLayout(exports)

        self.job = Job("The lab failed")
        self.job.moveToThread(main_window.thread)  # queued behind the chat, never beside it
        self.job.yielded.connect(self._yielded)
        self.job.errored.connect(self.status.setText)
        self.job.aborted.connect(self._cancelled)
        self.job.finished.connect(self._finished)
        self.load_button.clicked.connect(self.load_dialog)
        self.start_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(self.cancel)
        self.csv_button.clicked.connect(self.export_csv_dialog)
        self.markdown_button.clicked.connect(self.export_markdown_dialog)
        main_window.installEventFilter(self)  # closing the main window cancels a run
        self.resize(1200, 640)

    # ---- running ----
    def depths(self) -> tuple[int, ...]:
        return tuple(d for d, box in self.depth_boxes.items() if box.isChecked())

    def start(self) -> bool:
        """Start a run of the pasted prompts; False, with the reason shown, where it cannot."""
        w = self.main
        if self.running:
            return False
        if w.streaming:
            self.status.setText("A chat reply is streaming: stop it or let it finish, then run the lab.")
            return False
        if w.pair is None or w.busy:
            self.status.setText("The models are still loading: run the lab once they are ready.")
            return False
        try:
            prompts = parse_prompts(self.prompts.toPlainText())
        except DraftlightError as exc:
            self.status.setText(str(exc))
            return False
        if not self.depths():
            self.status.setText("Choose at least one depth.")
            return False
        request = LabRequest(tuple(prompts), self.depths(), self.max_tokens.value())
        self.model.begin(request)
        self._set_running(True)
        self.status.setText("")
        self.progress.setRange(0, len(prompts) * len(request.depths))
        self.progress.setValue(0)
        self.job.start(lab_runs, w.worker, request, self.job.cancelled)
        return True

    def cancel(self) -> None:
        if self.running:
            self.job.cancel()
            self.status.setText("Cancelling after this round…")

    def _set_running(self, running: bool) -> None:
        self.running = running
        # The window's send() refuses while busy: the lab holds the engine like a model load does.
        self.main._busy_changed(running)
        self.start_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        self.running_changed.emit(running)

    def _yielded(self, value: object) -> None:
        match value:
            case LabRun():
                self.model.add(value)
            case ProgressReport(done=done, total=total, label=label):
                self.progress.setRange(0, total)
                self.progress.setValue(done)
                self.progress.setFormat(label if done < total else f"{total} runs")
            case LabBasis(profile=profile):
                self.model.set_costs(profile)
                basis = "Best depth: predicted from this machine's box profile."
                self.basis.setText(NO_PROFILE if profile is None else basis)

    def _cancelled(self) -> None:
        n = len(self.model.results.runs)
        self.status.setText(f"Cancelled after {n} runs: the completed rows are kept.")
        self.progress.setFormat(f"cancelled after {n} runs")

    def _finished(self) -> None:
        self._set_running(False)
        if not self.status.text():  # a failure or a cancel has said how it ended
            self.status.setText(f"Done: {len(self.model.results.runs)} runs.")

    def eventFilter(self, watched, event) -> bool:
        if watched is self.main and event.type() == QEvent.Type.Close:
            self.job.cancel()
        return False

    def closeEvent(self, event) -> None:
        self.cancel()
        super().closeEvent(event)

    # ---- files ----
    def view_order(self) -> list[int]:
        """Rows of the results in the order the table shows them."""
        return [self.proxy.mapToSource(self.proxy.index(r, 0)).row() for r in range(self.proxy.rowCount())]

    def export_csv(self, path: Path) -> None:
        self.model.results.write_csv(Path(path), self.view_order())

    def export_markdown(self, path: Path) -> None:
        Path(path).write_text(self.model.results.markdown(self.view_order()), encoding="utf-8")

    def load_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Load prompts", str(Path.home()), "Prompts (*.jsonl *.txt);;All files (*)"
        )
        if path:
            try:
                prompts = load_prompts(path)
            except DraftlightError as exc:
                self.status.setText(str(exc))
                return
            self.prompts.setPlainText(as_jsonl(prompts))
            self.status.setText(f"Loaded {len(prompts)} prompts from {Path(path).name}.")

    def export_csv_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export CSV", "prompt-lab.csv", "CSV (*.csv)")
        if path:
            self.export_csv(Path(path))
            self.status.setText(f"Wrote {path}.")

    def export_markdown_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export markdown", "prompt-lab.md", "Markdown (*.md)")
        if path:
            self.export_markdown(Path(path))
            self.status.setText(f"Wrote {path}.")
