"""Does the window cost speed? Decode tok/s through the GUI against the headless engine on
the same prompt, and how long the GUI thread stalls while tokens stream.

Interleaved runs after a warm-up, medians reported as a ratio. The stall monitor is a
1 ms QTimer on the GUI thread: a stall is how late it fires. Run it on a quiet machine,
under a real display or Xvfb (xvfb-run python benchmarks/gui_bench.py) or offscreen.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

PROMPT = "Write a bubble sort in C++: a function that sorts a std::vector<int> in place, and a main()."


def headless_run(engine, depth: int, tokens: int) -> float:
    from engine import GenerationConfig, Message

    ids = engine.prompt_ids([Message("user", PROMPT)])
    engine.forget()
    stats = list(engine.stream(ids, GenerationConfig(max_tokens=tokens, depth=depth, ignore_eog=True)))[-1]
    return stats.decode_tps


def gui_run(app, window, depth: int, tokens: int, monitor_stalls: bool) -> tuple[float, list[float], float]:
    """Decode tok/s through the window, the stalls seen, and the GUI thread's CPU share of the run."""
    from dataclasses import replace

    from PySide6.QtCore import QEventLoop, QTimer

    from app.worker import ReplyRequest
    from engine import GenerationConfig, Message

    stalls: list[float] = []
    last = [time.perf_counter()]

    def tick() -> None:
        now = time.perf_counter()
        stalls.append(max(0.0, now - last[0] - 0.001))
        last[0] = now

    monitor = QTimer()
    monitor.setInterval(1)
    monitor.timeout.connect(tick)
    done = []
    window.reply_finished.connect(done.append)
    window.worker.engine.forget()  # the same full prefill as the headless run
    config = replace(GenerationConfig(max_tokens=tokens, depth=depth), ignore_eog=True)
    window.reply_tokens = []
    window.chart_model.begin_message()
    window.transcript.begin_reply()
    window.streaming = True
    last[0] = wall0 = time.perf_counter()
    cpu0 = time.thread_time()  # this is the GUI thread: its CPU time is what the engine's threads lose
    if monitor_stalls:
        monitor.start()
    window.request_reply.emit(ReplyRequest((Message("user", PROMPT),), config))
    loop = QEventLoop()
    window.reply_finished.connect(loop.quit)
    if not done:
        loop.exec()  # no polling: the bench itself must not wake the GUI thread
    window.reply_finished.disconnect(loop.quit)
    busy = (time.thread_time() - cpu0) / (time.perf_counter() - wall0)
    monitor.stop()
    window.reply_finished.disconnect(done.append)
    return done[0].decode_tps, stalls, busy


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--depth", type=int, default=2)
    args = parser.parse_args()
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from app import settings
    from app.main import make_app
    from app.window import MainWindow
    from engine import Engine

    app = make_app()
    tmp = tempfile.mkdtemp(prefix="draftlight-guibench-")
    window = MainWindow(store_path=Path(tmp) / "bench.sqlite3", prefs=settings.Preferences(depth=args.depth))
    window.show()
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    while window.pair is None or window.busy:
        QTimer.singleShot(50, loop.quit)
        loop.exec()
    headless = Engine.load()

    headless_run(headless, args.depth, 16)  # warm-ups
    gui_run(app, window, args.depth, 16, False)
    gui_tps, head_tps, all_stalls, busy = [], [], [], []
    for _ in range(args.repeats):
        head_tps.append(headless_run(headless, args.depth, args.tokens))
        tps, _, share = gui_run(app, window, args.depth, args.tokens, False)
        gui_tps.append(tps)
        busy.append(share)
    # Stalls in runs of their own: the 1 ms probe wakes the GUI thread 1,000 times a second,
    # which on a machine with few cores takes time from the engine's threads.
    for _ in range(args.repeats):
        all_stalls += gui_run(app, window, args.depth, args.tokens, True)[1]
    headless.close()
    window.close()

    stalls_ms = sorted(s * 1e3 for s in all_stalls)
    p = lambda q: stalls_ms[min(len(stalls_ms) - 1, int(q * len(stalls_ms)))]  # noqa: E731
    g, h = statistics.median(gui_tps), statistics.median(head_tps)
    platform = os.environ.get("QT_QPA_PLATFORM") or "display " + os.environ.get("DISPLAY", "")
    print(f"platform: {platform}; depth {args.depth}, {args.tokens} tokens, {args.repeats} interleaved repeats")
    print(f"headless decode tok/s: {' '.join(f'{x:.2f}' for x in head_tps)} (median {h:.2f})")
    print(f"GUI decode tok/s:      {' '.join(f'{x:.2f}' for x in gui_tps)} (median {g:.2f})")
    paired = statistics.median(x / y for x, y in zip(gui_tps, head_tps))
    print(f"GUI / headless: {g / h:.3f} ({(g / h - 1) * 100:+.1f}%) of medians; median of paired runs {paired:.3f}")
    print(f"GUI thread's CPU while streaming: {statistics.median(busy) * 100:.1f}% of the run's wall time (median)")
    print(
        f"GUI thread stalls while streaming ({len(stalls_ms)} samples): p50 {p(0.5):.2f} ms, "
        f"p99 {p(0.99):.2f} ms, max {stalls_ms[-1]:.2f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
