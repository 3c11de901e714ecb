"""The window fits a 1440x900 laptop screen: its first size, its minimum, and every chart inside it."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect

from app.window import default_size


def test_the_first_size_leaves_room_for_the_title_bar():
    assert default_size(1440, 875) == (1400, 835)  # a Mac: 25 px of menu bar
    assert default_size(1920, 1050) == (1400, 860)
    assert default_size(1280, 760) == (1280, 720)


def test_everything_shows_on_a_laptop_screen(qtbot, make_window):
    window = make_window()
    hint = window.minimumSizeHint()
    assert hint.width() <= 1400 and hint.height() <= 835
    window.resize(*default_size(1440, 875))
    qtbot.waitUntil(lambda: window.size().width() == 1400 and window.size().height() == 835)
    inside = QRect(QPoint(0, 0), window.size())
    for plot in (
        window.charts.tps_plot, window.charts.accept_plot, window.charts.length_plot,
        window.charts.split_plot, window.charts.thermal_plot,
    ):  # fmt: skip
        corner = plot.mapTo(window, QPoint(0, 0))
        assert inside.contains(QRect(corner, plot.size())), plot
        assert plot.width() >= 180 and plot.height() >= 100
