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
