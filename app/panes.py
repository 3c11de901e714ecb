"""View → Side panel and View → Charts: either gives its room to the transcript (a small screen),
and comes back where it was. Both hidden, the right-hand column goes too."""

from __future__ import annotations

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu


class PaneToggles:
    def __init__(self, menu: QMenu, window) -> None:
        self.window = window
        column = window.side_splitter
        self.side = self._toggle(menu, "Side panel", column.widget(0))
        self.charts = self._toggle(menu, "Charts", column.widget(1))

    def _toggle(self, menu: QMenu, text: str, pane) -> QAction:
        action = menu.addAction(text)
        action.setCheckable(True)
        action.setChecked(True)
        action.toggled.connect(lambda shown: self._show(pane, shown))
        return action

    def _show(self, pane, shown: bool) -> None:
        pane.setVisible(shown)
        self.window.side_splitter.setVisible(self.side.isChecked() or self.charts.isChecked())
