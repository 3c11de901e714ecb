"""The Preferences window on the real window, with no model: every setting round-trips through the
window and QSettings; it and the side panel show one value; the send key works in the message box."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import QDialogButtonBox

from app import settings
from app.actions import EDITING
from app.store import StoredMessage
from app.widgets import SEND_CHORD
from app.window import MainWindow

CTRL = Qt.KeyboardModifier.ControlModifier  # Cmd on a Mac
SHIFT = Qt.KeyboardModifier.ShiftModifier


@pytest.fixture
def private_settings(tmp_path):
    QSettings.setDefaultFormat(QSettings.Format.IniFormat)
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(tmp_path / "settings"))
    return QSettings(settings.ORGANIZATION, settings.APPLICATION)


def choose(combo, value: str) -> None:
    combo.setCurrentIndex(combo.findData(value))


def shown(dialog) -> dict:
    """What the Preferences window's controls show."""
    return {
        "temperature": dialog.temperature.value(),
        "max_tokens": dialog.max_tokens.value(),
        "thinking": dialog.thinking.isChecked(),
        "system_prompt": dialog.system_prompt.toPlainText(),
        "model_folders": [dialog.folders.item(i).text() for i in range(dialog.folders.count())],
        "engine_place": "remote" if dialog.remote.isChecked() else "local",
        "remote_url": dialog.remote_url.text(),
        "remote_token": dialog.remote_token.text(),
        "send_key": dialog.send_key.currentData(),
        "theme": dialog.theme.currentData(),
    }


CHOSEN = {
    "temperature": 0.7,
    "max_tokens": 300,
    "thinking": True,
    "system_prompt": "Answer in one line.",
    "engine_place": "remote",
    "remote_url": "http://127.0.0.1:9",  # nothing listens there: the attach fails, the choice is kept
    "remote_token": "t0k",
    "send_key": "cmd-return",
    "theme": "dark",
}


def test_the_preferences_window_round_trips_every_setting(qtbot, window_at, tmp_path, private_settings):
    window = window_at(tmp_path / "c.sqlite3")
    dialog = window.open_preferences()
    folder = tmp_path / "models"
    folder.mkdir()
    dialog.temperature.setValue(CHOSEN["temperature"])
    dialog.max_tokens.setValue(CHOSEN["max_tokens"])
    dialog.thinking.setChecked(True)
    dialog.system_prompt.setPlainText(CHOSEN["system_prompt"])
    dialog.add_folder(str(folder))
    dialog.remote.setChecked(True)
    dialog.remote_url.setText(CHOSEN["remote_url"])
    dialog.remote_token.setText(CHOSEN["remote_token"])
    choose(dialog.send_key, "cmd-return")
    with qtbot.waitSignal(dialog.theme_changed, timeout=1000) as theme:
        choose(dialog.theme, "dark")
    assert theme.args == ["dark"]
    # The side panel shows the same values, as they change.
    side = window.side
    assert (side.temperature.value(), side.max_tokens.value(), side.thinking.isChecked()) == (0.7, 300, True)
    assert side.system_prompt.toPlainText() == "Answer in one line." and side.model_folders == [str(folder)]
    qtbot.mouseClick(dialog.findChild(QDialogButtonBox).buttons()[0], Qt.MouseButton.LeftButton)  # Close
    assert not dialog.isVisible()
    expected = {**CHOSEN, "model_folders": [str(folder)]}
    assert shown(dialog) == expected
    assert {k: getattr(window.prefs, k) for k in expected} == expected
    assert window.input.send_key == "cmd-return"
    settings.save(window.prefs)
    loaded = settings.load()
    assert {k: getattr(loaded, k) for k in expected} == expected
    # A window opened on what was saved shows it in its Preferences.
    again = MainWindow(store_path=tmp_path / "c2.sqlite3", prefs=loaded)
    qtbot.addWidget(again)
    again.show()
    try:
        assert shown(again.open_preferences()) == expected
        assert again.side.temperature.value() == 0.7 and again.input.send_key == "cmd-return"
    finally:
        again.close()


def test_the_side_panel_and_preferences_show_one_value(qtbot, window_at, tmp_path):
    window = window_at(tmp_path / "c.sqlite3")
    dialog = window.open_preferences()
    window.side.temperature.setValue(1.3)
    window.side.max_tokens.setValue(64)
    window.side.thinking.setChecked(True)
    window.side.system_prompt.setPlainText("Be terse.")
    assert (dialog.temperature.value(), dialog.max_tokens.value(), dialog.thinking.isChecked()) == (1.3, 64, True)
    assert dialog.system_prompt.toPlainText() == "Be terse."
    assert dialog.temperature.specialValueText() == "0 (greedy)" and dialog.max_tokens.maximum() == 8192
    window.side.add_folder(str(tmp_path))  # the side panel's "Add a folder of models…"
    assert shown(dialog)["model_folders"] == [str(tmp_path)]
    dialog.folders.setCurrentRow(0)
    qtbot.mouseClick(dialog.remove_folder_button, Qt.MouseButton.LeftButton)
    assert window.side.model_folders == [] and dialog.folders.count() == 0


def test_esc_leaves_the_engine_as_it_was(qtbot, window_at, tmp_path):
    window = window_at(tmp_path / "c.sqlite3")
    dialog = window.open_preferences()
    dialog.remote.setChecked(True)
    dialog.remote_url.setText("http://10.0.0.1:8765")
    qtbot.keyClick(dialog, Qt.Key.Key_Escape)
    assert not dialog.isVisible()
    assert (window.prefs.engine_place, window.prefs.remote_url) == ("local", "http://127.0.0.1:8765")
    assert not window.attaching
    window.open_preferences()
    assert shown(dialog)["engine_place"] == "local" and dialog.remote_url.text() == "http://127.0.0.1:8765"
    assert not dialog.remote_url.isEnabled()


@pytest.mark.parametrize("send_key", ["return", "cmd-return"])
def test_the_send_key(qtbot, window_at, tmp_path, send_key):
    window = window_at(tmp_path / "c.sqlite3")
    choose(window.open_preferences().send_key, send_key)
    box = window.input
    sends, new_line = ((Qt.Key.Key_Return, CTRL), (Qt.Key.Key_Return, SHIFT))
    if send_key == "cmd-return":
        new_line = (Qt.Key.Key_Return, Qt.KeyboardModifier.NoModifier)
    box.setPlainText("one")
    box.moveCursor(box.textCursor().MoveOperation.End)
    with qtbot.assertNotEmitted(box.submitted):
        qtbot.keyClick(box, *new_line)
    assert box.toPlainText() == "one\n"
    with qtbot.waitSignal(box.submitted, timeout=1000):
        qtbot.keyClick(box, *sends)
    if send_key == "return":
        with qtbot.waitSignal(box.submitted, timeout=1000):
            qtbot.keyClick(box, Qt.Key.Key_Return)
    else:
        qtbot.keyClick(box, Qt.Key.Key_Enter, Qt.KeyboardModifier.KeypadModifier)  # the keypad's Enter too
        assert box.toPlainText() == "one\n\n"
    assert ("Shift+Return" in box.placeholderText()) == (send_key == "return")
    # Editing a message says which keys resend it.
    window.store.add_message(window.conversation_id, StoredMessage("user", "Name a fruit."))
    window.message_tools.edit_message()
    assert window.notice.text() == EDITING.format(key="Return" if send_key == "return" else SEND_CHORD)


def test_the_side_splitter_is_remembered(qtbot, tmp_path):
    prefs = settings.Preferences(target=str(tmp_path / "missing.gguf"), drafter="none")
    first = MainWindow(store_path=tmp_path / "c.sqlite3", prefs=prefs)
    qtbot.addWidget(first)
    first.show()
    qtbot.waitExposed(first)
    side, charts = first.side_splitter.sizes()
    first.side_splitter.setSizes([side + 30, charts - 30])  # both are near their least heights
    sizes = first.side_splitter.sizes()
    assert sizes == [side + 30, charts - 30]
    first.close()
    assert prefs.side_splitter is not None
    prefs.geometry = None  # the offscreen platform gives a restored window another size: keep the first one's
    second = MainWindow(store_path=tmp_path / "c.sqlite3", prefs=prefs)
    qtbot.addWidget(second)
    second.show()
    qtbot.waitExposed(second)
    try:
        assert second.side_splitter.sizes() == sizes
    finally:
        second.close()
