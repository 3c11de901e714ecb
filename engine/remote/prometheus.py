"""Prometheus text exposition, read defensively: the counters a remote server's /metrics page carries.

A page is untrusted input. connection.py caps its size; here a line that is not a sample
(a comment, a malformed line, a value that is not a number, a name we do not ask for) is
skipped, and nothing raises on junk. Samples of one name are summed over the label sets
that are not asked for (vLLM labels each counter with its engine and model: a server with
several engines has one line per engine).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

MAX_LINES = 200_000  # a vLLM page is a few thousand lines; anything past this is not read
MAX_LINE = 4096

# name{labels} value [timestamp]; names as Prometheus allows them (colons included)
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^{}]*\})?\s+(\S+)(?:\s+-?\d+)?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


@dataclass(frozen=True, slots=True)
class Sample:
    """One line of a page: a metric's name, its labels and its value."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    def label(self, key: str) -> str | None:
        return next((v for k, v in self.labels if k == key), None)


def _labels(text: str) -> tuple[tuple[str, str], ...] | None:
    """`{a="1",b="x"}` as pairs; None where it does not read as labels."""
    inner = text[1:-1]
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(inner):
        m = _LABEL.match(inner, pos)
        if m is None or m.end() == pos:
            return None if inner[pos:].strip() else tuple(out)
        value = m.group(2).replace(r"\"", '"').replace(r"\n", "\n").replace("\\\\", "\\")
        out.append((m.group(1), value))
        pos = m.end()
    return tuple(out)


def parse_samples(page: str | bytes, names: frozenset[str] | set[str] | None = None) -> list[Sample]:
    """The samples of a page (of the given names only, where names are given); junk skipped."""
    if isinstance(page, bytes):
        page = page.decode("utf-8", errors="replace")
    out: list[Sample] = []
    for n, line in enumerate(page.splitlines()):
        if n >= MAX_LINES:
            break
        if not line or line[0] == "#" or len(line) > MAX_LINE:
            continue
        m = _SAMPLE.match(line.strip())
        if m is None or (names is not None and m.group(1) not in names):
            continue
        labels = _labels(m.group(2)) if m.group(2) else ()
        if labels is None:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        if math.isfinite(value):
            out.append(Sample(m.group(1), labels, value))
    return out


def total(samples: list[Sample], name: str) -> float | None:
    """The sum of a name's samples over every label set; None where the page has none."""
    values = [s.value for s in samples if s.name == name]
    return sum(values) if values else None


def by_label(samples: list[Sample], name: str, key: str) -> dict[str, float]:
    """A name's samples summed per value of one label (vLLM's per-position counters by "position")."""
    out: dict[str, float] = {}
    for s in samples:
        value = s.label(key) if s.name == name else None
        if value is not None:
            out[value] = out.get(value, 0.0) + s.value
    return out
