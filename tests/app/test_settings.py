"""Preferences: Auto saved by its name; what older versions saved still reads."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import QSettings

from app import settings
from engine import AUTO


@pytest.fixture
def private_settings(tmp_path):
    QSettings.setDefaultFormat(QSettings.Format.IniFormat)
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(tmp_path / "settings"))
    return QSettings(settings.ORGANIZATION, settings.APPLICATION)


@pytest.mark.parametrize("depth", [0, 4, AUTO])
def test_a_depth_reads_back_as_it_was_saved(private_settings, depth):
    settings.save(settings.Preferences(depth=depth))
    assert settings.load().depth == depth


@pytest.mark.parametrize(("stored", "read"), [("-1", AUTO), (-1, AUTO), ("99", AUTO), ("deep", AUTO)])
def test_older_and_damaged_depths(private_settings, stored, read):
    """-1 is how Auto was saved before it had a name; anything unreadable falls back to the default."""
    private_settings.setValue("generation/depth", stored)
    private_settings.sync()
    assert settings.load().depth == read


def test_the_engines_place_reads_back_and_a_damaged_one_is_this_machine(private_settings):
    settings.save(settings.Preferences(engine_place="remote", remote_url="http://127.0.0.1:9000", remote_token="t0k"))
    p = settings.load()
    assert (p.engine_place, p.remote_url, p.remote_token) == ("remote", "http://127.0.0.1:9000", "t0k")
    private_settings.setValue("engine/place", "the moon")
    private_settings.sync()
    assert settings.load().engine_place == "local"


@pytest.mark.parametrize(
    ("key", "stored", "field", "read"),
    [
        ("generation/temperature", "warm", "temperature", 0.0),
        ("generation/temperature", "nan", "temperature", 0.0),
        ("generation/max_tokens", "lots", "max_tokens", 512),
        ("conversations/last", "", "last_conversation", 0),
        ("input/send_key", "space", "send_key", "return"),
        ("appearance/theme", "sepia", "theme", "system"),
        ("appearance/text_size", "huge", "text_size", 0.0),
        ("window/geometry", "not a geometry", "geometry", None),
        ("window/side_splitter", 7, "side_splitter", None),
    ],
)
def test_damaged_values_read_as_the_defaults(private_settings, key, stored, field, read):
    private_settings.setValue(key, stored)
    private_settings.sync()
    assert getattr(settings.load(), field) == read


def test_the_send_key_and_the_theme_read_back(private_settings):
    settings.save(settings.Preferences(send_key="cmd-return", theme="dark", temperature=0.7, max_tokens=300))
    p = settings.load()
    assert (p.send_key, p.theme, p.temperature, p.max_tokens) == ("cmd-return", "dark", 0.7, 300)
