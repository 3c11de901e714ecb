"""The pairing panel: the side panel's button, the user's recent prompts, the report and the probe."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextDocument

from app.pairing import PairingPanel, named_prompts
from app.store import StoredMessage
from app.storeopen import open_store

CHECK_TIMEOUT_MS = 120_000
PROBE_TIMEOUT_MS = 600_000


def test_recent_prompts_are_the_users_newest_each_once(tmp_path):
    store, _ = open_store(tmp_path / "c.sqlite3")
    first, second = store.new_conversation(), store.new_conversation()
    for conversation, role, text in [
        (first, "user", "Write a haiku."),
        (first, "assistant", "Rain on the roof."),
        (second, "user", "  Sort a list in C.  "),
        (first, "user", "Write a haiku."),
        (second, "error", "It failed."),
        (second, "user", "Explain recursion."),
    ]:
        store.add_message(conversation, StoredMessage(role, text))
    assert store.recent_prompts() == ["Explain recursion.", "Write a haiku.", "Sort a list in C."]
    assert store.recent_prompts(2) == ["Explain recursion.", "Write a haiku."]
    store.close()


def test_a_long_prompt_is_named_by_its_first_words():
    long = "Write a long\nstory about a lighthouse keeper, the sea, the storms and the ships that passed."
    assert named_prompts(["Short one.", long]) == (
        ("Short one.", "Short one."),
        ("Write a long story about a lighthouse keeper, the sea, the…", long),
    )


def test_the_side_panels_button_asks_for_the_picked_pair(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # no models found on this machine: the catalog entries only
    from app.sidepanel import SidePanel

    side = SidePanel([], [])
    qtbot.addWidget(side)
    side.show_loaded("default", "default")
    side.drafter.setCurrentIndex(side.drafter.findData("ngram"))  # picked, not loaded yet
    with qtbot.waitSignal(side.check_pair_requested, timeout=5000) as blocker:
        side.check_pair.click()
    assert blocker.args == ["default", "ngram"]


def _panel(qtbot, target, drafter, prompts) -> PairingPanel:
    panel = PairingPanel(str(target), str(drafter), prompts)
    qtbot.addWidget(panel)
    panel.show()
    qtbot.waitUntil(lambda: panel.report is not None, timeout=CHECK_TIMEOUT_MS)
    return panel


def test_the_panel_shows_every_rule_and_the_probes_result(qtbot, target_path, drafter_path, monkeypatch, tmp_path):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path / "cache"))
    panel = _panel(qtbot, target_path, drafter_path, ["Write a bubble sort in C++."])
    rules = panel.rules.text()
    assert rules.count("✓") == 4 and "✗" not in rules
    for name in ("vocabulary type", "special tokens", "vocabulary size", "token texts"):
        assert f"<b>{name}</b>" in rules
    assert (
        panel.heading.text()
        == "Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) + Qwen2.5-Coder-0.5B-Instruct (Q4_K_M) on llama.cpp"
    )
    assert "About 1.70 GB" in panel.memory.text()
    assert panel.suggestion.text() == "None: no catalog pair is better for this target."
    assert panel.start_button.isEnabled() and not panel.cancel_button.isEnabled()

    panel.probe_tokens, panel.probe_seconds = 8, 600  # a budget no loaded box runs past: the whole reply
    with qtbot.waitSignal(panel.report_shown, timeout=PROBE_TIMEOUT_MS) as blocker:
        assert panel.start_probe()
        assert panel.cancel_button.isEnabled() and not panel.start_button.isEnabled()
    probe = blocker.args[0].probe
    assert probe is not None and len(probe.prompts) == 1 and probe.source == "your recent prompts"
    found = probe.prompts[0]
    assert panel.table.rowCount() == 1
    assert [panel.table.item(0, c).text() for c in range(4)] == [
        "Write a bubble sort in C++.",
        f"{found.acceptance:.0%}",
        f"{found.accepted} of {found.drafted}",
        "8",
    ]
    assert panel.probe_summary.text().startswith(f"Acceptance {probe.acceptance:.0%} overall")
    assert "on 1 of your recent prompts" in panel.probe_summary.text()
    assert not panel.probing and panel.start_button.isEnabled()

    with qtbot.waitSignal(panel.report_shown, timeout=PROBE_TIMEOUT_MS) as blocker:
        assert panel.start_probe()
        panel.cancel()  # checked once the pair has loaded, and between rounds
    assert blocker.args[0].probe.note == "Cancelled after 0 of 1 prompts."
    assert panel.table.rowCount() == 0
    assert panel.probe_summary.text() == "Cancelled after 0 of 1 prompts."
    panel.close()


def test_an_incompatible_pair_shows_its_failing_rules_and_cannot_probe(qtbot, target_path, smollm_path):
    panel = _panel(qtbot, target_path, smollm_path, [])
    assert panel.rules.text().count("✗") == 2
    assert "The drafter cannot draft for this target: 2 rule(s) fail." in panel.verdict.text()
    assert "`draftlight pair qwen2.5-coder-1.5b qwen2.5-coder-0.5b`" in panel.suggestion.text()
    assert not panel.start_button.isEnabled()
    assert not panel.start_probe()
    assert panel.probe_summary.text() == "The probe needs a drafter that can draft for this target."
    panel.close()


def test_a_file_that_is_not_a_model_is_said_in_the_panel(qtbot, tmp_path):
    notes = tmp_path / "notes.gguf"
    notes.write_text("Hello, these are notes.")
    panel = PairingPanel(str(notes), "none", [])
    qtbot.addWidget(panel)
    qtbot.waitUntil(lambda: "could not be checked" in panel.heading.text(), timeout=CHECK_TIMEOUT_MS)
    assert "notes.gguf is not a GGUF model file" in panel.verdict.text()
    shown = QTextDocument()  # what the label shows: its quotes as themselves, not as HTML entities
    shown.setHtml(panel.verdict.text())
    assert panel.verdict.textFormat() == Qt.TextFormat.RichText
    assert "(it starts with 'Hell', not 'GGUF')" in shown.toPlainText()
    assert not panel.start_button.isEnabled()
    panel.close()


def test_the_window_opens_the_panel_on_its_users_prompts_and_closing_it_stops_the_panel(qtbot, tmp_path):
    from PySide6.QtWidgets import QWidget

    notes = tmp_path / "notes.gguf"
    notes.write_text("Hello, these are notes.")
    window = QWidget()  # what open_for needs of the main window: a widget with the chat store
    qtbot.addWidget(window)
    window.store, _ = open_store(tmp_path / "c.sqlite3")
    conversation = window.store.new_conversation()
    window.store.add_message(conversation, StoredMessage("user", "Write a haiku about rain."))
    window.show()
    panel = PairingPanel.open_for(window, str(notes), "none")
    assert panel.parent() is window and panel.isVisible()
    assert panel.prompts == (("Write a haiku about rain.", "Write a haiku about rain."),)
    assert panel.probe_note.text().startswith("Greedy replies at depth 3 on your most recent prompt, for about 20")
    qtbot.waitUntil(lambda: "could not be checked" in panel.heading.text(), timeout=CHECK_TIMEOUT_MS)
    window.close()
    assert not panel.isVisible() and not panel.thread.isRunning()
    window.store.close()
