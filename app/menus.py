"""The menu bar: File, Edit, View, Tools, Engine, Window, Help, with the platform's standard keys.

Shortcuts are Qt's standard keys, so Ctrl on Linux and Windows is Cmd on a Mac. About and
Preferences carry their menu roles: macOS moves them into the application menu, where
Cmd-comma opens Preferences. The message and conversation actions are the ones
app/actions.py and app/conversations.py made: one QAction per shortcut, listed in menus (those whose keys work only in one widget, through
an entry that holds no key: see `_entry`).
"""

from __future__ import annotations

from importlib import metadata

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QApplication, QMenu, QMessageBox

from app import exports
from app.guide import GuideWindow
from app.ledgermenu import add_ledger_menu
from app.panes import PaneToggles

Key = QKeySequence.StandardKey
MIN_TEXT_SIZE, MAX_TEXT_SIZE = 8.0, 32.0  # points
ABOUT = (
    "<p><b>Draftlight</b> {version}</p>"
    "<p>Speculative decoding you can watch: a small drafter guesses tokens, the target checks them, "
    "and every token is coloured by where it came from.</p>"
)


def standard_keys(key: QKeySequence.StandardKey, fallback: str = "") -> list[QKeySequence]:
    """This platform's keys for a standard action; the fallback where the platform names none
    (Windows and the offscreen platform have no Preferences key; Ctrl+, is Cmd-comma on a Mac)."""
    keys = QKeySequence.keyBindings(key)
    return keys or ([QKeySequence(fallback)] if fallback else [])


def about_text() -> str:
    try:
        version = metadata.version("draftlight")
    except metadata.PackageNotFoundError:
        version = "(not installed)"
    return ABOUT.format(version=version)


class Menus:
    """The window's menu bar and the actions only it holds (the others are reused from their owners)."""

    def __init__(self, window) -> None:
        self.window = window
        self.about_box: QMessageBox | None = None
        bar = window.menuBar()
        before = window.engine_menu.menu.menuAction()  # the Engine menu (app/remote.py) stays its own

        def menu(title: str, ahead: bool = True) -> QMenu:
            m = QMenu(title, bar)
            bar.insertMenu(before, m) if ahead else bar.addMenu(m)
            return m

        file, edit, view, tools = menu("&File"), menu("&Edit"), menu("&View"), menu("&Tools")
        self.window_menu, help_menu = menu("&Window", ahead=False), menu("&Help", ahead=False)
        act = self._action

        self.new = act(file, "New conversation", standard_keys(Key.New), window.new_conversation)
        self.close = act(file, "Close window", standard_keys(Key.Close), self.close_window)
        self.close.setShortcutContext(Qt.ShortcutContext.ApplicationShortcut)  # tool windows too
        file.addSeparator()
        tools_c = window.conversation_tools
        file.addActions([tools_c.export_markdown, tools_c.export_replays])
        act(file, "Export token trace (JSONL)…", [], lambda: exports.export_trace_dialog(window))
        act(file, "Export charts (PNG)…", [], lambda: exports.export_charts_dialog(window))
        file.addSeparator()
        self.quit = act(file, "Quit", standard_keys(Key.Quit), window.close)
        self.quit.setMenuRole(QAction.MenuRole.QuitRole)

        e = window.edits
        edit.addActions([e.undo, e.redo])
        edit.addSeparator()
        edit.addActions([e.cut, e.copy, e.paste, e.select_all])
        edit.addSeparator()
        m = window.message_tools
        edit.addActions([m.copy, m.regenerate, m.edit, m.stop])
        self._entry(edit, m.delete)
        edit.addSeparator()
        edit.addActions([m.previous, m.next, m.step_through, m.export_replay])
        edit.addSeparator()
        edit.addAction(tools_c.find)
        self._entry(edit, tools_c.rename)
        self._entry(edit, tools_c.delete)
        edit.addSeparator()
        self.preferences = act(edit, "Preferences…", standard_keys(Key.Preferences, "Ctrl+,"), window.open_preferences)
        self.preferences.setMenuRole(QAction.MenuRole.PreferencesRole)
        self.preferences.setShortcutContext(Qt.ShortcutContext.ApplicationShortcut)

        self.raw = act(view, "Raw text (Markdown unrendered)", [], window.legend.raw.setChecked)
        self.raw.setCheckable(True)
        window.legend.raw.toggled.connect(self.raw.setChecked)  # the legend's button and the menu agree
        view.addSeparator()
        zoom_in = [*standard_keys(Key.ZoomIn), QKeySequence("Ctrl+=")]  # Ctrl+= : the + key without Shift
        self.bigger = act(view, "Bigger text", zoom_in, lambda: self.set_text_size(self.text_size() + 1))
        self.smaller = act(
            view, "Smaller text", standard_keys(Key.ZoomOut), lambda: self.set_text_size(self.text_size() - 1)
        )
        self.actual = act(view, "Actual size", [QKeySequence("Ctrl+0")], lambda: self.set_text_size(0))
        view.addSeparator()
        self.panes = PaneToggles(view, window)  # a small screen: the transcript takes their room
        if window.prefs.text_size:
            self.set_text_size(window.prefs.text_size)

        act(tools, "Teaching mode…", [], window.open_teaching)
        act(tools, "Prompt lab…", [], window.open_prompt_lab)
        act(tools, "Speedup calculator…", [], window.open_calculator)
        tools.addSeparator()
        # What Auto's depth rests on, timed afresh (after a change of machine, load or power setting).
        self.measure = act(tools, "Measure This Machine", [], lambda: window.measure_control.measure(again=True))
        self.ledger = add_ledger_menu(tools, window)

        self.minimize = act(self.window_menu, "Minimize", [QKeySequence("Ctrl+M")], self.minimize_window)
        self.minimize.setShortcutContext(Qt.ShortcutContext.ApplicationShortcut)
        self.zoom = act(self.window_menu, "Zoom", [], self.zoom_window)
        self.window_menu.addSeparator()
        self.windows = QActionGroup(self.window_menu)  # the open windows, the active one checked
        self.window_menu.aboutToShow.connect(self.list_windows)

        self.guide = act(help_menu, "Draftlight guide", standard_keys(Key.HelpContents, "F1"), self.show_guide)
        self.guide_window: GuideWindow | None = None
        self.shortcuts = act(help_menu, "Keyboard shortcuts", [], self.show_shortcuts)
        self.shortcuts_box: QMessageBox | None = None
        self.about = act(help_menu, "About Draftlight", [], self.show_about)
        self.about.setMenuRole(QAction.MenuRole.AboutRole)

    def _action(self, menu: QMenu, text: str, keys: list[QKeySequence], slot) -> QAction:
        action = QAction(text, self.window)
        action.setMenuRole(QAction.MenuRole.NoRole)  # macOS's guesses from the text are for the roles set here
        action.setShortcuts(keys)
        action.triggered.connect(lambda checked=False: slot(checked) if action.isCheckable() else slot())
        menu.addAction(action)
        self.window.addAction(action)  # its shortcut works with no menu bar to hold it
        return action

    def _entry(self, menu: QMenu, action: QAction) -> QAction:
        """A menu entry for an action whose keys work only while its widget has the focus (Delete in
        the transcript or the list, F2 in the list): macOS's menu bar would take those keys from every
        widget, so the entry triggers the action and names its key without holding it."""
        key = action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
        where = "the list" if action in self.window.conversation_actions else "the transcript"
        entry = QAction(f"{action.text()} ({key} in {where})" if key else action.text(), self.window)
        entry.setMenuRole(QAction.MenuRole.NoRole)
        entry.triggered.connect(action.trigger)
        menu.addAction(entry)
        return entry

    # ---- text size ----
    def text_size(self) -> float:
        return self.window.transcript.font().pointSizeF()

    def set_text_size(self, size: float) -> None:
        """The transcript's text in points (0: the system's size), drawn again at that size and
        remembered. It is kept as a zoom over the system's size, so it still follows the system's."""
        transcript = self.window.transcript
        base = transcript.base_size()
        size = min(max(size, MIN_TEXT_SIZE), MAX_TEXT_SIZE) if size else base
        transcript.set_zoom(size / base)  # every message again: headings and code scale from this size
        self.window.prefs.text_size = 0.0 if size == base else size

    # ---- windows ----
    def _active(self):
        """The window the user is in: a tool window, Preferences, or the main window."""
        active = QApplication.activeWindow()
        return active if active is not None and active.isWindow() else self.window

    def close_window(self) -> None:
        """Close the window in front; closing the main window quits, as closing it always did."""
        self._active().close()

    def minimize_window(self) -> None:
        self._active().showMinimized()

    def zoom_window(self) -> None:
        w = self._active()
        w.showNormal() if w.isMaximized() else w.showMaximized()

    def open_windows(self) -> list:
        """The main window, then each tool window made and shown."""
        w = self.window
        tools = (w.teaching, w.prompt_lab, w.calculator, w.preferences_window)
        return [w, *(t for t in tools if t is not None and t.isVisible())]

    def list_windows(self) -> None:
        for action in self.windows.actions():
            self.windows.removeAction(action)
            self.window_menu.removeAction(action)
            action.deleteLater()
        active = self._active()
        for shown in self.open_windows():
            action = QAction(shown.windowTitle() or "Draftlight", self.windows, checkable=True)
            action.setChecked(shown is active)
            action.triggered.connect(lambda _checked=False, s=shown: self.window._raise(s).activateWindow())
            self.window_menu.addAction(action)

    def shortcut_list(self) -> list[tuple[str, str]]:
        """Every action's keys, as the menus and the message box take them: (what, keys)."""
        w = self.window
        send = "Ctrl+Return" if w.prefs.send_key == "cmd-return" else "Return"
        rows = [("Send the message", send)]
        for action in [*w.actions(), *w.message_actions, *w.conversation_actions]:
            keys = ", ".join(k.toString(QKeySequence.SequenceFormat.NativeText) for k in action.shortcuts())
            what = action.text().replace("&", "").rstrip("…")
            if keys and (what, keys) not in rows:
                rows.append((what, keys))
        return rows

    def show_shortcuts(self) -> QMessageBox:
        """The keyboard shortcuts, one a line, window-modal without blocking."""
        text = "\n".join(f"{keys}\t{what}" for what, keys in self.shortcut_list())
        if self.shortcuts_box is None:
            self.shortcuts_box = QMessageBox(QMessageBox.Icon.NoIcon, "Keyboard shortcuts", "", parent=self.window)
            self.shortcuts_box.setTextFormat(Qt.TextFormat.PlainText)
        self.shortcuts_box.setText(text)
        self.shortcuts_box.open()
        return self.shortcuts_box

    def show_guide(self) -> GuideWindow:
        """The short guide, a window of its own (not modal): read beside the conversation."""
        if self.guide_window is None:
            self.guide_window = GuideWindow(self.window)
        self.guide_window.show()
        self.guide_window.raise_()
        return self.guide_window

    def show_about(self) -> QMessageBox:
        """The About box, window-modal without blocking."""
        if self.about_box is None:
            self.about_box = QMessageBox(QMessageBox.Icon.NoIcon, "About Draftlight", about_text(), parent=self.window)
            self.about_box.setTextFormat(Qt.TextFormat.RichText)
        self.about_box.open()
        return self.about_box
