"""Fill an acceptance ledger with real replies: the default pair on code prompts, then the same
drafter against a changed copy of the target (layers swapped: tests/engine/ledger/changed_target.py).
Prints the pair's ledger status and history, as `draftlight pair --history` does.

    DRAFTLIGHT_LEDGER=/tmp/ledger.sqlite3 python benchmarks/ledger_changed_target.py /tmp/changed [--before 16 --after 6]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine import Engine, GenerationConfig, Message
from engine.models import catalog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "engine" / "ledger"))
from changed_target import changed_copy

PROMPTS = [
    f"Write a {lang} function that {task}."
    for task in ("merges two sorted lists", "reverses a linked list", "checks whether a string is a palindrome",
                 "counts the words in a text", "computes the n-th Fibonacci number", "parses a date string")
    for lang in ("Python", "C++", "JavaScript")
]  # fmt: skip


def replies(engine: Engine, n: int, tokens: int) -> None:
    for i, text in enumerate(PROMPTS[:n]):
        *_, stats = engine.stream(
            engine.prompt_ids([Message("user", text)]), GenerationConfig(max_tokens=tokens, depth=3)
        )
        print(f"{i + 1}/{n}: {stats.drafted} drafts, acceptance {stats.acceptance:.0%}", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, help="where the changed copy of the target is written")
    ap.add_argument("--before", type=int, default=16)
    ap.add_argument("--after", type=int, default=6)
    ap.add_argument("--tokens", type=int, default=96)
    args = ap.parse_args()
    target = catalog.resolve(catalog.DEFAULT_TARGET, download=False)
    drafter = catalog.resolve(catalog.DEFAULT_DRAFTER, download=False)
    engine = Engine.load(target, drafter)
    replies(engine, args.before, args.tokens)
    engine.close()
    engine = Engine.load(changed_copy(target, args.folder), drafter)
    replies(engine, args.after, args.tokens)
    view = engine.ledger_view()
    engine.close()
    print("\n".join(view.lines(with_history=True)) if view else "The ledger is off.")


if __name__ == "__main__":
    main()
