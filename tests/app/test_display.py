"""Linux before Qt starts: no display, or Qt's X11 plugin missing system libraries, is said in words with the fix."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys

import pytest

from app.display import debian_package, display_problem, missing_libraries, xcb_plugin

# What `ldd libqxcb.so` printed on a fresh Debian box (abridged)
LDD = """\
\tlinux-vdso.so.1 (0x00007ffd6b5f1000)
\tlibQt6XcbQpa.so.6 => /x/PySide6/Qt/lib/libQt6XcbQpa.so.6 (0x00007f3a1c000000)
\tlibxcb-cursor.so.0 => not found
\tlibxcb-icccm.so.4 => not found
\tlibxcb-keysyms.so.1 => not found
\tlibxcb-icccm.so.4 => not found
\tlibxcb.so.1 => /lib/x86_64-linux-gnu/libxcb.so.1 (0x00007f3a1bfd0000)
"""


def test_the_missing_libraries_and_their_packages():
    assert missing_libraries(LDD) == ["libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxcb-keysyms.so.1"]
    assert [debian_package(lib) for lib in missing_libraries(LDD)] == [
        "libxcb-cursor0",
        "libxcb-icccm4",
        "libxcb-keysyms1",
    ]
    assert debian_package("libxkbcommon-x11.so.0") == "libxkbcommon-x11-0"
    assert debian_package("libxcb-xkb.so.1") == "libxcb-xkb1"
    assert debian_package("libfoo2.so.3") == "libfoo2-3"  # a name ending in a digit takes a hyphen
    assert missing_libraries("\tlibxcb.so.1 => /lib/libxcb.so.1 (0x1)\n") == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")
def test_what_stands_between_the_user_and_a_window():
    said = display_problem({"DISPLAY": ":0"}, LDD)
    assert said == (
        "Qt cannot open a window here: its X11 platform needs libxcb-cursor.so.0, libxcb-icccm.so.4, "
        "libxcb-keysyms.so.1, which this system lacks. On Debian or Ubuntu: `sudo apt install libxcb-cursor0 "
        "libxcb-icccm4 libxcb-keysyms1`, then `make run` again."
    )
    assert display_problem({}, LDD).startswith("No display to open Draftlight's window on")
    assert display_problem({"DISPLAY": ":0"}, "\tlibxcb.so.1 => /lib/libxcb.so.1 (0x1)\n") == ""
    assert display_problem({"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"}, LDD) == ""  # the tests' own way
    assert display_problem({"WAYLAND_DISPLAY": "wayland-0"}, LDD) == ""


@pytest.mark.skipif(shutil.which("ldd") is None or xcb_plugin() is None, reason="needs ldd and Qt's xcb plugin")
def test_what_ldd_reports_missing_the_linker_cannot_load():
    out = subprocess.run(["ldd", str(xcb_plugin())], capture_output=True, text=True, check=False).stdout
    assert "libQt6XcbQpa.so.6 =>" in out
    for library in missing_libraries(out):
        with pytest.raises(OSError):
            ctypes.CDLL(library)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")
def test_the_app_says_it_and_exits_instead_of_aborting(monkeypatch, capsys):
    import app.display
    from app.main import main

    monkeypatch.setattr(app.display, "display_problem", lambda: "No display to open Draftlight's window on.")
    assert main() == 2
    assert capsys.readouterr().err == "draftlight: No display to open Draftlight's window on.\n"
