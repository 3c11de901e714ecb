"""Where the engine runs: this machine, or a server elsewhere (`draftlight serve`, llama-server, vLLM).

The side panel's "Engine" box picks the place and remembers it; the thermal chart and the
status bar follow the box that does the work; a connection lost mid-reply keeps what
arrived and offers a retry.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QFormLayout, QGroupBox, QLabel, QLineEdit, QPushButton

from app import settings
from engine import RemoteInfo, ThermalReading, ThermalSampler, TokenEvent, TokenKind

LOCAL, REMOTE = "local", "remote"
TUNNEL_HINT = (
    "On the server: draftlight serve (it listens on 127.0.0.1:8765). Here: ssh -L 8765:127.0.0.1:8765 HOST, "
    "then connect to http://127.0.0.1:8765. llama-server and vLLM answer too, without token colours."
)
REMOTE_THERMAL_S = 2.0  # one small request to the server per reading
UNCOLOURED = "tokens not coloured: the server did not report where each came from"


class EnginePlace(QGroupBox):
    """Engine: this machine, or a remote server at a URL with its token."""

    local_chosen = Signal()
    remote_chosen = Signal(str, str)  # url, token

    def __init__(self, parent=None) -> None:
        super().__init__("Engine", parent)
        form = QFormLayout(self)
        self.place = QComboBox()
        self.place.setObjectName("engine_place")
        self.place.addItem("This machine", LOCAL)
        self.place.addItem("Remote server", REMOTE)
        self.url = QLineEdit()
        self.url.setObjectName("remote_url")
        self.url.setPlaceholderText("http://127.0.0.1:8765")
        self.token = QLineEdit()
        self.token.setObjectName("remote_token")
        self.token.setEchoMode(QLineEdit.EchoMode.Password)
        self.token.setPlaceholderText("the server's --token, if it has one")
        self.connect_button = QPushButton("Connect")
        self.connect_button.setObjectName("remote_connect")
        self.hint = QLabel(TUNNEL_HINT)
        self.hint.setWordWrap(True)
        self.hint.setObjectName("remote_hint")
        form.addRow("Runs on", self.place)
        self._rows = [("Server", self.url), ("Token", self.token), (None, self.connect_button), (None, self.hint)]
        for label, widget in self._rows:
            if label:
                form.addRow(label, widget)
            else:
                form.addRow(widget)
        self._form = form
        self.place.activated.connect(self._place_chosen)
        self.connect_button.clicked.connect(self._connect)
        self.url.returnPressed.connect(self._connect)
        self._show_fields()

    def is_remote(self) -> bool:
        return self.place.currentData() == REMOTE

    def _show_fields(self) -> None:
        for _, widget in self._rows:
            self._form.setRowVisible(widget, self.is_remote())

    def _place_chosen(self, _: int) -> None:
        self._show_fields()
        if not self.is_remote():
            self.local_chosen.emit()
        elif self.url.text().strip():
            self._connect()

    def _connect(self) -> None:
        self.remote_chosen.emit(self.url.text().strip() or self.url.placeholderText(), self.token.text().strip())

    def apply(self, prefs: settings.Preferences) -> None:
        self.place.setCurrentIndex(max(self.place.findData(prefs.engine_place), 0))
        self.url.setText(prefs.remote_url)
        self.token.setText(prefs.remote_token)
        self._show_fields()

    def store(self, prefs: settings.Preferences) -> None:
        prefs.engine_place = self.place.currentData()
        prefs.remote_url = self.url.text().strip()
        prefs.remote_token = self.token.text().strip()


class ThermalSource:
    """The thermal chart's feed: this machine's sampler, or the remote box's, one at a time."""

    def __init__(self, emit: Callable[[ThermalReading], None], clear: Callable[[], None]) -> None:
        self._emit, self._clear = emit, clear
        self.sampler: ThermalSampler | None = None
        self._unsubscribe: Callable[[], None] = lambda: None
        self.remote = False

    def use(self, remote_reader: Callable[[], ThermalReading] | None = None) -> None:
        """Sample this machine (no reader) or the remote box; a change of box starts the chart afresh."""
        remote = remote_reader is not None
        if self.sampler is not None and remote == self.remote and not remote:
            return
        self.stop()
        if remote != self.remote:
            self._clear()
        self.remote = remote
        self.sampler = ThermalSampler(interval=REMOTE_THERMAL_S if remote else 1.0, provider=remote_reader)
        self._unsubscribe = self.sampler.subscribe(self._emit)
        self.sampler.start()

    def stop(self) -> None:
        self._unsubscribe()
        if self.sampler is not None:
            self.sampler.stop()
            self.sampler = None


def uncoloured_note(tokens: list[TokenEvent], info: RemoteInfo | None) -> str:
    """Why a reply's tokens have no colours, where they have none: the server's own sentence if known."""
    if not tokens or any(t.kind is not TokenKind.UNREPORTED for t in tokens):
        return ""
    return info.why_uncoloured if info is not None and info.why_uncoloured else UNCOLOURED


def place_text(info: RemoteInfo | None) -> str:
    """The status bar's words for where replies come from."""
    return f"remote: {info.describe()}" if info is not None else "this machine"
