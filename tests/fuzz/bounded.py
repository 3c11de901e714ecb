"""Run one fuzz case in a child process under a time and memory budget.

Every case of the fuzz suite asserts the same contract: the process ends on its own within
the budget, by no signal, with no traceback, and (when it fails) says why in one sentence.
`make test` runs a seeded subset; `make fuzz` (DRAFTLIGHT_FUZZ=full) runs every case.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FULL = os.environ.get("DRAFTLIGHT_FUZZ", "") == "full"


def case_count(fast: int, full: int) -> int:
    """How many seeded cases a fuzz test runs: `fast` under `make test`, `full` under `make fuzz`."""
    return full if FULL else fast


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool

    @property
    def signalled(self) -> bool:
        return self.returncode < 0

    def problems(self) -> list[str]:
        """What breaks the contract: a hang, a signal, a traceback, more than one line of error."""
        found = []
        if self.timed_out:
            found.append("did not end within its time budget")
        if self.signalled:
            found.append(f"killed by signal {-self.returncode}")
        if "Traceback (most recent call last)" in self.stderr:
            found.append("printed a traceback")
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        if self.returncode > 0 and len(lines) != 1:
            found.append(f"said {len(lines)} lines instead of one sentence: {lines[:3]!r}")
        return found


def run_bounded(
    args: list[str],
    *,
    timeout_s: float = 20.0,
    memory_mb: int = 3072,
    stdin: str = "",
    env: dict[str, str] | None = None,
) -> Outcome:
    """Run `python -m engine.cli ARGS` (or `python -c ...` when args start with "-c")."""

    def limit() -> None:
        cap = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    command = [sys.executable, *args] if args[0] == "-c" else [sys.executable, "-m", "engine.cli", *args]
    try:
        done = subprocess.run(
            command,
            input=stdin,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            preexec_fn=limit,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        return Outcome(returncode=0, stdout=out, stderr=err, timed_out=True)
    return Outcome(done.returncode, done.stdout, done.stderr, timed_out=False)
