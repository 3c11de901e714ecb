"""Charts whose pyqtgraph menus are deleted with them, on the main thread.

pyqtgraph makes a chart's two context menus with no parent. Left so, Python's collector deletes them,
with their actions and controls, on whatever thread it happens to run, an engine thread included,
long after the window closed: Qt then crashes on a timer of a freed widget, or deadlocks deleting an
action while the engine thread emits. Our charts show no context menu, so the view box's menu is
deleted at once and the plot's menu (its controls back the plot's settings) is handed to the chart.
"""

from __future__ import annotations

import pyqtgraph as pg
import shiboken6


def plot_widget(**options) -> pg.PlotWidget:
    """A PlotWidget with no context menu, owning everything pyqtgraph made for it."""
    plot = pg.PlotWidget(**options)
    item = plot.getPlotItem()
    item.ctrlMenu.setParent(plot, item.ctrlMenu.windowFlags())
    view_menu = item.getViewBox().menu
    plot.setMenuEnabled(False)  # drops the view box's menu
    if view_menu is not None:
        shiboken6.delete(view_menu)
    return plot
