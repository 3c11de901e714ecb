"""The thermal chart's feed outlives no window: a sampler whose window Qt deleted stops sampling."""

from __future__ import annotations

import logging

import shiboken6
from PySide6.QtCore import QObject, Signal

from app.remote import ThermalSource
from engine.measure.thermal import ThermalReading, ThermalState


class _Chart(QObject):
    reading = Signal(object)


def test_a_feed_whose_window_is_deleted_stops_its_sampler_and_logs_nothing(qtbot, caplog):
    chart, got, cleared = _Chart(), [], []
    chart.reading.connect(got.append)
    feed = ThermalSource(chart.reading.emit, lambda: cleared.append(True))
    feed.use(lambda: ThermalReading(ThermalState.NOMINAL, "remote box"))  # a reader: no local sensors needed
    sampler = feed.sampler
    qtbot.waitUntil(lambda: len(got) >= 1, timeout=10_000)
    assert got[0].state is ThermalState.NOMINAL and cleared == [True]

    with caplog.at_level(logging.ERROR):
        shiboken6.delete(chart)  # as Qt deletes a closed window's objects
        sampler.sample_once()  # the next reading finds the signal's source gone
    assert feed.sampler is None and not sampler.running
    assert not [r for r in caplog.records if "thermal subscriber raised" in r.getMessage()]
    assert sampler._subscribers == []
