"""The pairing panel: the pairing doctor's report for the pair picked in the side panel.

Each compatibility rule with its mark, what the architectures mean, the memory the pair
needs, an acceptance probe on the user's own recent prompts (or the built-in ones), the
speed this box's profile predicts against plain, and a better pair where the catalog has
one. The engine's pairing doctor makes the report (engine.pair_report); this window only
shows it. The check and the probe are Jobs (app/jobs.py) on a thread of their own, with
models of their own: the probe takes about 20 seconds and can be cancelled between rounds.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.jobs import Job, ProgressReport, end_thread, own_thread
from engine import CONTENT_KINDS, PairLedger, PairReport, for_pair, pair_report, probe_pair, runtime_name

OK, NOT_OK = "#2a7a2a", "#b22222"
PROBE_SECONDS = 20.0
NAME_CHARS = 60  # a prompt's first words, as the probe's table names it


@dataclass(frozen=True)
class ProbeRequest:
    report: PairReport
    prompts: tuple[tuple[str, str], ...]  # (name, text): the user's recent prompts; () for the built-in ones
    seconds: float = PROBE_SECONDS
    max_tokens: int = 64
    max_prompts: int = 6


def named_prompts(texts: list[str]) -> tuple[tuple[str, str], ...]:
    """The user's prompts, each named by its first words (what the probe's table shows)."""
    named = []
    for text in texts:
        words = " ".join(text.split())
        named.append((words if len(words) <= NAME_CHARS else words[: NAME_CHARS - 1].rstrip() + "…", text))
    return tuple(named)


def check(target: str, drafter: str) -> PairReport:
    """The report without its probe: reads the files' headers, loads nothing."""
    return pair_report(target, drafter, probe_seconds=0, download=False)


def probe(
    request: ProbeRequest, progress: Callable[[int, int, str], None], cancelled: Callable[[], bool]
) -> PairReport:
    """The report with its probe run; a cancel ends the probe between rounds, with a report that says so."""
    return probe_pair(
        request.report,
        request.prompts or None,
        request.seconds,
        request.max_tokens,
        request.max_prompts,
        progress,
        cancelled,
    )


def ledger_html(view: PairLedger | None) -> str:
    """The pair's ledger status (a stale drafter in red) and its history by content kind, each change marked."""
    if view is None:
        return "The acceptance ledger is turned off (DRAFTLIGHT_LEDGER=off)."
    color = NOT_OK if view.warnings else OK
    out = f"<span style='color:{color}'>{html.escape(view.status())}</span>"
    kinds = [k for k in CONTENT_KINDS if any(k in row.by_kind for row in view.history)]
    if not view.history:
        return out
    head = "".join(f"<th align='right'>{k}</th>" for k in ("day", "replies", *kinds)) + "<th align='left'>changed</th>"
    rows = []
    for row in view.history[-12:]:  # the latest days; `draftlight pair --history` prints them all
        cells = [row.day, str(row.replies)]
        for k in kinds:
            t = row.by_kind.get(k)
            cells.append(f"{t.acceptance:.0%} ({t.drafted:,})" if t else "-")
        mark = f"<span style='color:{NOT_OK}'>{html.escape(', '.join(row.changed))}</span>" if row.changed else ""
        rows.append("".join(f"<td align='right'>{html.escape(c)}</td>" for c in cells) + f"<td>{mark}</td>")
    body = "".join(f"<tr>{r}</tr>" for r in rows)
    return f"{out}<table cellspacing='6'><tr>{head}</tr>{body}</table>"


class PairingPanel(QWidget):
    """A tool window for one pair: the report, and the probe on demand."""

    report_shown = Signal(object)  # PairReport: after the check, and again after the probe

    def __init__(self, target: str, drafter: str, prompts: list[str] | None = None, parent=None) -> None:
        super().__init__(parent)
        self.setWindowFlag(Qt.WindowType.Window, True)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        self.setWindowTitle("Check this pair")
        self.target_spec, self.drafter_spec = target, drafter
        self.prompts = named_prompts(prompts or [])
        self.report: PairReport | None = None
        self.probing = False
        self.probe_seconds, self.probe_tokens, self.probe_prompts = PROBE_SECONDS, 64, 6  # the tests' probe is shorter

        self.heading = QLabel("Checking the pair…")
        self.heading.setObjectName("heading")
        self.heading.setWordWrap(True)
        font = self.heading.font()
        font.setPointSizeF(font.pointSizeF() * 1.25)
        font.setBold(True)
        self.heading.setFont(font)
        self.verdict = self._label("verdict")
        self.rules = self._label("rules")
        self.architecture = self._label("architecture")
        self.memory = self._label("memory")
        self.prediction = self._label("prediction")
        self.suggestion = self._label("suggestion")
        self.ledger = self._label("ledger")

        n = len(self.prompts)
        source = {0: "the built-in prompts (no chats yet)", 1: "your most recent prompt"}.get(
            n, f"your {n} most recent prompts"
        )
        self.probe_note = self._label("probe_note")
        self.probe_note.setText(
            f"Greedy replies at depth 3 on {source}, for about {PROBE_SECONDS:g} seconds: "
            "how often the target keeps the drafter's tokens on your kind of text."
        )
        self.start_button = QPushButton(f"Run the probe ({PROBE_SECONDS:g} s)")
        self.start_button.setEnabled(False)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setTextVisible(True)
        self.progress.hide()
        self.table = QTableWidget(0, 4)
        self.table.setObjectName("probe_table")
        self.table.setHorizontalHeaderLabels(["Prompt", "Acceptance", "Drafts kept", "Tokens"])
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.probe_summary = self._label("probe_summary")

        layout = QVBoxLayout(self)
        layout.addWidget(self.heading)
        layout.addWidget(self.verdict)
        layout.addWidget(self._group("Compatibility rules (llama.cpp's)", self.rules))
        layout.addWidget(self._group("Architecture", self.architecture))
        layout.addWidget(self._group("Memory", self.memory))
        probe = QGroupBox("Acceptance probe")
        probe_layout = QVBoxLayout(probe)
        buttons = QHBoxLayout()
        buttons.addWidget(self.probe_note, 1)
        buttons.addWidget(self.start_button)
        buttons.addWidget(self.cancel_button)
        probe_layout.addLayout(buttons)
        probe_layout.addWidget(self.progress)
        probe_layout.addWidget(self.table, 1)
        probe_layout.addWidget(self.probe_summary)
        layout.addWidget(probe, 1)
        layout.addWidget(self._group("Predicted speed on this machine", self.prediction))
        layout.addWidget(self._group("A better pair", self.suggestion))
        layout.addWidget(self._group("Acceptance over time (the acceptance ledger)", self.ledger))

        # The probe ends itself on a cancel, with a report saying how far it got.
        self.job = Job("The pairing check failed", stops_itself=True)
        self.job.yielded.connect(self._progress)
        self.job.returned.connect(self._reported)
        self.job.errored.connect(self._failed)
        self.job.aborted.connect(self._cancelled)
        self.start_button.clicked.connect(self.start_probe)
        self.cancel_button.clicked.connect(self.cancel)
        self.thread = own_thread(self.job, self, "pairing")
        self.resize(900, 780)
        self.job.start(check, target, drafter)

    @classmethod
    def open_for(cls, window, target: str, drafter: str) -> PairingPanel:
        """A panel for this pair, over the main window, probing the user's recent prompts."""
        panel = cls(target, drafter, window.store.recent_prompts(6), window)
        window.installEventFilter(panel)  # closing the main window stops the check or the probe
        panel.show()
        panel.raise_()
        return panel

    def eventFilter(self, watched, event) -> bool:
        if watched is self.parent() and event.type() == QEvent.Type.Close:
            self.close()
        return False

    @staticmethod
    def _label(name: str) -> QLabel:
        label = QLabel()
        label.setObjectName(name)
        label.setWordWrap(True)
        label.setTextFormat(Qt.TextFormat.RichText)  # every text is escaped: a token's '<' shows as itself
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        return label

    @staticmethod
    def _group(title: str, body: QWidget) -> QGroupBox:
        box = QGroupBox(title)
        QVBoxLayout(box).addWidget(body)
        return box

    # ---- the probe ----
    def start_probe(self) -> bool:
        """Run the probe; False where the pair cannot be probed (the reason is shown)."""
        if self.probing or self.report is None:
            return False
        if not self.report.compatible:
            self.probe_summary.setText("The probe needs a drafter that can draft for this target.")
            return False
        self._set_probing(True)
        self.table.setRowCount(0)
        self.probe_summary.setText("")
        self.progress.show()
        self.progress.setRange(0, 0)  # busy until the pair has loaded
        self.progress.setFormat("loading the pair")
        request = ProbeRequest(self.report, self.prompts, self.probe_seconds, self.probe_tokens, self.probe_prompts)
        self.job.start(probe, request, self.job.progress, self.job.cancelled)
        return True

    def cancel(self) -> None:
        if self.probing:
            self.job.cancel()
            self.progress.setFormat("cancelling after this round…")

    def _set_probing(self, probing: bool) -> None:
        self.probing = probing
        self.start_button.setEnabled(not probing and self.report is not None and self.report.compatible)
        self.cancel_button.setEnabled(probing)

    def _progress(self, report: ProgressReport) -> None:
        done, total, what = report.done, report.total, report.label
        if what == "loading the pair":
            return
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(done)
        self.progress.setFormat(f"{what} ({done} of {total} prompts done)" if done < total else "done")

    def _cancelled(self) -> None:
        self.progress.hide()
        self._set_probing(False)
        self.probe_summary.setText("The probe was cancelled before it could report.")

    # ---- showing the report ----
    def _reported(self, report: PairReport) -> None:
        """The check's report, or the probe's."""
        self.progress.hide()
        self.report = report  # before the buttons: Run follows its verdict
        self._set_probing(False)
        self.show_report(report)

    def _failed(self, message: str) -> None:
        self.progress.hide()
        self._set_probing(False)
        self.heading.setText("This pair could not be checked")
        self.verdict.setText(f"<span style='color:{NOT_OK}'>✗</span> {html.escape(message)}")

    def show_report(self, report: PairReport) -> None:
        self.report = report
        drafter = report.drafter.name if report.drafter else report.drafter_kind
        self.heading.setText(f"{report.target.name} + {drafter} on {runtime_name(report.runtime)}")
        color = OK if report.compatible else NOT_OK
        found = f"{html.escape(report.found)}<br>" if report.found else ""
        self.verdict.setText(f"{found}<span style='color:{color}'><b>{html.escape(report.verdict)}</b></span>")
        self.rules.setText(
            "<br>".join(
                f"<span style='color:{OK if r.holds else NOT_OK}'>{'✓' if r.holds else '✗'}</span> "
                f"<b>{html.escape(r.name)}</b>: {html.escape(r.sentence)}"
                for r in report.rules
            )
            or "No rule applies: this drafter has no vocabulary of its own."
        )
        self.architecture.setText("<br>".join(html.escape(line) for line in report.architecture))
        self.memory.setText(html.escape(report.memory.sentence()))
        self.prediction.setText(html.escape(" ".join(x for x in (report.prediction.sentence, report.runtimes) if x)))
        self.suggestion.setText(html.escape(report.suggestion or "None: no catalog pair is better for this target."))
        self.ledger.setText(
            ledger_html(for_pair(report.target.path, report.drafter and report.drafter.path, report.drafter_kind))
        )
        probe = report.probe
        if probe is not None:
            self.table.setRowCount(len(probe.prompts))
            for row, p in enumerate(probe.prompts):
                rate = f"{p.acceptance:.0%}" if p.acceptance is not None else "-"
                cells = (
                    p.name,
                    rate,
                    f"{p.accepted} of {p.drafted}",
                    f"{p.tokens}{' (cut short)' if p.cut_short else ''}",
                )
                for col, text in enumerate(cells):
                    item = QTableWidgetItem(text)
                    if col:
                        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                    self.table.setItem(row, col, item)
            self.probe_summary.setText(html.escape(probe.summary()))
        self.report_shown.emit(report)

    def closeEvent(self, event) -> None:
        end_thread(self.job, self.thread)
        super().closeEvent(event)
