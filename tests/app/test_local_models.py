"""The pickers offer the models already on this machine, and a folder the user adds is searched from then on."""

from __future__ import annotations

from engine import local_models
from tests.engine.models.test_local import ollama, tiny_gguf


def items(combo) -> list[tuple[str, str]]:
    return [(combo.itemText(i), combo.itemData(i)) for i in range(combo.count())]


def test_the_pickers_list_local_models_and_remember_a_folder(qtbot, make_window, monkeypatch, tmp_path):
    from PySide6.QtWidgets import QFileDialog

    from app import settings

    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    for var in ("OLLAMA_MODELS", "HF_HOME", "HF_HUB_CACHE", "LLAMA_CACHE"):
        monkeypatch.delenv(var, raising=False)
    lms = tiny_gguf(home / ".lmstudio/models/org/Model-GGUF/Model-Q4_K_M.gguf", "m")
    blob = ollama(home / ".ollama/models", "library", "qwen2.5-coder", "1.5b", "e" * 64)
    window = make_window()
    for combo in (window.side.target, window.side.drafter):
        listed = items(combo)
        assert (
            f"org/Model-GGUF/Model-Q4_K_M.gguf Q4_K_M, {lms.stat().st_size / 1e9:.2f} GB (LM Studio)",
            str(lms),
        ) in listed
        assert any(data == str(blob) and text.startswith("qwen2.5-coder:1.5b Q4_K_M") for text, data in listed)
        assert [text for text, _ in listed[-2:]] == ["Add a folder of models…", "Choose a GGUF file…"]

    mine = tmp_path / "my models"
    extra = tiny_gguf(mine / "Extra-Q8_0.gguf", "extra", 7)
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *a, **k: str(mine))  # the user's choice
    picker = window.side.drafter
    picker.setCurrentIndex(picker.findData("__folder__"))
    picker.activated.emit(picker.currentIndex())
    assert picker.findData(str(extra.resolve())) >= 0 and window.side.target.findData(str(extra.resolve())) >= 0
    assert picker.currentData() == window.pair.drafter  # the picker points at what is loaded again
    prefs = settings.Preferences()
    window.side.store(prefs)
    assert prefs.model_folders == [str(mine)]
    assert [m.path for m in local_models(prefs.model_folders) if m.source == str(mine)] == [extra.resolve()]
