"""A sandbox for chat templates with a budget: time, output size, and the size of every value.

A chat template ships inside the model file, so it is untrusted code. jinja2's immutable
sandbox stops it reaching outside; this module stops it spending without bound:

- time: every line of Python run while rendering (the template's compiled code and the
  jinja2 helpers it calls) checks a deadline and a cancel flag, through a trace function on
  the rendering thread only. A template cannot loop, recurse or sort without running lines.
- size: the operators and calls that can make a value far larger than their inputs
  (`*`, `**`, `+`, `%`, str.format, center, indent, replace, join, tojson's indent, strftime)
  are checked before they run; jinja2 then also leaves them out of its compile-time
  constant folding, so `'x' * 4000000000` cannot blow up while the template compiles.
- output: the rendered text is collected chunk by chunk and refused once past its cap.

Rendering in a child process with hard limits would also work, at about 100 ms a reply to
start Python and jinja2 again; checking in-process costs nothing on a normal template and
lets a Stop end the render at its next line.
"""

from __future__ import annotations

import json
import operator
import re
import string
import sys
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from engine.errors import Cancelled, ChatTemplateError

RENDER_SECONDS = 2.0  # a real template renders in about a millisecond
MAX_ITEMS = 1 << 23  # characters in a string, items in a list: 8 Mi, far past any context
MAX_INT_BITS = 1 << 16  # a template has no use for numbers past 65,536 bits
MAX_FORMAT_WIDTH = 10_000  # a width or precision in a format string
MAX_JSON_INDENT = 64
MAX_STRFTIME_FORMAT = 1_000  # characters in strftime_now's format

_NUMBER = re.compile(r"\d+")
_PERCENT_SPEC = re.compile(r"%[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")


class OverBudget(BaseException):
    """Raised inside a render to end it. A BaseException, so no `except Exception` in jinja2
    (nor anything a template can reach) swallows it; render() turns it into a sentence."""


class RenderBudget:
    """One render's limits: a deadline, a cancel flag, and a cap on the rendered text."""

    def __init__(
        self, seconds: float = RENDER_SECONDS, max_chars: int = MAX_ITEMS, cancelled: Callable[[], bool] | None = None
    ):
        self.seconds = seconds
        self.max_chars = max_chars
        self.deadline = time.monotonic() + seconds
        self.cancelled = cancelled or (lambda: False)
        self.stopped = False  # set when the cancel flag ended the render

    def check(self) -> None:
        if self.cancelled():
            self.stopped = True
            raise OverBudget("cancelled")
        if time.monotonic() > self.deadline:
            raise OverBudget(f"ran past its {self.seconds:g}-second budget")

    def trace(self, frame: Any, event: str, arg: Any) -> Callable | None:
        """sys.settrace's hook: every call and every line checks the budget."""
        self.check()
        return self.trace


class TooLarge(jinja2.TemplateError):
    """A template asked for a value past the size limits."""


def _refuse(what: str) -> None:
    raise TooLarge(what)


def _check_size(n: int, what: str) -> None:
    if n > MAX_ITEMS:
        _refuse(f"{what} would hold {n:,} items, past the limit of {MAX_ITEMS:,}")


def _check_int(n: int) -> None:
    if n > MAX_INT_BITS:
        _refuse(f"a number of {n:,} bits is past the limit of {MAX_INT_BITS:,}")


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _sized(x: Any) -> bool:
    return isinstance(x, str | bytes | list | tuple)


def _check_format_numbers(spec: str, what: str) -> None:
    for number in _NUMBER.findall(spec):
        if len(number) > 5 or int(number) > MAX_FORMAT_WIDTH:
            _refuse(f"{what} asks for a width of {number}, past the limit of {MAX_FORMAT_WIDTH:,}")


def _check_percent_format(fmt: str) -> None:
    for width, precision in _PERCENT_SPEC.findall(fmt):
        for number in (width, precision):
            if number == "*":
                _refuse("a '%' format takes its width from an argument, which templates may not do")
            if number:
                _check_format_numbers(number, "a '%' format")


def _check_str_format(fmt: str) -> None:
    try:
        fields = list(string.Formatter().parse(fmt))
    except ValueError:
        return  # str.format raises the same error itself
    for _, _, spec, _ in fields:
        if spec and "{" in spec:
            _refuse("a format string takes its width from an argument, which templates may not do")
        if spec:
            _check_format_numbers(spec, "a format string")


def check_binop(op: str, left: Any, right: Any) -> None:
    """Refuse an operation whose result would be too large, before it runs."""
    if op == "*":
        for seq, n in ((left, right), (right, left)):
            if _sized(seq) and _is_int(n):
                _check_size(len(seq) * max(n, 0), "a repeated value")
        if _is_int(left) and _is_int(right):
            _check_int(abs(left).bit_length() + abs(right).bit_length())
    elif op == "**" and _is_int(left) and _is_int(right) and right > 0:
        _check_int(max(abs(left).bit_length() - 1, 1) * right)
    elif op == "+" and _sized(left) and _sized(right):
        _check_size(len(left) + len(right), "a joined value")
    elif op == "%" and isinstance(left, str):
        _check_percent_format(left)


def _check_str_method(obj: Any, args: tuple, kwargs: dict) -> None:
    """Refuse a str method call whose result would be too large, before it runs."""
    method = getattr(obj, "__wrapped__", obj)  # jinja2 wraps str.format in a function of its own
    target = getattr(method, "__self__", None)
    name = getattr(method, "__name__", "")
    if not isinstance(target, str):
        return
    values = [*args, *kwargs.values()]
    if name in ("center", "ljust", "rjust", "zfill") and values and _is_int(values[0]):
        _check_size(values[0], f"str.{name}")
    elif name == "expandtabs" and values and _is_int(values[0]):
        _check_size(len(target) * max(values[0], 1), "str.expandtabs")
    elif name == "replace" and len(values) >= 2 and isinstance(values[0], str) and isinstance(values[1], str):
        old, new = values[0], values[1]
        count = len(target) + 1 if not old else len(target) // len(old)
        _check_size(len(target) + count * len(new), "str.replace")
    elif name == "join" and values:
        _check_join(target, values[0])
    elif name in ("format", "format_map"):
        _check_str_format(target)


def _check_join(separator: str, items: Any) -> None:
    if isinstance(items, list | tuple):
        total = sum(len(x) if isinstance(x, str) else 16 for x in items)
        _check_size(total + len(separator) * len(items), "a joined string")


def tojson(value: Any, indent: int | None = None, ensure_ascii: bool = False, **_: Any) -> str:
    if indent is not None and (not _is_int(indent) or not 0 <= indent <= MAX_JSON_INDENT):
        _refuse(f"tojson's indent {indent!r} is not between 0 and {MAX_JSON_INDENT}")
    return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii)


def strftime_now(fmt: str) -> str:
    if len(str(fmt)) > MAX_STRFTIME_FORMAT:
        _refuse(f"strftime_now's format is {len(str(fmt)):,} characters, past the limit of {MAX_STRFTIME_FORMAT:,}")
    return datetime.now().strftime(fmt)


def raise_exception(message: str) -> None:
    raise jinja2.TemplateError(message)


def _bounded_filters(filters: dict[str, Callable]) -> dict[str, Callable]:
    """jinja2's filters that can grow a value, with their sizes checked first."""
    center, indent, fmt, join, replace = (filters[k] for k in ("center", "indent", "format", "join", "replace"))

    def bounded_center(value: Any, width: int = 80) -> str:
        if _is_int(width):
            _check_size(width, "the center filter")
        return center(value, width)

    def bounded_indent(value: Any, width: int | str = 4, *args: Any, **kwargs: Any) -> str:
        size = len(width) if isinstance(width, str) else width if _is_int(width) else 0
        _check_size(size * (str(value).count("\n") + 1) + len(str(value)), "the indent filter")
        return indent(value, width, *args, **kwargs)

    def bounded_format(value: Any, *args: Any, **kwargs: Any) -> str:
        _check_percent_format(str(value))
        return fmt(value, *args, **kwargs)

    def bounded_join(context: Any, value: Iterable, d: str = "", attribute: Any = None) -> str:
        if attribute is None:
            _check_join(str(d), value)
        return join(context, value, d, attribute)

    def bounded_replace(context: Any, s: Any, old: str, new: str, count: int | None = None) -> str:
        _check_str_method(str(s).replace, (str(old), str(new)), {})
        return replace(context, s, old, new, count)

    bounded_join.jinja_pass_arg = join.jinja_pass_arg  # type: ignore[attr-defined]
    bounded_replace.jinja_pass_arg = replace.jinja_pass_arg  # type: ignore[attr-defined]
    return {
        "center": bounded_center,
        "indent": bounded_indent,
        "format": bounded_format,
        "join": bounded_join,
        "replace": bounded_replace,
        "tojson": tojson,
    }


class Sandbox(ImmutableSandboxedEnvironment):
    """jinja2's immutable sandbox, with sizes checked and unsafe attributes an error.

    jinja2 answers `''.__class__` with an undefined value that prints as nothing, so a
    template that probes the sandbox would render on silently; here it stops.
    """

    intercepted_binops = frozenset({"*", "**", "+", "%"})  # also keeps them out of constant folding

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.policies["json.dumps_function"] = json.dumps
        self.filters.update(_bounded_filters(self.filters))
        self.globals["raise_exception"] = raise_exception
        self.globals["strftime_now"] = strftime_now
        self._local = threading.local()

    def unsafe_undefined(self, obj: Any, attribute: str) -> jinja2.Undefined:
        raise SecurityError(f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe.")

    def call_binop(self, context: Any, op: str, left: Any, right: Any) -> Any:
        check_binop(op, left, right)
        return {"*": operator.mul, "**": operator.pow, "+": operator.add, "%": operator.mod}[op](left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        budget = getattr(__self._local, "budget", None)
        if budget is not None:
            budget.check()
        _check_str_method(__obj, args, kwargs)
        return super().call(__context, __obj, *args, **kwargs)

    def render_within(self, template: jinja2.Template, budget: RenderBudget, **variables: Any) -> str:
        """Render under `budget`; raise ChatTemplateError (or Cancelled) with the reason if it is spent."""
        chunks: list[str] = []
        size = 0
        previous = sys.gettrace()
        self._local.budget = budget
        sys.settrace(budget.trace)
        try:
            for chunk in template.generate(**variables):
                size += len(chunk)
                if size > budget.max_chars:
                    raise ChatTemplateError(
                        f"The model's chat template wrote more than {budget.max_chars:,} characters, "
                        "more than the context can hold: shorten the conversation or use another model."
                    )
                chunks.append(chunk)
                budget.check()
        except OverBudget as exc:
            if budget.stopped:
                raise Cancelled("Stopped before the reply began.") from None
            raise ChatTemplateError(
                f"The model's chat template {exc} and was stopped: the model file's template is faulty or hostile."
            ) from None
        finally:
            sys.settrace(previous)
            self._local.budget = None
        return "".join(chunks)
