"""Draw Draftlight's icon: three lines of tokens in the provenance colours.

Writes assets/icon.png (1024 px, the source), assets/Draftlight.icns (macOS) and
assets/Draftlight.ico (Windows). Every size is drawn afresh rather than scaled down, so
the small ones stay crisp. Run it again after changing the drawing:

    QT_QPA_PLATFORM=offscreen .venv/bin/python assets/make_icon.py
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QRectF, Qt
from PySide6.QtGui import QColor, QGuiApplication, QImage, QLinearGradient, QPainter, QPainterPath

HERE = Path(__file__).resolve().parent

# The chart strokes of app/palette.py, repeated so this script runs without the app.
ACCEPTED, REPLACED, BONUS, PLAIN = "#2ca02c", "#d62728", "#1f77b4", "#8c8c8c"

# A short reply as the app shows it, a line per row: (width, colour) on a 1024 grid. The
# prompt's echo is plain, then drafts the target accepted, one it replaced, and a bonus.
LINES = [
    [(250, PLAIN), (170, PLAIN), (200, PLAIN)],
    [(190, ACCEPTED), (260, ACCEPTED), (170, REPLACED)],
    [(150, ACCEPTED), (210, ACCEPTED), (150, BONUS)],
]
TILE = QRectF(100, 100, 824, 824)  # the macOS icon grid: an 824 px tile on a 1024 px canvas
TILE_RADIUS = 185
PILL_HEIGHT, PILL_GAP, LINE_GAP = 104, 24, 44
CURSOR_WIDTH = 18

# ICNS entries that hold PNG data, by pixel size (macOS 10.7 and later read all of them).
ICNS_TYPES = [
    (b"icp4", 16),
    (b"icp5", 32),
    (b"ic11", 32),  # 16 px @2x
    (b"icp6", 64),
    (b"ic12", 64),  # 32 px @2x
    (b"ic07", 128),
    (b"ic08", 256),
    (b"ic13", 256),  # 128 px @2x
    (b"ic09", 512),
    (b"ic14", 512),  # 256 px @2x
    (b"ic10", 1024),  # 512 px @2x
]
ICO_SIZES = [16, 24, 32, 48, 64, 128, 256]


def draw(size: int) -> QImage:
    """The icon at `size` pixels square, transparent outside the tile."""
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    p = QPainter(image)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    p.scale(size / 1024, size / 1024)

    tile = QPainterPath()
    tile.addRoundedRect(TILE, TILE_RADIUS, TILE_RADIUS)
    shade = QLinearGradient(0, TILE.top(), 0, TILE.bottom())
    shade.setColorAt(0.0, QColor("#2b3140"))
    shade.setColorAt(1.0, QColor("#161a22"))
    p.fillPath(tile, shade)

    # Lines start at one left edge, like text; the longest is centred in the tile.
    block = len(LINES) * PILL_HEIGHT + (len(LINES) - 1) * LINE_GAP
    widest = max(sum(w for w, _ in line) + PILL_GAP * (len(line) - 1) for line in LINES)
    y = TILE.center().y() - block / 2
    for line in LINES:
        x = TILE.center().x() - widest / 2
        for w, colour in line:
            pill = QPainterPath()
            pill.addRoundedRect(QRectF(x, y, w, PILL_HEIGHT), PILL_HEIGHT / 2, PILL_HEIGHT / 2)
            p.fillPath(pill, QColor(colour))
            x += w + PILL_GAP
        y += PILL_HEIGHT + LINE_GAP
    # A text cursor after the last token: the reply is still streaming.
    cursor = QPainterPath()
    cursor.addRoundedRect(QRectF(x, y - LINE_GAP - PILL_HEIGHT, CURSOR_WIDTH, PILL_HEIGHT), 9, 9)
    p.fillPath(cursor, QColor("#e8eaf0"))
    p.end()
    return image


def png_bytes(image: QImage) -> bytes:
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    buffer.close()
    return bytes(data)


def icns(pngs: dict[int, bytes]) -> bytes:
    """An .icns file: 'icns', its length, then (type, length, PNG) entries."""
    body = b"".join(kind + struct.pack(">I", 8 + len(pngs[px])) + pngs[px] for kind, px in ICNS_TYPES)
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def ico(pngs: dict[int, bytes]) -> bytes:
    """An .ico file whose images are PNGs (Windows Vista and later)."""
    header = struct.pack("<HHH", 0, 1, len(ICO_SIZES))
    offset = len(header) + 16 * len(ICO_SIZES)
    entries, images = b"", b""
    for px in ICO_SIZES:
        data = pngs[px]
        side = 0 if px >= 256 else px  # 0 means 256 in an ICONDIRENTRY
        entries += struct.pack("<BBBBHHII", side, side, 0, 0, 1, 32, len(data), offset + len(images))
        images += data
    return header + entries + images


def main() -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    _app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])
    sizes = sorted({px for _, px in ICNS_TYPES} | set(ICO_SIZES))
    pngs = {px: png_bytes(draw(px)) for px in sizes}
    (HERE / "icon.png").write_bytes(pngs[1024])
    (HERE / "Draftlight.icns").write_bytes(icns(pngs))
    (HERE / "Draftlight.ico").write_bytes(ico(pngs))
    for name in ("icon.png", "Draftlight.icns", "Draftlight.ico"):
        print(f"{HERE / name}: {(HERE / name).stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
