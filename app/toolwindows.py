"""The windows the menus open (and the first-run dialog): each made on first use and kept."""

from __future__ import annotations

from app.calculator import SpeedupCalculator
from app.firstrun import FirstRunDialog
from app.lab import PromptLab
from app.preferences import PreferencesWindow
from app.teaching import TeachingWindow


class ToolWindows:
    """Part of MainWindow: its tool windows, raised when asked for again."""

    teaching: TeachingWindow | None = None
    prompt_lab: PromptLab | None = None
    calculator: SpeedupCalculator | None = None
    first_run_dialog: FirstRunDialog | None = None
    preferences_window: PreferencesWindow | None = None

    def offer_models(self, reason: str = "") -> FirstRunDialog:
        """The first-run dialog: download the default pair or choose files, then load them."""
        dialog = self.first_run_dialog
        if dialog is not None and dialog.isVisible():
            return dialog
        dialog = FirstRunDialog(reason, self)
        dialog.chosen.connect(self.load)
        dialog.open()  # window-modal, without blocking: the window keeps painting
        self.first_run_dialog = dialog
        return dialog

    @staticmethod
    def _raise(window):
        window.show()
        window.raise_()
        return window

    def open_teaching(self) -> TeachingWindow:
        """The teaching window: rounds step by step, replays, off and on side by side."""
        if self.teaching is None:
            self.teaching = TeachingWindow(self)
        return self._raise(self.teaching)

    def open_prompt_lab(self) -> PromptLab:
        """The prompt lab: a list of prompts through the loaded pair at several depths."""
        if self.prompt_lab is None:
            self.prompt_lab = PromptLab(self)
        return self._raise(self.prompt_lab)

    def open_calculator(self) -> SpeedupCalculator:
        """The speedup calculator, prefilled from this machine's profile and this session."""
        if self.calculator is None:
            self.calculator = SpeedupCalculator.for_window(self)
        return self._raise(self.calculator)

    def open_preferences(self) -> PreferencesWindow:
        """Preferences (Cmd-comma): generation defaults, model folders, the engine, the send key, appearance."""
        if self.preferences_window is None:
            self.preferences_window = PreferencesWindow(self)
        self.preferences_window.refresh()
        return self._raise(self.preferences_window)
