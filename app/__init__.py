"""Draftlight's desktop app: PySide6 and pyqtgraph over the engine's event stream."""
