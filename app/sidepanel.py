"""The side panel: which models, how to generate, and whether the drafter fits."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app import settings
from engine import (
    AUTO,
    AUTO_SPEC,
    DRAFTER_KINDS,
    MAX_DEPTH,
    NO_DRAFTER,
    Depth,
    GenerationConfig,
    SamplingConfig,
    catalog,
    local_models,
    model_title,
)

CHOOSE = "__choose__"
FOLDER = "__folder__"
DEPTHS = [("Off", 0), *((str(k), k) for k in range(1, MAX_DEPTH + 1)), ("Auto (tuned to this machine)", AUTO)]


STALE_MARK = " (stale: acceptance fell)"  # a drafter the acceptance ledger says no longer fits this target


class SidePanel(QWidget):
    models_requested = Signal(str, str)  # target spec, drafter spec
    check_pair_requested = Signal(str, str)  # the pairing doctor, for the picked target and drafter
    folders_changed = Signal()  # a folder of models added or removed (here or in Preferences)

    def __init__(self, recent_files: list[str], model_folders: list[str] | None = None, parent=None) -> None:
        super().__init__(parent)
        self.recent_files = recent_files
        self.model_folders = model_folders if model_folders is not None else []
        self.local = local_models(self.model_folders)  # LM Studio, Ollama, HF and llama.cpp caches, folders
        self._loaded = ("", "")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)

        models = QGroupBox("Models")
        self.models_box = models
        form = QFormLayout(models)
        self._models_form = form
        self.target = QComboBox()
        self.target.setObjectName("target")
        self.drafter = QComboBox()
        self.drafter.setObjectName("drafter")
        for combo in (self.target, self.drafter):
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(24)
        self.verdict = QLabel()
        self.verdict.setObjectName("verdict")
        self.verdict.setWordWrap(True)
        self.verdict.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.progress = QProgressBar()
        self.progress.setTextVisible(True)
        self.progress.hide()
        form.addRow("Target", self.target)
        form.addRow("Drafter", self.drafter)
        self.check_pair = QPushButton("Check this pair…")
        self.check_pair.setObjectName("check_pair")
        self.check_pair.setToolTip(
            "Every compatibility rule, the memory the pair needs, a 20-second acceptance probe on your "
            "recent prompts, and its predicted speed on this machine"
        )
        self.check_pair.clicked.connect(self._check_pair)
        form.addRow(self.verdict)
        form.addRow(self.check_pair)
        form.addRow(self.progress)
        layout.addWidget(models)

        gen = QGroupBox("Generation")
        gform = QFormLayout(gen)
        self.depth = QComboBox()
        self.depth.setObjectName("depth")
        for label, value in DEPTHS:
            self.depth.addItem(label, value)
        self.temperature = QDoubleSpinBox()
        self.temperature.setRange(0.0, 2.0)
        self.temperature.setSingleStep(0.1)
        self.temperature.setSpecialValueText("0 (greedy)")
        self.max_tokens = QSpinBox()
        self.max_tokens.setRange(1, 8192)
        self.thinking = QCheckBox("Thinking (for models that support it)")
        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setPlaceholderText("System prompt (optional)")
        self.system_prompt.setMaximumHeight(70)
        self.depth_note = QLabel()
        self.depth_note.setWordWrap(True)
        self.depth_note.setObjectName("depth_note")
        # What Auto did describes the last Auto reply: another depth or pair makes it stale.
        self.depth.currentIndexChanged.connect(lambda _i: self.depth_note.clear())
        gform.addRow("Depth", self.depth)
        gform.addRow(self.depth_note)
        gform.addRow("Temperature", self.temperature)
        gform.addRow("Max tokens", self.max_tokens)
        gform.addRow(self.thinking)
        gform.addRow(self.system_prompt)
        layout.addWidget(gen)

        self._fill_models()
        self.target.activated.connect(self._target_chosen)
        self.drafter.activated.connect(self._drafter_chosen)

    # ---- model pickers ----
    def _fill_models(self) -> None:
        self.target.blockSignals(True)
        self.drafter.blockSignals(True)
        self.target.clear()
        self.drafter.clear()
        self.target.addItem(f"{catalog.DEFAULT_TARGET.title} (default)", "default")
        self.drafter.addItem(f"{catalog.DEFAULT_DRAFTER.title} (default)", "default")
        for kind in DRAFTER_KINDS.values():  # the keyword kinds, then auto, then no drafter
            if kind.picked and kind is not NO_DRAFTER:
                self.drafter.addItem(kind.picked, kind.name)
        self.drafter.addItem("Find one for this target (auto)", AUTO_SPEC)
        self.drafter.addItem(NO_DRAFTER.picked, NO_DRAFTER.name)
        for path in self.recent_files:
            name = model_title(path, quant="")  # the catalog's title, or the file's name: no header read here
            self.target.addItem(name, path)
            self.drafter.addItem(name, path)
        for model in self.local:  # used where they are, never copied
            if str(model.path) not in self.recent_files:
                if not model.drafter:  # a drafter folder (DFlash, EAGLE-3, an assistant) chats with no one
                    self.target.addItem(model.label(), str(model.path))
                self.drafter.addItem(model.picked(), str(model.path))
        for combo in (self.target, self.drafter):
            combo.addItem("Add a folder of models…", FOLDER)
            combo.addItem("Choose a GGUF file…", CHOOSE)
        self.target.blockSignals(False)
        self.drafter.blockSignals(False)

    def _remember(self, path: str) -> None:
        if path in self.recent_files:
            self.recent_files.remove(path)
        self.recent_files.insert(0, path)
        del self.recent_files[8:]
        loaded = self._loaded
        self._fill_models()
        self.show_loaded(*loaded)

    def forget(self, path: str) -> None:
        """A file that failed to load leaves the pickers (it stays on disk, untouched)."""
        if path in self.recent_files:
            self.recent_files.remove(path)
            self._fill_models()
            self.show_loaded(*self._loaded)

    def add_folder(self, folder: str) -> None:
        """Search a folder for models from now on (remembered with the preferences)."""
        if folder and folder not in self.model_folders:
            self.model_folders.append(folder)
        self._search_folders()

    def remove_folder(self, folder: str) -> None:
        """Stop searching a folder for models; its models leave the pickers (the files stay)."""
        if folder in self.model_folders:
            self.model_folders.remove(folder)
        self._search_folders()

    def _search_folders(self) -> None:
        self.local = local_models(self.model_folders)
        loaded = self._loaded
        self._fill_models()
        self.show_loaded(*loaded)
        self.folders_changed.emit()

    def _choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "A folder of GGUF models", str(Path.home()))
        if folder:
            self.add_folder(folder)
        else:
            self.show_loaded(*self._loaded)

    def _choose_file(self, title: str) -> str | None:
        path, _ = QFileDialog.getOpenFileName(self, title, str(Path.home()), "GGUF models (*.gguf);;All files (*)")
        return path or None

    def _target_chosen(self, index: int) -> None:
        spec = self.target.itemData(index)
        if spec == FOLDER:
            self._choose_folder()
            return
        if spec == CHOOSE:
            spec = self._choose_file("Choose a target model")
            if spec is None:
                self.show_loaded(*self._loaded)
                return
            self._remember(spec)
        self.models_requested.emit(spec, self._loaded[1] or "default")

    def _drafter_chosen(self, index: int) -> None:
        spec = self.drafter.itemData(index)
        if spec == FOLDER:
            self._choose_folder()
            return
        if spec == CHOOSE:
            spec = self._choose_file("Choose a drafter model")
            if spec is None:
                self.show_loaded(*self._loaded)
                return
            self._remember(spec)
        self.verdict.setText("Checking the drafter's vocabulary against the target…")
        self.models_requested.emit(self._loaded[0] or "default", spec)

    def _check_pair(self) -> None:
        picked = [combo.currentData() for combo in (self.target, self.drafter)]
        target, drafter = (
            spec if spec not in (CHOOSE, FOLDER, None) else loaded for spec, loaded in zip(picked, self._loaded)
        )
        self.check_pair_requested.emit(target or "default", drafter or "default")

    def show_loaded(self, target: str, drafter: str) -> None:
        """Point the pickers at what is actually loaded (a refused choice snaps back)."""
        self._loaded = (target, drafter)
        for combo, spec in ((self.target, target), (self.drafter, drafter)):
            i = combo.findData(spec)
            if i < 0 and spec:
                combo.insertItem(
                    combo.count() - 2, model_title(spec, quant=""), spec
                )  # before the two "choose" entries
                i = combo.findData(spec)
            combo.setCurrentIndex(max(i, 0))

    def flag_stale(self, drafter: str, warning: str) -> None:
        """Mark the loaded drafter in its picker where the acceptance ledger says it went stale for this target."""
        i = self.drafter.findData(drafter)
        if i < 0:
            return
        text = self.drafter.itemText(i).removesuffix(STALE_MARK)
        self.drafter.setItemText(i, text + STALE_MARK if warning else text)
        self.drafter.setItemData(i, warning or None, Qt.ItemDataRole.ToolTipRole)

    def show_verdict(self, text: str, ok: bool) -> None:
        color = "#2a7a2a" if ok else "#b22222"
        self.verdict.setText(f"<span style='color:{color}'>{'✓' if ok else '✗'}</span> {text}" if text else "")

    def show_progress(self, done: int, total: int, label: str) -> None:
        if done >= total:
            self.progress.hide()
            return
        self.progress.show()
        self.progress.setRange(0, 1000)
        self.progress.setValue(int(1000 * done / max(total, 1)))
        self.progress.setFormat(f"{label}: %p%")

    # ---- generation settings ----
    def config(self) -> GenerationConfig:
        return GenerationConfig(
            max_tokens=self.max_tokens.value(),
            depth=self.chosen_depth(),
            sampling=SamplingConfig(temperature=self.temperature.value()),
        )

    def chosen_depth(self) -> Depth:
        return self.depth.currentData()

    def set_depth(self, depth: Depth) -> None:
        i = self.depth.findData(depth)
        self.depth.setCurrentIndex(max(i, 0))

    def apply(self, prefs: settings.Preferences) -> None:
        """Show saved preferences."""
        self.set_depth(prefs.depth)
        self.temperature.setValue(prefs.temperature)
        self.max_tokens.setValue(prefs.max_tokens)
        self.thinking.setChecked(prefs.thinking)
        self.system_prompt.setPlainText(prefs.system_prompt)

    def store(self, prefs: settings.Preferences) -> None:
        """Write what the panel shows into preferences (saved when the window closes)."""
        prefs.depth = self.chosen_depth()
        prefs.temperature = self.temperature.value()
        prefs.max_tokens = self.max_tokens.value()
        prefs.thinking = self.thinking.isChecked()
        prefs.system_prompt = self.system_prompt.toPlainText()
        prefs.recent_files = self.recent_files
        prefs.model_folders = self.model_folders

    def show_auto(self, status, measured_tps: float | None) -> None:
        """What Auto is doing (an AutoStatus), and the speedup measured so far where there is one."""
        measured = f", measured {measured_tps * status.plain_pass_s:.2f}x" if measured_tps else ""
        self.depth_note.setText(
            f"Auto is using depth {status.depth}: predicted {status.predicted_speedup:.2f}x{measured}. "
            f"{status.explanation}"
        )

    def system_text(self) -> str:
        return self.system_prompt.toPlainText().strip()

    def show_remote(self, remote: bool) -> None:
        """A remote engine's models are the server's: the pickers wait until this machine is chosen again."""
        for widget in (self.target, self.drafter, self.check_pair):  # this machine's choice, kept for coming back
            self._models_form.setRowVisible(widget, not remote)
        self.models_box.setTitle("Models (the server's; Engine → This machine to pick here)" if remote else "Models")
