"""Light or dark: following the system live, or the one the user chose in Preferences.

Qt 6.8 asks the platform for a colour scheme (macOS and Windows switch their native palette);
where the platform has none to give (X11 without a desktop theme, offscreen), a light or dark
palette of our own stands in. Either way the application's palette changes, every widget gets
a PaletteChange event, and the transcript and the charts draw themselves again in the new colours.
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette

from app import palette

THEMES = ("system", "light", "dark")
_SCHEMES = {"system": Qt.ColorScheme.Unknown, "light": Qt.ColorScheme.Light, "dark": Qt.ColorScheme.Dark}


def dark_palette() -> QPalette:
    """A dark palette for platforms that give none."""
    p = QPalette()
    role, group = QPalette.ColorRole, QPalette.ColorGroup
    colours = {
        role.Window: "#2b2b2b",
        role.WindowText: "#e6e6e6",
        role.Base: "#1f1f1f",
        role.AlternateBase: "#2b2b2b",
        role.ToolTipBase: "#3a3a3a",
        role.ToolTipText: "#f0f0f0",
        role.PlaceholderText: "#8c8c8c",
        role.Text: "#e6e6e6",
        role.Button: "#353535",
        role.ButtonText: "#e6e6e6",
        role.BrightText: "#ff6b6b",
        role.Link: "#8ab4f8",
        role.Highlight: "#2f65ca",
        role.HighlightedText: "#ffffff",
    }
    for r, colour in colours.items():
        p.setColor(r, QColor(colour))
    for r in (role.Text, role.WindowText, role.ButtonText):
        p.setColor(group.Disabled, r, QColor("#7a7a7a"))
    return p


def apply(name: str) -> bool:
    """Use the theme `name` ("system", "light" or "dark"); whether the app is dark now."""
    app = QGuiApplication.instance()
    if app is None:
        return False
    name = name if name in THEMES else "system"
    app.styleHints().setColorScheme(_SCHEMES[name])
    if name == "system":
        app.setPalette(QPalette())  # a palette with nothing set: the platform's own, live again
    elif palette.is_dark() != (name == "dark"):  # the platform gave no palette for the scheme
        app.setPalette(dark_palette() if name == "dark" else app.style().standardPalette())
    QCoreApplication.sendPostedEvents()  # the palette's change events, delivered now: the windows redraw
    return palette.is_dark()
