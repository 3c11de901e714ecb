"""`draftlight ledger show|export|clear`: the acceptance ledger from the command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.errors import DraftlightError
from engine.ledger import recording
from engine.ledger.report import export_csv, export_json, pair_ledger


def _book():
    book = recording.ledger()
    if book is None:
        raise DraftlightError("The acceptance ledger is turned off (DRAFTLIGHT_LEDGER=off).")
    if book.notice:
        print(book.notice, file=sys.stderr)
    return book


def cmd_ledger(args: argparse.Namespace) -> int:
    book = _book()
    if args.action == "show":
        pairs = book.pairs()
        if args.target:
            pairs = [p for p in pairs if p[0] == Path(args.target).name and (not args.drafter or p[1] == args.drafter)]
        if not pairs:
            print(f"No replies in the acceptance ledger ({book.where}) for that pair." if args.target else
                  f"The acceptance ledger ({book.where}) holds no replies yet.")  # fmt: skip
            return 0
        print(f"Acceptance ledger: {book.where}")
        for target, drafter in pairs:
            view = pair_ledger(book, target, drafter)
            print(f"\n{target} + {drafter}: {view.replies:,} repl{'y' if view.replies == 1 else 'ies'}")
            print("\n".join(view.lines(with_history=True)))
        return 0
    if args.action == "export":
        text = export_csv(book) if args.format == "csv" else export_json(book)
        if args.output:
            Path(args.output).write_text(text, encoding="utf-8")
            print(f"Wrote the acceptance ledger to {args.output}.", file=sys.stderr)
        else:
            sys.stdout.write(text)
        return 0
    if not args.yes:
        raise DraftlightError("`draftlight ledger clear` forgets every pair's acceptance: add --yes to do it.")
    n = book.clear()
    print(f"Forgot {n:,} repl{'y' if n == 1 else 'ies'} from the acceptance ledger ({book.where}).")
    return 0


def add_cli(sub) -> None:
    ledger = sub.add_parser(
        "ledger", help="the acceptance ledger: each pair's acceptance over time (show, export, clear)"
    )
    ledger.add_argument("action", choices=("show", "export", "clear"))
    ledger.add_argument("target", nargs="?", help="show: only this target (file name or path)")
    ledger.add_argument("drafter", nargs="?", help="show: only this drafter (file name, or its kind: ngram, mtp)")
    ledger.add_argument("--format", choices=("csv", "json"), default="csv", help="export: csv (default) or json")
    ledger.add_argument("--output", help="export: write to this file (default: standard output)")
    ledger.add_argument("--yes", action="store_true", help="clear: really forget every reply")
    ledger.set_defaults(func=cmd_ledger)
