"""The window fits a 1440x900 laptop screen: its first size, its minimum, and every chart inside it."""

from __future__ import annotations

import pytest
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


def inside(outer, widget) -> bool:
    """Whether `widget` lies whole within `outer` (both shown), in `outer`'s coordinates."""
    corner = widget.mapTo(outer, QPoint(0, 0))
    return QRect(QPoint(0, 0), outer.size()).contains(QRect(corner, widget.size()))


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("size", [(1024, 700), (1280, 800), (1440, 900), (1920, 1080)])
def test_nothing_is_cut_at_common_screen_sizes(qtbot, window_at, tmp_path, size, theme):
    from app import theme as themes

    themes.apply(theme)
    window = window_at(tmp_path / "c.sqlite3")
    hint = window.minimumSizeHint()
    assert hint.width() <= 1024 and hint.height() <= 700
    window.resize(*size)
    qtbot.waitUntil(lambda: window.size().toTuple() == size)
    for widget in (window.transcript, window.input, window.send_button, window.stop_button, window.legend):
        assert widget.isVisible() and inside(window, widget), widget
    for swatch in window.legend.swatches.values():  # every kind's label whole
        assert inside(window.legend, swatch) and swatch.width() >= swatch.sizeHint().width(), swatch.text()
    assert inside(window.legend, window.legend.raw)
    side = window.side_splitter.widget(0)
    assert side.width() >= window.side.minimumSizeHint().width()  # the side panel is never squeezed
    charts = window.side_splitter.widget(1)
    window.charts.refresh()
    qtbot.wait(10)
    assert not charts.horizontalScrollBar().isVisible()  # a column of charts scrolls down, never sideways
    assert window.charts.columns == (1 if size[0] < 1280 else 2)
    for plot in window.charts.plots():  # the thermal chart, where this machine has no sensor, is a line
        name = window.charts.titles[plot]
        assert plot.width() >= plot.minimumWidth() and plot.height() >= plot.minimumHeight(), name
        item = plot.getPlotItem()  # its title, axes and legend squares drawn whole inside the chart
        assert item.sceneBoundingRect().right() <= plot.width(), name
        assert item.titleLabel.item.boundingRect().width() <= plot.width() - item.getAxis("left").width(), name
        assert inside(window.charts, plot), name
        if size[1] >= 900:  # room for every chart: none scrolled out of view
            assert inside(charts.viewport(), plot), name
    for line in (window.charts.showing, window.charts.thermal_note, window.charts.what_if):
        assert line.width() <= charts.viewport().width()


def test_the_side_panel_and_the_charts_give_their_room_away(qtbot, window_at, tmp_path):
    window = window_at(tmp_path / "c.sqlite3")
    window.resize(1024, 700)
    qtbot.waitUntil(lambda: window.size().toTuple() == (1024, 700))
    charts_area, wide = window.side_splitter.widget(1), window.transcript.width()
    window.menus.panes.side.trigger()  # View → Side panel, unchecked
    qtbot.waitUntil(lambda: charts_area.height() > 600)
    assert not window.side_splitter.widget(0).isVisible() and inside(window, charts_area)
    window.menus.panes.charts.trigger()
    qtbot.waitUntil(lambda: window.transcript.width() > wide + 300)
    assert not window.side_splitter.isVisible()
    window.menus.panes.side.trigger()
    qtbot.waitUntil(lambda: window.side_splitter.isVisible())
    assert window.side_splitter.widget(0).isVisible() and not charts_area.isVisible()


def test_a_long_conversation_title_ends_in_an_ellipsis_with_its_whole_in_the_tooltip(qtbot):
    from collections import namedtuple

    from PySide6.QtCore import Qt

    from app.widgets import ConversationList

    column = ConversationList()
    qtbot.addWidget(column)
    column.resize(127, 300)  # the column's width in a 1024-pixel window
    column.show()
    title = "Give a markdown table of the best, average and worst time complexity of bubble sort"
    column.fill([namedtuple("Conversation", "id title")(7, title)], 7)
    items = column.items
    qtbot.wait(50)
    assert items.horizontalScrollBar().maximum() == 0 and not items.horizontalScrollBar().isVisible()
    assert items.textElideMode() == Qt.TextElideMode.ElideRight and items.item(0).toolTip() == title
