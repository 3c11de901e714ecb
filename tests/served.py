"""A real `draftlight serve` child process on a free localhost port, for the tests that talk to one."""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 300


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthy(port: int) -> bool:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/health")
        return conn.getresponse().status == 200
    except OSError:
        return False


class Served:
    """`draftlight serve --target T --drafter D --port P *args`, started and waited for."""

    def __init__(self, target: Path, drafter: Path | str, *args: str, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "engine.cli", "serve", "--target", str(target), "--drafter", str(drafter),
                   "--port", str(self.port), *args]  # fmt: skip
        self.proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not healthy(self.port):
            if self.proc.poll() is not None:
                pytest.fail(f"draftlight serve ended: {self.proc.stderr.read()}")
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail("draftlight serve did not answer within 5 minutes")
            time.sleep(0.3)

    def kill(self) -> None:
        """SIGKILL: the server gone at once, mid-reply if one is running."""
        self.proc.kill()
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
