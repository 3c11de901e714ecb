"""What serving costs a token: the engine in this process against `draftlight serve` on
localhost, same prompt and settings, interleaved, medians.

Decode speed is measured where a user sees it: from the first token's arrival to the last's,
(tokens - 1) / seconds, in this process's own loop for the local arm and at the HTTP client
(a streamed chat completion) for the served one. Usage:

    python benchmarks/serve_latency.py [--repeats 7] [--tokens 128] [--depths 0,2] [--threads N]

--threads sets llama.cpp's threads in both arms (default: every core, up to 8). On a box with
as many decode threads as cores, the server's event loop and the client wake once a token and
take a core from the decode; with a core left for them, what remains is serving's own cost.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine import Engine, GenerationConfig, Message, RuntimeOptions, TokenEvent, catalog  # noqa: E402

PROMPT = "Write a bubble sort in C++."


def local_tps(engine: Engine, depth: int, tokens: int) -> float:
    prompt = engine.prompt_ids([Message("user", PROMPT)])
    engine.forget()
    times = [time.perf_counter() for e in engine.stream(prompt, GenerationConfig(max_tokens=tokens, depth=depth,
             ignore_eog=True)) if isinstance(e, TokenEvent)]  # fmt: skip
    return (len(times) - 1) / (times[-1] - times[0])


def served_tps(port: int, depth: int, tokens: int) -> float:
    body = json.dumps({"messages": [{"role": "user", "content": PROMPT}], "max_tokens": tokens, "stream": True,
                       "ignore_eos": True, "draftlight": {"depth": depth}})  # fmt: skip
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    times = []
    for line in r:
        if line.startswith(b"data: {") and b'"type": "token"' in line:
            times.append(time.perf_counter())
    return (len(times) - 1) / (times[-1] - times[0])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--depths", default="0,2")
    p.add_argument("--threads", type=int, default=0)
    args = p.parse_args()
    depths = [int(d) for d in args.depths.split(",")]
    target = catalog.resolve(catalog.DEFAULT_TARGET, download=False)
    drafter = catalog.resolve(catalog.DEFAULT_DRAFTER, download=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "engine.cli", "serve", "--port", str(port), "--target",
                               str(target), "--drafter", str(drafter), "--threads", str(args.threads)], cwd=ROOT)  # fmt: skip
    engine = Engine.load(target, drafter, RuntimeOptions(n_threads=args.threads))
    try:
        while True:
            try:
                http.client.HTTPConnection("127.0.0.1", port, timeout=5).request("GET", "/health")
                break
            except OSError:
                time.sleep(0.5)
        for depth in depths:  # warm-up: both arms, every depth
            local_tps(engine, depth, 16), served_tps(port, depth, 16)
        results = {(arm, d): [] for arm in ("local", "served") for d in depths}
        for _ in range(args.repeats):
            for depth in depths:
                results[("local", depth)].append(local_tps(engine, depth, args.tokens))
                results[("served", depth)].append(served_tps(port, depth, args.tokens))
        threads = RuntimeOptions(n_threads=args.threads).threads
        print(f"decode tok/s at the consumer, {args.tokens} tokens, {threads} decode threads on {os.cpu_count()} "
              f"cores, median of {args.repeats}, interleaved")  # fmt: skip
        print("| depth | local | served | served / local | per repeat: median (range) |")
        print("|---:|---:|---:|---:|---|")
        for depth in depths:
            local, served = results[("local", depth)], results[("served", depth)]
            ratios = [s / loc for s, loc in zip(served, local)]
            print(f"| {depth} | {statistics.median(local):.1f} | {statistics.median(served):.1f} | "
                  f"{statistics.median(served) / statistics.median(local):.3f} | "
                  f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) |")  # fmt: skip
    finally:
        engine.close()
        server.terminate()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
