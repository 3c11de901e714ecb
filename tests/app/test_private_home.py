"""The suite never touches the user's files: settings, conversations and profiles land in a
temporary home, the user's models stay reachable, and a changed user file is caught."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QSettings

from app import settings
from app.storeopen import default_store_path
from engine.models import catalog
from tests.conftest import SHARED_CACHE, snapshot


def test_settings_conversations_and_profiles_live_in_the_private_home(qapp, private_home):
    assert Path.home() == private_home
    paths = {
        "settings": Path(QSettings(settings.ORGANIZATION, settings.APPLICATION).fileName()),
        "conversations": default_store_path(),
        "profiles": catalog.cache_dir() / "profiles",
    }
    outside = {name: str(path) for name, path in paths.items() if not path.is_relative_to(private_home)}
    assert outside == {}


def test_the_users_models_stay_reachable(private_home):
    models = catalog.models_dir()
    assert models == private_home / ".cache" / "draftlight" / "models"
    if models.is_symlink():  # the user has models: the suite reads them where they are
        real = models.resolve()
        assert real.name == "models" and not real.is_relative_to(private_home.resolve())


def test_a_changed_user_file_is_caught(tmp_path):
    config, cache = tmp_path / ".config" / "Draftlight", tmp_path / ".cache" / "draftlight"
    (cache / SHARED_CACHE[0]).mkdir(parents=True)
    config.mkdir(parents=True)
    (config / "Draftlight.conf").write_text("[appearance]\ntheme=system\n")
    before = snapshot([config, cache], cache)
    (cache / SHARED_CACHE[0] / "model.gguf").write_bytes(b"GGUF")  # the shared models: not the user's own
    assert snapshot([config, cache], cache) == before
    (config / "Draftlight.conf").write_text("[appearance]\ntheme=dark\n")  # what a settings test once did
    (cache / "profiles").mkdir()
    (cache / "profiles" / "box.json").write_text("{}")
    after = snapshot([config, cache], cache)
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    assert changed == [str(cache / "profiles" / "box.json"), str(config / "Draftlight.conf")]
    assert os.environ["DRAFTLIGHT_TEST_HOME"] == str(Path.home())
