"""Which Qt plugins the app ships: a window, a style, and input on each desktop.

The app draws with QtWidgets and pyqtgraph. PNG support is compiled into QtGui, so no
image format plugin is needed; the icon is the bundle's .icns, read by the OS. Everything
else PyInstaller's Qt hooks would collect (PDF, SVG and JPEG readers, the virtual
keyboard, TLS, EGL device integrations) is left out, and with it the Qt libraries only
those plugins link to.
"""

from __future__ import annotations

from pathlib import Path

# plugin type -> file name stems kept; None keeps every plugin of the type.
KEEP: dict[str, set[str] | None] = {
    # cocoa: macOS; xcb and wayland: Linux desktops; windows; offscreen: the headless self-test.
    "platforms": {"qcocoa", "qxcb", "qwayland", "qwindows", "qoffscreen", "qminimal"},
    "platforms/darwin": None,  # macOS: whatever a Qt build keeps beside the cocoa plugin
    "styles": None,  # the native look: qmacstyle, qmodernwindowsstyle
    # Linux: the desktop portal's file dialogs. Not qgtk3: it would drag a copy of the build
    # machine's GTK stack into the bundle.
    "platformthemes": {"qxdgdesktopportal"},
    "platforminputcontexts": {"composeplatforminputcontextplugin", "ibusplatforminputcontextplugin"},
    "xcbglintegrations": None,
    "wayland-shell-integration": None,
    "wayland-decoration-client": None,
    "wayland-graphics-integration-client": None,
}


def _stem(name: str) -> str:
    stem = name.split(".")[0]
    return stem[3:] if stem.startswith("lib") else stem


def wanted(dest: str, src: str) -> bool:
    """Whether a collected file (its destination folder and source path) stays in the bundle."""
    parts = Path(dest).parts
    if parts[:1] != ("PySide6",) or "plugins" not in parts:  # PySide6/Qt/plugins; on Windows PySide6/plugins
        return True
    kind = "/".join(parts[parts.index("plugins") + 1 :])
    if kind not in KEEP:
        return False
    names = KEEP[kind]
    return names is None or _stem(Path(src).name) in names


def only_wanted(binaries: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """A hook's (source, destination folder) pairs without the plugins the app does not use."""
    return [(src, dest) for src, dest in binaries if wanted(dest, src)]
