"""Screenshots for the README: the chat mid-reply and at the end, the teaching view, and why
drafts were rejected (the ranks chart, the p_min what-if, acceptance by content, the hover).

Run under a real display or Xvfb:  xvfb-run -s "-screen 0 1600x1000x24" python docs/screenshots.py

`rendered`: one reply with prose, a table and code, at 1024x700, 1280x800, 1440x900 and 1920x1080,
light and dark (docs/chat-{1024,1280,1440,1920}-{light,dark}.png, each under 200 KB):
    xvfb-run -s "-screen 0 1920x1080x24" python docs/screenshots.py rendered
"""

from __future__ import annotations

import io
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).parent
PROMPT = "Write a bubble sort in C++ with an early exit, and explain it briefly."


def wait(loop_until, timeout=600.0) -> None:
    from PySide6.QtCore import QEventLoop, QTimer

    loop, deadline = QEventLoop(), time.monotonic() + timeout
    while not loop_until() and time.monotonic() < deadline:
        QTimer.singleShot(50, loop.quit)
        loop.exec()


def main() -> int:
    from app import settings
    from app.main import make_app
    from app.window import MainWindow

    app = make_app()
    tmp = Path(tempfile.mkdtemp(prefix="draftlight-shots-"))
    if "remote" in sys.argv[1:]:  # only this one: `python docs/screenshots.py remote`
        return remote(app, tmp)
    if "rendered" in sys.argv[1:]:  # only these: `python docs/screenshots.py rendered`
        return rendered(app, tmp)
    window = MainWindow(store_path=tmp / "c.sqlite3", prefs=settings.Preferences(depth=3, max_tokens=200))
    window.resize(1500, 920)
    window.show()
    wait(lambda: window.pair is not None and not window.busy)
    if "rejections" in sys.argv[1:]:  # only this one: `python docs/screenshots.py rejections`
        rejections(app, window)
        window.close()
        return 0
    window.input.setPlainText(PROMPT)
    window.send()
    wait(lambda: len(window.reply_tokens) >= 90)
    window.grab().save(str(OUT / "screenshot-mid-reply.png"))
    wait(lambda: not window.streaming)
    app.processEvents()
    window.grab().save(str(OUT / "screenshot.png"))

    teach = window.open_teaching()
    teach.resize(1300, 760)
    teach.prompt.setText("Write a bubble sort in C++.")
    teach.start()
    wait(lambda: not teach.waiting)
    for _ in range(13):  # six rounds and the drafts of a seventh, shown pending
        teach.step()
        wait(lambda: not teach.waiting)
    spans = teach.view.spans()
    if spans:
        token = teach.view.tokens[spans[min(5, len(spans) - 1)].token_index]
        teach.candidates.show_token(token, teach.piece)
    app.processEvents()
    teach.grab().save(str(OUT / "teaching.png"))
    teach.close()
    rejections(app, window)
    window.close()
    return 0


def rejections(app, window) -> None:
    """A reply with JSON and prose at depth 3, hovering a replaced token: the whole screen, tooltip included."""
    from PySide6.QtGui import QGuiApplication, QTextCursor
    from PySide6.QtWidgets import QToolTip

    from app.transcript import tooltip
    from engine import TokenKind

    window.new_conversation()
    window.side.set_depth(3)
    window.input.setPlainText("Return a JSON object for a cat named Tom, then describe him in two sentences.")
    window.send()
    wait(lambda: not window.streaming)
    window.charts.refresh()
    view = window.transcript
    spans = [s for s in view.spans() if view.tokens[s.token_index].kind is TokenKind.REPLACED]
    if spans:
        span = spans[0]  # near the top: the tooltip leaves the line of acceptance by content in view
        cursor = QTextCursor(view.document())
        cursor.setPosition(span.start)
        point = view.viewport().mapToGlobal(view.cursorRect(cursor).bottomRight())
        QToolTip.showText(point, tooltip(view.tokens[span.token_index]), view)
    for _ in range(20):
        app.processEvents()
        time.sleep(0.02)
    QGuiApplication.primaryScreen().grabWindow(0).save(str(OUT / "rejections.png"))


RENDERED_PROMPT = (
    "Give a markdown table of the best, average and worst time complexity of bubble sort and "
    "insertion sort, then an insertion sort in Python, then one sentence on when to use it."
)
FOLLOW_UP = "In one sentence: when is bubble sort good enough?"
SIZES = ((1024, 700), (1280, 800), (1440, 900), (1920, 1080))


def save_small(image, path: Path) -> None:
    """A screenshot in 256 colours: a UI's flat colours survive it, and the file stays small."""
    from PIL import Image
    from PySide6.QtCore import QBuffer, QIODevice

    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    shot = Image.open(io.BytesIO(bytes(buffer.data()))).convert("RGB")
    shot.quantize(256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)


def rendered(app, tmp: Path) -> int:
    """A reply with prose, a table and a code block, full screen at a laptop's and a desktop's
    size, in the light theme and the dark one: what a user sees the window at."""
    from app import settings, theme
    from app.messagetags import message_frames
    from app.window import MainWindow

    window = MainWindow(store_path=tmp / "rendered.sqlite3", prefs=settings.Preferences(depth=2, max_tokens=400))
    window.resize(*SIZES[0])
    window.show()
    wait(lambda: window.pair is not None and not window.busy)
    for prompt in (RENDERED_PROMPT, FOLLOW_UP):
        window.input.setPlainText(prompt)
        window.send()
        wait(lambda: not window.streaming)
    # The first reply selected, as a click in it does: the charts show its figures beside "all".
    first = window.chart_feed.reply_ids[0]
    cursor = window.transcript.textCursor()
    cursor.setPosition(next(f for mid, f in message_frames(window.transcript) if mid == first).firstPosition() + 1)
    window.transcript.setTextCursor(cursor)
    for width, height in SIZES:
        window.setGeometry(0, 0, width, height)
        for name in ("light", "dark"):
            theme.apply(name)
            window.charts.refresh()
            for _ in range(20):
                app.processEvents()
                time.sleep(0.02)
            window.transcript.verticalScrollBar().setValue(0)
            app.processEvents()
            save_small(window.grab(), OUT / f"chat-{width}-{name}.png")
    theme.apply("system")
    window.close()
    return 0


def remote(app, tmp: Path) -> int:
    """The window attached to `draftlight serve` (a child process here, as it would be across a
    tunnel), mid-conversation: the Engine box, the status bar naming the server's box."""

    from app import settings
    from app.window import MainWindow

    sys.path.insert(0, str(OUT.parent))
    from engine import catalog
    from tests.served import Served

    target = catalog.resolve(catalog.DEFAULT_TARGET, download=False)
    drafter = catalog.resolve(catalog.DEFAULT_DRAFTER, download=False)
    server = Served(target, drafter, "--depth", "3", "--token", "classroom")
    try:
        prefs = settings.Preferences(depth=3, max_tokens=160, engine_place="remote", remote_url=server.url,
                                     remote_token="classroom")  # fmt: skip
        window = MainWindow(store_path=tmp / "remote.sqlite3", prefs=prefs)
        window.resize(1500, 920)
        window.show()
        wait(lambda: window.pair is not None and not window.busy)
        window.input.setPlainText("Write a Python function that merges two sorted lists.")
        window.send()
        wait(lambda: not window.streaming)
        wait(lambda: bool(window.chart_model.thermal), timeout=10)
        window.charts.refresh()
        for _ in range(20):
            app.processEvents()
            time.sleep(0.02)
        window.grab().save(str(OUT / "remote.png"))
        window.close()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
