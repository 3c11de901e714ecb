"""The command line's arguments, checked: a bad one is a sentence, never a traceback or a bare crash."""

from __future__ import annotations

import argparse
import os
from typing import NoReturn

from engine.errors import DraftlightError

MAX_CTX = 1 << 24  # past any model's trained context; the model's own limit is checked when it loads
# Control characters a model may write that a terminal would obey (a window title, a cleared
# screen, a moved cursor) are shown as escapes there instead; newline and tab are text.
_TERMINAL_ESCAPES = {
    c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"
    for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))
    if c not in (0x09, 0x0A)
}


def terminal_safe(text: str) -> str:
    """Text with its C0 and C1 control characters (but newline and tab) written as escapes."""
    return text.translate(_TERMINAL_ESCAPES)


class Parser(argparse.ArgumentParser):
    """argparse whose mistakes are one sentence on standard error, as every other failure is."""

    def _get_values(self, action: argparse.Action, arg_strings: list[str]):
        # argparse drops a lone '--' given as an option's value (`--p-min=--`) and hands on an
        # empty list that no type function ever checked.
        if action.option_strings and action.nargs is None and arg_strings == ["--"]:
            self.error(f"argument {'/'.join(action.option_strings)}: expected a value, not '--'")
        return super()._get_values(action, arg_strings)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"draftlight: {message} (`{self.prog} --help` lists the options).\n")


def int_in(low: int, high: int, what: str = ""):
    """An argparse type: a whole number from low to high; `what` adds words after the range."""

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, not {value!r}") from None
        if not low <= number <= high:
            raise argparse.ArgumentTypeError(f"must be from {low:,} to {high:,}{what}, not {number:,}")
        return number

    return parse


def float_in(low: float, high: float, what: str = ""):
    """An argparse type: a number from low to high (NaN refused)."""

    def parse(value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, not {value!r}") from None
        if not low <= number <= high:  # NaN fails this too
            raise argparse.ArgumentTypeError(f"must be from {low:g} to {high:g}{what}, not {value}")
        return number

    return parse


def _max_threads() -> int:
    return (os.cpu_count() or 1) * 4


def threads_arg(value: str) -> int:
    return int_in(0, _max_threads(), " (0: all cores, up to 8)")(value)


def ctx_arg(value: str) -> int:
    return int_in(1, MAX_CTX)(value)


def utf8_or_refuse(text: str | None, what: str) -> None:
    """Refuse text the shell passed as bytes that are not UTF-8 (Python keeps them as lone surrogates)."""
    if text is None:
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        byte = f"byte 0x{ord(bad) - 0xDC00:02x}" if 0xDC80 <= ord(bad) <= 0xDCFF else f"U+{ord(bad):04X}"
        raise DraftlightError(
            f"The {what} is not valid UTF-8 text ({byte} at character {exc.start + 1:,}): pass it as UTF-8."
        ) from None


def runtime_options(args: argparse.Namespace):
    """The runtime options `add_runtime_args` read."""
    from engine.runtime import RuntimeOptions

    return RuntimeOptions(n_ctx=args.ctx, n_threads=args.threads, exact=not args.fast)


def _ctx_or_auto(value: str) -> int:
    return 0 if value.strip().lower() == "auto" else ctx_arg(value)


def add_runtime_args(p: argparse.ArgumentParser, ctx_default: int = 4096) -> None:
    """The runtime's options; `ctx_default` 0 sizes the context as the app does (engine/runtime/contextsize.py)."""
    default = "auto: the model's trained length, at most 32,768, as far as a quarter of the free memory holds"
    p.add_argument(
        "--ctx",
        type=_ctx_or_auto,
        default=ctx_default,
        help=f"context window in tokens, or auto (default {default if ctx_default == 0 else ctx_default})",
    )
    p.add_argument("--threads", type=threads_arg, default=0, help="CPU threads (default: all cores, up to 8)")
    p.add_argument(
        "--fast",
        action="store_true",
        help="allow CPU weight repacking: faster on some CPUs, but speculation may change greedy text",
    )
    p.add_argument(
        "--runtime",
        choices=("auto", "llama", "mlx"),
        default="auto",
        help="llama (llama.cpp, GGUF files) or mlx (MLX folders; a GGUF file is converted once); "
        "auto (default): the target's format decides",
    )
    p.add_argument("--verbose", action="store_true", help="show llama.cpp's own log")
