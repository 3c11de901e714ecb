"""The menu bar on the real window, with no model: one action per shortcut, and the standard keys
(New, Close, Find, Preferences, Minimize) doing what they say from the keyboard and the mouse."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QApplication, QMenu, QWidget

from app.menus import standard_keys

Key = QKeySequence.StandardKey


def press(qtbot, widget, keys: QKeySequence | list[QKeySequence]) -> None:
    """Type a shortcut's first chord at a widget, as the platform spells it (Ctrl here, Cmd on a Mac)."""
    chord = (keys[0] if isinstance(keys, list) else keys)[0]
    qtbot.keyClick(widget, chord.key(), chord.keyboardModifiers())


def every_action(window) -> set[QAction]:
    found = set(window.findChildren(QAction)) | set(window.actions())
    for widget in window.findChildren(QWidget):
        found |= set(widget.actions())
    for menu in window.menuBar().findChildren(QMenu):
        found |= set(menu.actions())
    return found


def menu_entry(window, title: str, text: str) -> tuple[QMenu, QAction]:
    menu = next(a.menu() for a in window.menuBar().actions() if a.text() == title)
    return menu, next(a for a in menu.actions() if a.text() == text)


def click_entry(qtbot, window, title: str, text: str) -> None:
    """The mouse: open the menu and click the entry."""
    menu, action = menu_entry(window, title, text)
    menu.popup(window.mapToGlobal(window.rect().center()))
    qtbot.waitExposed(menu)
    qtbot.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(action).center())
    qtbot.waitUntil(lambda: not menu.isVisible())


def test_no_two_actions_share_a_shortcut(window_at, tmp_path):
    window = window_at(tmp_path / "c.sqlite3")
    window.open_preferences()
    in_window: dict[str, str] = {}  # shortcut: the action holding it, anywhere in the window
    per_widget: dict[tuple[int, str], str] = {}  # (widget, shortcut): only while that widget has the focus
    for action in every_action(window):
        for keys in action.shortcuts():
            key = keys.toString()
            if action.shortcutContext() == Qt.ShortcutContext.WidgetShortcut:
                for widget in action.associatedObjects():
                    assert (id(widget), key) not in per_widget, (key, action.text())
                    per_widget[(id(widget), key)] = action.text()
            else:
                assert key not in in_window, (key, action.text(), in_window.get(key))
                in_window[key] = action.text()
    for (_widget, key), text in per_widget.items():
        assert key not in in_window, (key, text, in_window.get(key))  # a widget's key shadowing the window's
    for keys in (Key.New, Key.Close, Key.Find):
        assert standard_keys(keys)[0].toString() in in_window
    assert in_window["Ctrl+,"] == "Preferences…" and in_window["Ctrl+M"] == "Minimize"
    assert "Ctrl+Shift+T" in in_window and "Esc" in in_window  # the message actions, in their menus once


def test_the_menus_hold_the_message_and_conversation_actions_themselves(qtbot, window_at, tmp_path):
    window = window_at(tmp_path / "c.sqlite3")
    titles = [a.text() for a in window.menuBar().actions()]
    assert titles == ["&File", "&Edit", "&View", "&Tools", "&Engine", "&Window", "&Help"]
    edit = menu_entry(window, "&Edit", "Stop")[0]
    m, c = window.message_tools, window.conversation_tools
    assert set(window.message_actions) - {m.delete} <= set(edit.actions())
    assert c.find in edit.actions()
    # Keys that work only in one widget: an entry that names the key and triggers the action.
    for text, action in (
        ("Delete message (Del in the transcript)", m.delete),
        ("Rename conversation (F2 in the list)", c.rename),
        ("Delete conversation (Del in the list)", c.delete),
    ):
        entry = menu_entry(window, "&Edit", text)[1]
        assert entry.shortcuts() == []
        with qtbot.waitSignal(action.triggered, timeout=1000):
            entry.trigger()
    roles = {a.text(): a.menuRole() for m in window.menuBar().findChildren(QMenu) for a in m.actions()}
    assert roles["Preferences…"] == QAction.MenuRole.PreferencesRole
    assert roles["About Draftlight"] == QAction.MenuRole.AboutRole
    assert roles["Quit"] == QAction.MenuRole.QuitRole


def test_new_find_and_preferences_from_the_keyboard(qtbot, window_at, tmp_path):
    window = window_at(tmp_path / "c.sqlite3")
    before = len(window.store.conversations())
    window.input.setFocus()
    press(qtbot, window.input, standard_keys(Key.New))  # while typing, too
    assert len(window.store.conversations()) == before + 1
    assert window.conversations.items.currentItem().data(Qt.ItemDataRole.UserRole) == window.conversation_id
    press(qtbot, window, standard_keys(Key.Find))
    assert QApplication.focusWidget() is window.conversation_tools.search
    press(qtbot, window.input, window.menus.preferences.shortcut())
    assert window.preferences_window is not None and window.preferences_window.isVisible()
    assert not window.preferences_window.isModal()
    kept = window.preferences_window
    kept.close()
    press(qtbot, window, window.menus.preferences.shortcut())
    assert window.preferences_window is kept and kept.isVisible()  # made once, kept


def test_close_window_closes_the_one_in_front(qtbot, window_at, tmp_path):
    window = window_at(tmp_path / "c.sqlite3")
    calculator = window.open_calculator()
    calculator.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is calculator)
    press(qtbot, calculator, standard_keys(Key.Close))
    assert not calculator.isVisible() and window.isVisible()
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    press(qtbot, window, standard_keys(Key.Close))
    assert not window.isVisible()


def test_the_mouse_reaches_the_same_actions(qtbot, window_at, tmp_path):
    window = window_at(tmp_path / "c.sqlite3")
    before = len(window.store.conversations())
    click_entry(qtbot, window, "&File", "New conversation")
    assert len(window.store.conversations()) == before + 1
    click_entry(qtbot, window, "&Edit", "Preferences…")
    assert window.preferences_window.isVisible()
    click_entry(qtbot, window, "&Edit", "Find in conversations")
    assert QApplication.focusWidget() is window.conversation_tools.search
    click_entry(qtbot, window, "&View", "Raw text (Markdown unrendered)")
    assert window.legend.raw.isChecked() and window.transcript.raw
    qtbot.mouseClick(window.legend.raw, Qt.MouseButton.LeftButton)  # the legend's button: the menu follows
    assert not menu_entry(window, "&View", "Raw text (Markdown unrendered)")[1].isChecked()
    click_entry(qtbot, window, "&Help", "About Draftlight")
    box = window.menus.about_box
    assert box.isVisible() and "Draftlight" in box.text()
    box.close()


def test_the_window_menu_lists_the_open_windows_and_raises_one(qtbot, window_at, tmp_path):
    window = window_at(tmp_path / "c.sqlite3")
    window.open_teaching()
    prefs = window.open_preferences()
    menu = window.menus.window_menu
    menu.aboutToShow.emit()
    listed = [a.text() for a in window.menus.windows.actions()]
    assert listed == [window.windowTitle(), window.teaching.windowTitle(), "Preferences"]
    prefs.hide()
    next(a for a in window.menus.windows.actions() if a.text() == "Preferences").trigger()
    assert prefs.isVisible()
    menu.aboutToShow.emit()  # listed afresh, not twice
    assert len(window.menus.windows.actions()) == 3


def test_minimize_from_the_keyboard(qtbot, window_at, tmp_path):
    window = window_at(tmp_path / "c.sqlite3")
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    press(qtbot, window, QKeySequence("Ctrl+M"))
    qtbot.waitUntil(lambda: bool(window.windowState() & Qt.WindowState.WindowMinimized))


def test_text_size_from_the_keyboard_is_drawn_and_remembered(qtbot, window_at, tmp_path):
    window = window_at(tmp_path / "c.sqlite3")
    transcript = window.transcript
    base, text = transcript.font().pointSizeF(), transcript.toPlainText()
    press(qtbot, window, standard_keys(Key.ZoomIn))
    press(qtbot, window, QKeySequence("Ctrl+="))
    assert transcript.font().pointSizeF() == base + 2 and window.prefs.text_size == base + 2
    assert transcript.document().defaultFont().pointSizeF() == base + 2
    assert transcript.toPlainText() == text  # drawn again, all of it
    press(qtbot, window, standard_keys(Key.ZoomOut))
    assert transcript.font().pointSizeF() == base + 1
    press(qtbot, window, QKeySequence("Ctrl+0"))
    assert transcript.font().pointSizeF() == base and window.prefs.text_size == 0.0
    for _ in range(40):
        window.menus.smaller.trigger()
    assert transcript.font().pointSizeF() == 8.0


def test_a_remembered_text_size_is_the_one_a_window_opens_with(qtbot, tmp_path):
    from app import settings
    from app.window import MainWindow

    prefs = settings.Preferences(target=str(tmp_path / "missing.gguf"), drafter="none", text_size=15.0)
    window = MainWindow(store_path=tmp_path / "c.sqlite3", prefs=prefs)
    qtbot.addWidget(window)
    try:
        assert window.transcript.font().pointSizeF() == 15.0
    finally:
        window.close()
