"""Run model discovery over hostile folders, watching every file it opens and folder it lists.

    python -m tests.fuzz.discovery_child CASES.json

CASES.json: a list of {"home", "folders", "env", "allowed"}. For each case one JSON line:
the models found (name, source, path) and every path opened or listed outside `allowed`
(Python's audit hooks see each open() and scandir(), whoever makes it).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from engine.models.local import local_models

watching: list[str] | None = None


def hook(event: str, args: tuple) -> None:
    if watching is not None and event in ("open", "os.scandir", "os.listdir") and args:
        path = args[0]
        if isinstance(path, str | bytes | os.PathLike):
            watching.append(os.fsdecode(path))


def outside(path: str, allowed: list[Path]) -> bool:
    try:
        real = Path(path).resolve()
    except (OSError, RuntimeError):
        real = Path(os.path.abspath(path))
    return not any(real == a or real.is_relative_to(a) for a in allowed)


def main(cases_file: str) -> None:
    global watching
    from tests.fuzz.tiny_gguf import tiny_llama

    with tempfile.TemporaryDirectory() as warm:  # every lazy import done before watching starts
        tiny_llama(Path(warm, "warm.gguf"))
        local_models([warm], home=Path(warm), env={})
    sys.addaudithook(hook)
    for case in json.loads(Path(cases_file).read_text()):
        allowed = [Path(a).resolve() for a in case["allowed"]]
        watching = []
        found = local_models(case["folders"], home=Path(case["home"]), env=case["env"])
        seen, watching = watching, None
        print(json.dumps({
            "models": [[m.name, m.source, str(m.path)] for m in found],
            "outside": sorted({p for p in seen if outside(p, allowed)}),
        }), flush=True)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1])
