"""One name per model on every surface: the title bar, the side panel's pickers, the status bar
and the pair doctor say the catalog's title (never the file's metadata name)."""

from __future__ import annotations

from engine import catalog


def test_the_pair_has_one_name_everywhere(qtbot, make_window):
    window = make_window()
    target, drafter = catalog.DEFAULT_TARGET.title, catalog.DEFAULT_DRAFTER.title
    assert window.pair.target_name == target and window.pair.drafter_name == drafter
    assert f"Draftlight — {target} + {drafter} — " in window.windowTitle()
    assert window.side.target.currentText().startswith(target)
    assert window.side.drafter.currentText().startswith(drafter)
    assert "GGUF" not in window.windowTitle() and "AWQ" not in window.windowTitle()  # metadata names
