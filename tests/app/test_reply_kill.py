"""A reply in progress survives a SIGKILL: the app in a child process on a real model, killed
with about 80 tokens on screen, then a restart that shows the partial reply, cut short, with
the exact tokens and provenance the engine streamed."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from app import settings
from app.store import CUT_SHORT
from app.window import MainWindow
from engine import Engine, GenerationConfig, Message, TokenEvent

PROMPT = "Write a long story about a lighthouse keeper."
KILL_AT = 80  # tokens on disk when the app is killed
ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import sys
from pathlib import Path
from PySide6.QtCore import QTimer
from app import settings
from app.main import make_app
from app.window import MainWindow

app = make_app()
store, target, drafter, prompt = sys.argv[1:5]
prefs = settings.Preferences(target=target, drafter=drafter, max_tokens=400, depth=2)
window = MainWindow(store_path=Path(store), prefs=prefs)
window.show()

def send():
    if window.pair is None or window.busy:
        QTimer.singleShot(100, send)
        return
    window.input.setPlainText(prompt)
    window.send()

QTimer.singleShot(100, send)
app.exec()
"""


def tokens_on_disk(path: Path) -> int:
    if not path.exists():
        return 0
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        (lines,) = db.execute("SELECT coalesce(sum(length(tokens) - length(replace(tokens, char(10), '')) + 1), 0) "
                              "FROM reply_chunks").fetchone()  # fmt: skip
        return int(lines)
    except sqlite3.OperationalError:  # the tables are not made yet
        return 0
    finally:
        db.close()


def test_a_reply_killed_mid_stream_is_shown_cut_short_with_its_provenance(qtbot, tmp_path, smollm_path):
    # The smallest real model with the n-gram drafter: the same worker and store paths as the
    # default pair, in seconds rather than minutes on a shared box.
    store = tmp_path / "conversations.sqlite3"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(store), str(smollm_path), "ngram", PROMPT],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 300
        while tokens_on_disk(store) < KILL_AT:
            assert child.poll() is None, child.stderr.read().decode(errors="replace")[-2000:]
            assert time.monotonic() < deadline, "the child never streamed 80 tokens"
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    assert child.returncode == -signal.SIGKILL

    window = MainWindow(store_path=store, prefs=settings.Preferences(target=str(tmp_path / "none.gguf")))
    qtbot.addWidget(window)
    window.show()
    reply = window.store.messages(window.conversation_id)[-1]
    assert reply.role == "assistant" and reply.interrupted and reply.stats is None
    assert KILL_AT <= len(reply.tokens) < 400
    # Exactly what the engine streams for this conversation, kinds and all, up to the kill.
    engine = Engine.load(smollm_path, "ngram")
    prompt = engine.prompt_ids([Message("user", PROMPT)])
    # A few tokens more than were kept: at max_tokens the last round drafts less, which the app's run did not.
    config = GenerationConfig(max_tokens=len(reply.tokens) + 3, depth=2)
    headless = [e for e in engine.stream(prompt, config) if isinstance(e, TokenEvent)]
    engine.close()
    assert [(t.token_id, t.kind, t.round_index) for t in reply.tokens] == [
        (t.token_id, t.kind, t.round_index) for t in headless[: len(reply.tokens)]
    ]
    assert reply.content == "".join(t.text for t in reply.tokens)
    text = window.transcript.toPlainText()
    assert CUT_SHORT in text and reply.content.strip()[:40] in text
    visible = [t.kind.value for t in reply.tokens if t.text.strip("\n")]
    assert [s.kind for s in window.transcript.spans()] == visible
    window.close()
