"""The Preferences window (Cmd-comma): what was scattered over the side panel and the Engine menu,
and what had no home: the key that sends a message, the appearance.

Changes take effect as they are made, the Mac way: the generation defaults mirror the side
panel's controls both ways, a folder added or removed is searched (or not) at once, the send
key and the appearance apply at once. The engine's place, address and token take effect with
Close (Return), as the Engine menu's Connect does; Esc leaves the engine as it was. Closing
writes everything into the window's preferences, and saves them where the window saves its own.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QRadioButton,
    QSpinBox,
    QVBoxLayout,
)

from app import settings
from app.widgets import SEND_CHORD
from app.worker import LoadRequest, PairInfo

SEND_KEY_LABELS = {
    "return": "Return (Shift+Return for a new line)",
    "cmd-return": f"{SEND_CHORD} (Return for a new line)",
}
THEME_LABELS = {"system": "Follow the system", "light": "Light", "dark": "Dark"}


def _combo(labels: dict[str, str], name: str) -> QComboBox:
    combo = QComboBox()
    combo.setObjectName(name)
    for value, label in labels.items():
        combo.addItem(label, value)
    return combo


def _choose(combo: QComboBox, value: str) -> None:
    combo.setCurrentIndex(max(combo.findData(value), 0))


def mirror(a, b) -> None:
    """Two spin boxes, check boxes or text boxes that show one value: a change to either shows in the other."""
    if isinstance(a, (QSpinBox, QDoubleSpinBox)):
        b.setRange(a.minimum(), a.maximum())
        b.setSingleStep(a.singleStep())
        b.setSpecialValueText(a.specialValueText())
        if isinstance(a, QDoubleSpinBox):
            b.setDecimals(a.decimals())
        b.setValue(a.value())
        a.valueChanged.connect(b.setValue)  # an equal value emits nothing: no loop
        b.valueChanged.connect(a.setValue)
    elif isinstance(a, QCheckBox):
        b.setChecked(a.isChecked())
        a.toggled.connect(b.setChecked)
        b.toggled.connect(a.setChecked)
    else:
        b.setPlainText(a.toPlainText())
        for source, dest in ((a, b), (b, a)):
            source.textChanged.connect(
                lambda s=source, d=dest: d.toPlainText() != s.toPlainText() and d.setPlainText(s.toPlainText())
            )


def context_sentence(pair: PairInfo | None) -> str:
    """The context the loaded model reads, beside what it was trained for."""
    if pair is None or not pair.n_ctx:
        return "The context is set when the models load on this machine."
    trained = f" (trained for {pair.n_ctx_train:,})" if pair.n_ctx_train else ""
    return f"Now {pair.n_ctx:,} tokens{trained}."


class PreferencesWindow(QDialog):
    """Part of MainWindow, made on first use and kept: window.open_preferences() shows it."""

    theme_changed = Signal(str)  # "system", "light" or "dark", as it is chosen

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self.setWindowTitle("Preferences")
        self.setModal(False)
        layout = QVBoxLayout(self)
        side = window.side

        gen = QGroupBox("Generation (the side panel shows the same)")
        form = QFormLayout(gen)
        self.temperature, self.max_tokens = QDoubleSpinBox(), QSpinBox()
        self.thinking = QCheckBox(side.thinking.text())
        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setPlaceholderText(side.system_prompt.placeholderText())
        self.system_prompt.setMaximumHeight(90)
        for mine, panels in (
            (self.temperature, side.temperature),
            (self.max_tokens, side.max_tokens),
            (self.thinking, side.thinking),
            (self.system_prompt, side.system_prompt),
        ):
            mirror(panels, mine)
        form.addRow("Temperature", self.temperature)
        form.addRow("Max tokens", self.max_tokens)
        form.addRow(self.thinking)
        form.addRow("System prompt", self.system_prompt)
        layout.addWidget(gen)

        folders = QGroupBox("Folders searched for models (besides LM Studio's, Ollama's and the usual caches)")
        column = QVBoxLayout(folders)
        self.folders = QListWidget()
        self.folders.setObjectName("model_folders")
        self.add_folder_button, self.remove_folder_button = QPushButton("Add folder…"), QPushButton("Remove")
        self.add_folder_button.clicked.connect(self._choose_folder)
        self.remove_folder_button.clicked.connect(self.remove_chosen_folder)
        row = QHBoxLayout()
        row.addWidget(self.add_folder_button)
        row.addWidget(self.remove_folder_button)
        row.addStretch(1)
        column.addWidget(self.folders)
        column.addLayout(row)
        side.folders_changed.connect(self._show_folders)
        layout.addWidget(folders)

        engine = QGroupBox("Engine (applied with Close)")
        eform = QFormLayout(engine)
        self.local, self.remote = QRadioButton("This machine"), QRadioButton("A server elsewhere")
        self.places = QButtonGroup(self)
        for button in (self.local, self.remote):
            self.places.addButton(button)
        self.remote_url, self.remote_token = QLineEdit(), QLineEdit()
        self.remote_url.setPlaceholderText("http://127.0.0.1:8765")
        self.remote_token.setEchoMode(QLineEdit.EchoMode.Password)
        self.remote_token.setPlaceholderText("the server's --token, if it has one")
        self.remote.toggled.connect(self._show_place)
        places = QHBoxLayout()
        places.addWidget(self.local)
        places.addWidget(self.remote)
        eform.addRow("Replies from", places)
        eform.addRow("Server", self.remote_url)
        eform.addRow("Token", self.remote_token)
        self.context = QSpinBox()
        self.context.setObjectName("context")
        self.context.setRange(0, 1_048_576)
        self.context.setSingleStep(1024)
        self.context.setSpecialValueText("Auto")
        self.context.setSuffix(" tokens")
        self.context.setToolTip(
            "How much of the conversation the model reads at once. Auto: the model's trained length, "
            "as far as this machine's memory allows. Older turns are left out of longer conversations."
        )
        self.context_now = QLabel()
        self.context_now.setObjectName("context_now")
        eform.addRow("Context", self.context)
        eform.addRow("", self.context_now)
        self.measure_button = QPushButton("Measure this machine again")
        self.measure_button.setObjectName("measure_again")
        self.measure_button.setToolTip(
            "Time the target's passes and the drafter's steps again, for Auto; replies stream plain meanwhile."
        )
        self.measure_button.clicked.connect(lambda: window.measure_control.measure(again=True))
        eform.addRow("Auto", self.measure_button)
        layout.addWidget(engine)

        other = QFormLayout()
        self.send_key = _combo(SEND_KEY_LABELS, "send_key")
        self.send_key.currentIndexChanged.connect(lambda _i: self._send_key_chosen())
        self.theme = _combo(THEME_LABELS, "theme")
        self.theme.currentIndexChanged.connect(lambda _i: self._theme_chosen())
        other.addRow("Send with", self.send_key)
        other.addRow("Appearance", self.theme)
        layout.addLayout(other)

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        close = buttons.button(QDialogButtonBox.StandardButton.Close)
        close.setDefault(True)
        close.clicked.connect(self.accept)
        layout.addWidget(buttons)
        self.refresh()

    def refresh(self) -> None:
        """Show what the window uses now (the generation controls already follow the side panel)."""
        p = self.window.prefs
        self._show_folders()
        (self.remote if p.engine_place == "remote" else self.local).setChecked(True)
        self._show_place()
        self.remote_url.setText(p.remote_url)
        self.remote_token.setText(p.remote_token)
        self.context.setValue(p.context)
        self.context_now.setText(context_sentence(self.window.pair))
        for combo, value in ((self.send_key, p.send_key), (self.theme, p.theme)):
            combo.blockSignals(True)  # showing a value is not choosing it
            _choose(combo, value)
            combo.blockSignals(False)

    # ---- model folders ----
    def _show_folders(self) -> None:
        self.folders.clear()
        self.folders.addItems(self.window.side.model_folders)
        self.remove_folder_button.setEnabled(bool(self.window.side.model_folders))

    def add_folder(self, folder: str) -> None:
        self.window.side.add_folder(folder)  # it says so: the list here follows

    def _choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "A folder of GGUF models", str(Path.home()))
        if folder:
            self.add_folder(folder)

    def remove_chosen_folder(self) -> None:
        item = self.folders.currentItem()
        if item is not None:
            self.window.side.remove_folder(item.text())

    # ---- the rest ----
    def _show_place(self) -> None:
        for field in (self.remote_url, self.remote_token):
            field.setEnabled(self.remote.isChecked())

    def _send_key_chosen(self) -> None:
        self.window.prefs.send_key = self.send_key.currentData()
        self.window.input.set_send_key(self.window.prefs.send_key)

    def _theme_chosen(self) -> None:
        name = self.theme.currentData()
        self.window.prefs.theme = name
        self.window.apply_theme(name)  # every window recolours now
        self.theme_changed.emit(name)

    def accept(self) -> None:
        """Close: the engine as chosen here, every preference in the window's, saved where the window saves."""
        w, p = self.window, self.window.prefs
        place = "remote" if self.remote.isChecked() else "local"
        url = self.remote_url.text().strip() or self.remote_url.placeholderText()
        token = self.remote_token.text().strip()
        changed = (place, url, token) != (p.engine_place, p.remote_url, p.remote_token)
        resized = self.context.value() != p.context
        p.engine_place, p.remote_url, p.remote_token, p.context = place, url, token, self.context.value()
        w.side.store(p)
        if changed and place == "remote":
            w.attach(url, token)
        elif changed:
            w.use_this_machine()
        elif resized and place == "local" and w.pair is not None:
            w.load(LoadRequest(w.pair.target, w.pair.drafter))  # a context is made when the models load
        if w.save_preferences:
            settings.save(p)
        super().accept()
