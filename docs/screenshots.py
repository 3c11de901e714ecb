"""Screenshots for the README: the chat mid-reply and at the end, and the teaching view.

Run under a real display or Xvfb:  xvfb-run -s "-screen 0 1600x1000x24" python docs/screenshots.py
"""

from __future__ import annotations

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
    window = MainWindow(store_path=tmp / "c.sqlite3", prefs=settings.Preferences(depth=3, max_tokens=200))
    window.resize(1500, 920)
    window.show()
    wait(lambda: window.pair is not None and not window.busy)
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
    window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
