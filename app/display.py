"""Before Qt starts on Linux: is there a display, and can Qt's X11 platform load?

Qt aborts the process with a message about its "xcb" plugin when one of the plugin's system
libraries is missing (on a fresh Debian or Ubuntu: libxcb-cursor0, libxcb-icccm4,
libxcb-keysyms1). We ask the dynamic linker first (`ldd` on the plugin) and name the packages.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

NOT_FOUND = re.compile(r"^\s*(\S+) => not found", re.MULTILINE)

# A library's Debian/Ubuntu package where the usual naming (libfoo.so.N -> libfooN) does not give it.
PACKAGES = {
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libxcb-util.so.1": "libxcb-util1",
    "libEGL.so.1": "libegl1",
    "libGL.so.1": "libgl1",
    "libOpenGL.so.0": "libopengl0",
    "libdbus-1.so.3": "libdbus-1-3",
    "libX11-xcb.so.1": "libx11-xcb1",
}


def debian_package(library: str) -> str:
    """The Debian/Ubuntu package that ships a shared library, by Debian's naming policy."""
    if library in PACKAGES:
        return PACKAGES[library]
    name, _, version = library.partition(".so.")
    version = version.split(".")[0]
    return f"{name}-{version}" if name[-1:].isdigit() else f"{name}{version}"


def missing_libraries(ldd_output: str) -> list[str]:
    """The libraries `ldd` could not find, in order, once each."""
    return list(dict.fromkeys(NOT_FOUND.findall(ldd_output)))


def xcb_plugin() -> Path | None:
    try:
        import PySide6
    except ImportError:
        return None
    plugin = Path(PySide6.__file__).parent / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    return plugin if plugin.exists() else None


def display_problem(env: dict[str, str] | None = None, ldd: str | None = None) -> str:
    """Why Qt could not open a window here, in words with the fix; "" where nothing stands in the way."""
    env = dict(os.environ) if env is None else env
    if not sys.platform.startswith("linux") or env.get("QT_QPA_PLATFORM", "xcb") not in ("xcb", ""):
        return ""
    if env.get("WAYLAND_DISPLAY"):
        return ""  # Qt's Wayland platform, not X11's
    if not env.get("DISPLAY"):
        return (
            "No display to open Draftlight's window on (DISPLAY is not set). On a machine without a "
            "screen, run it under a virtual one: `xvfb-run make run`; or use the command line: "
            '`draftlight chat "..."`.'
        )
    if ldd is None:
        plugin, tool = xcb_plugin(), shutil.which("ldd")
        if plugin is None or tool is None:
            return ""
        ldd = subprocess.run([tool, str(plugin)], capture_output=True, text=True, check=False).stdout
    missing = missing_libraries(ldd)
    if not missing:
        return ""
    packages = " ".join(dict.fromkeys(debian_package(lib) for lib in missing))
    return (
        f"Qt cannot open a window here: its X11 platform needs {', '.join(missing)}, which this "
        f"system lacks. On Debian or Ubuntu: `sudo apt install {packages}`, then `make run` again."
    )
