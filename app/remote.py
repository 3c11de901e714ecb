"""Where the engine runs: this machine, or a server elsewhere (`draftlight serve`, llama-server, vLLM).

The Engine menu picks the place (the address and token remembered); the thermal chart and the
status bar follow the box that does the work; a connection lost mid-reply keeps what
arrived and offers a retry.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QFormLayout, QLabel, QLineEdit

from engine import RemoteInfo, ThermalReading, ThermalSampler, TokenEvent, TokenKind, runtime_name

REMOTE = "remote"
TUNNEL_HINT = (
    "On the server: draftlight serve (it listens on 127.0.0.1:8765). Here: ssh -L 8765:127.0.0.1:8765 HOST, "
    "then connect to http://127.0.0.1:8765. llama-server and vLLM answer too, without token colours."
)
REMOTE_THERMAL_S = 2.0  # one small request to the server per reading
UNCOLOURED = "tokens not coloured: the server did not report where each came from"


class RemoteDialog(QDialog):
    """The Engine menu's "Remote server…": an address and a token, with the tunnel recipe."""

    chosen = Signal(str, str)  # url, token

    def __init__(self, url: str, token: str, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Remote engine")
        form = QFormLayout(self)
        self.url = QLineEdit(url)
        self.url.setObjectName("remote_url")
        self.url.setPlaceholderText("http://127.0.0.1:8765")
        self.url.setMinimumWidth(320)
        self.token = QLineEdit(token)
        self.token.setObjectName("remote_token")
        self.token.setEchoMode(QLineEdit.EchoMode.Password)
        self.token.setPlaceholderText("the server's --token, if it has one")
        hint = QLabel(TUNNEL_HINT)
        hint.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        connect = buttons.addButton("Connect", QDialogButtonBox.ButtonRole.AcceptRole)
        connect.setObjectName("remote_connect")
        connect.setDefault(True)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow("Server", self.url)
        form.addRow("Token", self.token)
        form.addRow(hint)
        form.addRow(buttons)

    def accept(self) -> None:
        self.chosen.emit(self.url.text().strip() or self.url.placeholderText(), self.token.text().strip())
        super().accept()


class EngineMenu:
    """The Engine menu: This machine, or Remote server…; the checked one is where replies come from."""

    def __init__(self, window, use_local: Callable[[], None], use_remote: Callable[[str, str], None]) -> None:
        self.window, self._use_remote = window, use_remote
        self.menu = menu = window.menuBar().addMenu("&Engine")
        group = QActionGroup(menu)
        self.local = QAction("This machine", menu, checkable=True)
        self.remote = QAction("Remote server…", menu, checkable=True)
        for action in (self.local, self.remote):
            group.addAction(action)
            menu.addAction(action)
        self.local.triggered.connect(use_local)
        self.remote.triggered.connect(self.ask)
        self.dialog: RemoteDialog | None = None
        self.show(window.prefs.engine_place == REMOTE)

    def ask(self) -> RemoteDialog:
        """The address dialog, filled with the last one used; Connect attaches."""
        prefs = self.window.prefs
        self.show(self.window.pair is not None and self.window.pair.remote is not None)  # until it answers
        self.dialog = RemoteDialog(prefs.remote_url, prefs.remote_token, self.window)
        self.dialog.chosen.connect(self._use_remote)
        self.dialog.open()
        return self.dialog

    def show(self, remote: bool) -> None:
        (self.remote if remote else self.local).setChecked(True)


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
        self._unsubscribe = self.sampler.subscribe(self._deliver)
        self.sampler.start()

    def _deliver(self, reading: ThermalReading) -> None:
        """A reading to the chart, from the sampler's thread; where the window that showed it is gone
        (Qt deleted its signal's source), the sampling ends with it."""
        try:
            self._emit(reading)
        except RuntimeError:
            self.stop()

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


def place_text(info: RemoteInfo | None, runtime: str = "") -> str:
    """The status bar's words for where replies come from, and on which runtime here ("llama", "mlx")."""
    if info is not None:
        return f"remote: {info.describe()}"
    return f"this machine on {runtime_name(runtime)}" if runtime else "this machine"
