"""PyInstaller's own Qt hook, keeping only the plugins Draftlight uses (see qt_plugins.py).

This hook takes the place of the stock one (hooks in `hookspath` win), so the plugins left
out never reach the dependency scan and the Qt libraries they need stay out too.
"""

from PyInstaller.utils.hooks.qt import add_qt6_dependencies
from qt_plugins import only_wanted

hiddenimports, binaries, datas = add_qt6_dependencies(__file__)
binaries = only_wanted(binaries)
