"""The main window: conversations, the coloured transcript, the side panel and charts.

Here are its layout, the engine and models it talks to, and its status line; the conversation and its
replies are app/chatflow.py, the tool windows app/toolwindows.py.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QApplication, QFrame, QMainWindow, QScrollArea, QSplitter, QWidget

from app import exports, settings, theme
from app.actions import MessageActions
from app.boxmeasure import MeasureControl
from app.chartfeed import ChartFeed
from app.charts import ChartModel, ChartsPanel
from app.chatflow import ChatFlow
from app.conversations import ConversationActions
from app.editmenu import EditHistory
from app.enginethread import end_process, start_engine_thread, stop_engine_thread
from app.firstrun import is_missing_model
from app.menus import Menus
from app.pairing import PairingPanel
from app.preferences import context_sentence
from app.remote import EngineMenu, ThermalSource, place_text
from app.replies import ReplyWriter
from app.sidepanel import SidePanel
from app.statusbar import StatusLine, plain_basis, plain_pass_s
from app.storeopen import default_store_path, open_store
from app.toolwindows import ToolWindows
from app.transcript import TranscriptView
from app.widgets import ChatPane, ConversationList
from app.worker import AttachRequest, AutoStatus, LoadRequest, PairInfo
from engine import AUTO, RunStats, ThermalReading, runtime_name

DEFAULT_SIZE = (1400, 860)


def default_size(free_width: int, free_height: int) -> tuple[int, int]:
    """The window's first size on a screen with this much free room, less the title bar's: all of it
    shows on a 1440x900 laptop screen (a Mac's menu bar and title bar take about 55 px of the 900)."""
    return min(DEFAULT_SIZE[0], free_width), min(DEFAULT_SIZE[1], free_height - 40)


def scrolling(widget: QWidget) -> QScrollArea:
    """`widget` in a frameless scroll area that lends it the room it has, and scrolls past that."""
    area = QScrollArea()
    area.setWidget(widget)
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
    return area


class MainWindow(ChatFlow, ToolWindows, QMainWindow):
    request_load = Signal(object)
    request_attach = Signal(object)  # AttachRequest: replies from a server elsewhere
    request_reply = Signal(object)
    reply_finished = Signal(object)  # RunStats or None: for tests and the self-test
    thermal_reading = Signal(object)  # from the sampler's thread to the GUI thread

    def __init__(
        self, store_path: Path | None = None, prefs: settings.Preferences | None = None, runtime: str = "auto"
    ) -> None:
        super().__init__()
        self.runtime = runtime  # `draftlight --runtime`: llama, mlx, or auto (each model's format decides)
        self.setWindowTitle("Draftlight")
        self.prefs = prefs or settings.load()
        # Never fails: a damaged file is moved aside, an unwritable place falls back to memory.
        self.store, self.store_notice = open_store(store_path or default_store_path())
        self.store.on_failure = self._say
        self.reply = ReplyWriter(self.store)
        self.hard_exit = os._exit  # where closing cannot end the engine thread (tests swap it)
        self.chart_model = ChartModel()
        self.pair: PairInfo | None = None
        self.watch_speculation = False  # the user asked to speculate where it cannot pay
        self.busy = False
        self.streaming = False
        self.attaching = False  # a Connect is on its way to the worker
        self.conversation_id = 0
        self.last_reply_stats: RunStats | None = None
        self.just_sent: tuple[int, str] | None = None  # the message that asked for the reply now running
        self.fit_note = ""  # which oldest turns the reply's prompt left out, if any
        self.requested: tuple[str, str] = ("", "")  # the models last asked for
        self.auto: AutoStatus | None = None  # the latest, while Auto is chosen
        self.save_preferences = prefs is None  # preferences handed in (tests, self-test) stay private
        self.offer_first_run = prefs is None  # no dialog in tests and the self-test unless asked for

        if self.prefs.theme != "system":  # else the platform's light or dark, followed live
            theme.apply(self.prefs.theme)
        self._build()
        self._start_worker()
        if self.prefs.geometry is not None:
            self.restoreGeometry(self.prefs.geometry)
        if self.prefs.splitter is not None:
            self.splitter.restoreState(self.prefs.splitter)
        if self.prefs.side_splitter is not None:
            self.side_splitter.restoreState(self.prefs.side_splitter)
        self.side.apply(self.prefs)
        self.input.set_send_key(self.prefs.send_key)
        self.side.verdict.setText("Loading models…")
        self._say("")  # the chat database's notice, if it has one
        self._open_conversations()
        self.thermal_reading.connect(self._thermal)
        self.thermal = ThermalSource(self.thermal_reading.emit, self.chart_model.clear_thermal)
        self.thermal.use()  # this machine's, until a remote engine answers
        if self.prefs.engine_place == "remote":
            self.attach(self.prefs.remote_url, self.prefs.remote_token)
        else:
            self.load(LoadRequest(self.prefs.target, self.prefs.drafter))

    def apply_theme(self, name: str) -> bool:
        """Light, dark, or the system's (followed live): every window redraws in it. Whether it is dark."""
        return theme.apply(name)

    def load(self, request: LoadRequest) -> None:
        """Load a pair; at Auto depth, plain on the fastest settings where drafts cannot pay here."""
        self.requested = (request.target, request.drafter)  # a file refused leaves the pickers
        auto = self.side.chosen_depth() == AUTO
        options = replace(request.options, n_ctx=self.prefs.context)  # 0: Auto, sized by the engine
        self.request_load.emit(
            replace(request, options=options, go_plain=not self.watch_speculation, auto=auto, runtime=self.runtime)
        )

    def attach(self, url: str, token: str = "") -> None:
        """Replies from the engine at `url` (`draftlight serve`, llama-server, vLLM) from now on."""
        if self.streaming:
            self._say("The engine can be changed once the reply has finished.")
            return
        self.attaching = True
        self.prefs.remote_url, self.prefs.remote_token = url, token
        self.side.verdict.setText(f"Connecting to {url}…")
        self.request_attach.emit(AttachRequest(url, token or None))

    def use_this_machine(self) -> None:
        """Back from a remote engine to this machine's models."""
        if self.pair is None or self.pair.remote is not None:
            self.load(LoadRequest(self.prefs.target, self.prefs.drafter))

    def speculate_anyway(self) -> None:
        """Load the drafter although it cannot pay here, and draft at a fixed depth: to watch it."""
        self.watch_speculation = True
        if self.side.chosen_depth() in (AUTO, 0):
            self.side.set_depth(2)
        if self.pair is not None:
            self.load(LoadRequest(self.pair.target, self.pair.drafter))

    # ---- layout ----
    def _build(self) -> None:
        self.conversations = ConversationList()

        center = self.chat_pane = ChatPane(TranscriptView())
        self.transcript, self.legend, self.notice = center.transcript, center.legend, center.notice
        self.input, self.send_button, self.stop_button = center.input, center.send_button, center.stop_button
        self.legend.raw.toggled.connect(self.transcript.set_raw)  # rendered Markdown or the raw text
        self.transcript.copied.connect(self._say)
        center.speculate_anyway.clicked.connect(self.speculate_anyway)
        self.speculate_button = center.speculate_anyway
        self.retry_button = center.retry
        self.retry_button.clicked.connect(self.retry)
        self.remove_failed_button = center.remove_failed
        self.remove_failed_button.clicked.connect(lambda: self.edits.remove_failed_reply())

        self.side = SidePanel(self.prefs.recent_files, self.prefs.model_folders)
        self.charts = ChartsPanel(self.chart_model)
        self.chart_feed = ChartFeed(self.store, self.transcript, self.chart_model, lambda: self.streaming)
        self.side_splitter = right = QSplitter(Qt.Orientation.Vertical)
        # Each scrolls where the window is small (1024x700): nothing is cut, nothing sets the window's minimum.
        side = scrolling(self.side)
        side.setMinimumWidth(self.side.minimumSizeHint().width() + side.verticalScrollBar().sizeHint().width())
        side.setMinimumHeight(self.side.minimumSizeHint().height())  # the charts give way first
        right.addWidget(side)
        right.addWidget(scrolling(self.charts))
        right.setStretchFactor(1, 1)

        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(self.conversations)
        self.splitter.addWidget(center)
        self.splitter.addWidget(right)
        self.splitter.setSizes([180, 640, 580])
        self.setCentralWidget(self.splitter)

        self.status = StatusLine(self.statusBar())

        self.message_tools, self.conversation_tools = MessageActions(self), ConversationActions(self)
        self.edits = EditHistory(self)  # Undo/Redo of deletions; Cut/Copy/Paste/Select All on the focus
        self.message_actions, self.conversation_actions = self.message_tools.actions, self.conversation_tools.actions
        self.engine_menu = EngineMenu(self, self.use_this_machine, self.attach)
        self.menus = Menus(self)

        self.conversations.new_requested.connect(self.new_conversation)
        self.conversations.chosen.connect(self._conversation_chosen)
        self.send_button.clicked.connect(self.send)
        self.input.submitted.connect(self.send)
        self.stop_button.clicked.connect(self.stop)
        self.side.models_requested.connect(self._models_requested)
        self.side.check_pair_requested.connect(lambda t, d: PairingPanel.open_for(self, t, d))
        self._fit_to_screen()

    def _fit_to_screen(self) -> None:
        """The default size, within the screen's free area (not the offscreen platform's 800x600,
        which nobody looks at: the tests keep the full default there)."""
        screen = self.screen() or QApplication.primaryScreen()
        if screen is None or QApplication.platformName() == "offscreen":
            self.resize(*DEFAULT_SIZE)
        else:
            free = screen.availableGeometry()
            self.resize(*default_size(free.width(), free.height()))

    def _start_worker(self) -> None:
        self.thread, self.worker = start_engine_thread(self)
        self.measure_control = MeasureControl(self, self.chat_pane)  # the box measured for Auto, in the background
        self.request_load.connect(self.worker.load)
        self.request_attach.connect(self.worker.attach)
        self.worker.connection_lost.connect(self._connection_lost)
        self.request_reply.connect(self.worker.generate)
        self.worker.load_progress.connect(self.side.show_progress)
        self.worker.loaded.connect(self._loaded)
        self.worker.load_failed.connect(self._load_failed)
        self.worker.events.connect(self._events)
        self.worker.reply_failed.connect(self._reply_failed)
        self.worker.reply_stopped.connect(self._reply_stopped)
        self.worker.message_refused.connect(self._message_refused)
        self.worker.prompt_fitted.connect(self._prompt_fitted)
        self.worker.busy_changed.connect(self._busy_changed)
        self.worker.auto_status.connect(self._auto_status)
        self.worker.ledger_notice.connect(self.ledger_said)
        self.thread.start()

    # ---- models ----
    def _models_requested(self, target: str, drafter: str) -> None:
        if self.streaming:
            self._say("Models can be changed once the reply has finished.")
            if self.pair:
                self.side.show_loaded(self.pair.target, self.pair.drafter)
            return
        self.load(LoadRequest(target, drafter))

    def ledger_said(self, text: str) -> None:
        """The acceptance ledger's warning after a reply: said once it appears or changes."""
        if self.pair is not None and text != self.pair.ledger:
            self.pair = replace(self.pair, ledger=text)
            self.side.flag_stale(self.pair.drafter, text)
            self._say("")

    def _loaded(self, info: PairInfo) -> None:
        self.pair, self.attaching = info, False
        self.prefs.engine_place = "remote" if info.remote else "local"
        self.engine_menu.show(info.remote is not None)
        if info.remote is None:
            self.prefs.target, self.prefs.drafter = info.target, info.drafter
            self.side.show_loaded(info.target, info.drafter)
            self.side.flag_stale(info.drafter, info.ledger)
        self.side.show_remote(info.remote is not None)
        self.thermal.use(info.remote_thermal)  # the chart follows the box that does the work
        self.status.show_place(place_text(info.remote, info.runtime))
        self.side.show_verdict(info.verdict, info.compatible)
        modes = {"exact": "exact (batch-invariant)", "remote": place_text(info.remote)}
        mode = modes.get(info.mode, "fast (may change greedy text)") if info.mode else ""
        on = f"on {runtime_name(info.runtime)}" if info.runtime else ""
        title = " — ".join(x for x in ("Draftlight", f"{info.target_name} + {info.drafter_name}", mode, on) if x)
        self.setWindowTitle(title)
        self.status.show_drafter(info.drafter_kind, info.drafter_name)
        self.side.depth_note.clear()  # what Auto did with the models before
        self.measure_control.loaded(info)
        if self.preferences_window is not None:  # the context made, beside the one asked for
            self.preferences_window.context_now.setText(context_sentence(info))
        self._say("")  # the standing notices: the pair's in one line, with "why?"
        self.speculate_button.setVisible(info.plain)
        self._update_buttons()

    def _load_failed(self, message: str) -> None:
        if not self.attaching:  # the file the sentence names leaves the pickers; the other one stays
            for spec in self.requested:
                if spec and Path(spec).name in message:
                    self.side.forget(spec)
        if self.attaching:  # a server that did not answer: whatever ran before still does
            self.attaching = False
            self.engine_menu.show(self.pair is not None and self.pair.remote is not None)
            after = "Replies still come from before." if self.pair else "Check the address (Engine → Remote server…)."
            self.side.show_verdict(f"{message} {after}", False)
            self._say(f"{message} {after}")
        elif self.pair is not None:
            self.side.show_loaded(self.pair.target, self.pair.drafter)
            self.side.show_verdict(message, False)
            self._say(f"{message} The previous models stay loaded.")
        else:
            self.side.show_verdict(message, False)
            self.transcript.add_error(
                f"{message}\n\nChoose GGUF files in the side panel, or run `make models` in a terminal "
                "and restart Draftlight."
            )
            if self.offer_first_run and is_missing_model(message):
                self.offer_models(message)
        self.side.progress.hide()
        self._update_buttons()

    def _busy_changed(self, busy: bool) -> None:
        self.busy = busy
        self._update_buttons()

    def _update_buttons(self) -> None:
        ready = self.pair is not None and not self.busy
        self.send_button.setEnabled(ready and not self.streaming)
        self.stop_button.setEnabled(self.streaming)
        self.side.setEnabled(not self.streaming)
        if hasattr(self, "measure_control"):
            self.measure_control.panel.set_paused(self.streaming)

    # ---- status ----
    def _say(self, text: str) -> None:
        """A sentence under the transcript; with none, the standing notices: the chat database's
        (moved aside, or kept in memory only) and the pair's (why it runs plain)."""
        if text:
            self.notice.say(text)
            return
        pair = " ".join(n for n in (self.pair.notice, self.pair.ledger) if n) if self.pair else ""
        if self.store_notice:
            self.notice.say(" ".join(n for n in (self.store_notice, pair) if n))
        else:
            self.notice.say_briefly(pair)  # the key figure; "why?" opens the arithmetic

    def _show_status(self, stats: RunStats | None) -> None:
        replies = [m.stats for m in self.store.messages(self.conversation_id) if m.stats]
        profile_basis = self.auto.profile_basis if self.auto else self.pair.profile_basis if self.pair else ""
        basis = plain_basis(replies, profile_basis)
        self.status.show(stats, self.plain_pass_s() if stats is not None else None, replies, basis)

    def plain_pass_s(self) -> float | None:
        replies = [m.stats for m in self.store.messages(self.conversation_id) if m.stats]
        profile_s = self.auto.plain_pass_s if self.auto else self.pair.plain_pass_s if self.pair else None
        return plain_pass_s(replies, profile_s)

    def _auto_status(self, status: AutoStatus) -> None:
        self.auto = status
        self.side.show_auto(status, self.chart_model.tps[-1][1] if self.chart_model.tps else None)

    def _thermal(self, reading: ThermalReading) -> None:
        self.chart_model.add_thermal(reading)
        self.status.show_thermal(reading)

    # ---- export ----
    def export_trace(self, path: Path) -> int:
        """The conversation's replies as `draftlight chat --json` lines; returns lines written."""
        return exports.export_trace(self.store, self.conversation_id, path)

    def export_charts(self, path: Path) -> bool:
        return self.charts.grab().save(str(path), "PNG")

    # ---- closing ----
    def closeEvent(self, event) -> None:
        self.worker.cancel()  # the one cancel path: a round, and whatever else the engine can interrupt
        self.reply.flush()  # then stop_engine_thread waits, bounded, for the engine thread to end
        self.thermal.stop()
        self.prefs.geometry = self.saveGeometry()
        self.prefs.splitter = self.splitter.saveState()
        self.prefs.side_splitter = self.side_splitter.saveState()
        self.side.store(self.prefs)
        self.prefs.last_conversation = self.conversation_id
        if self.save_preferences:
            settings.save(self.prefs)
        self.charts.timer.stop()
        ended = stop_engine_thread(self.thread, self.worker)
        self.store.close()  # a streamed reply stays marked interrupted: the next start says it was cut short
        if not ended:
            end_process(self.hard_exit)
        super().closeEvent(event)
