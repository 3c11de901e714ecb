"""Acceptance by content: a reply cut into parts a reader recognises, with each part's figures.

Acceptance is a property of the text: code and JSON accept far more drafts than prose. A
reply is cut into thinking (`<think>` ... `</think>`), fenced code blocks (a `json` fence
is JSON), unfenced JSON objects and arrays, lists, and prose. Each token belongs to the
part its first character falls in; an accepted draft counts where its token landed, and a
round's refused drafts where the target's replacing token did, so the parts add up to
the reply: tokens, drafted, accepted and rounds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from engine.events import ContentStats, RoundEvent, TokenEvent

_FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+#.-]*)")
_ITEM = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+\S")
_THINK = re.compile(r"<think>(.*?)(</think>|$)", re.S)


@dataclass(frozen=True)
class Segment:
    kind: str
    start: int  # character offsets into the reply's text
    end: int


def segment_text(text: str) -> list[Segment]:
    """The reply's parts in order, covering every character; neighbours of one kind merged."""
    marks: list[Segment] = []
    pos = 0
    for m in _THINK.finditer(text):
        if not m.group(0):
            continue
        marks.extend(_outside_thinking(text, pos, m.start()))
        marks.append(Segment("thinking", m.start(), m.end()))
        pos = m.end()
    marks.extend(_outside_thinking(text, pos, len(text)))
    merged: list[Segment] = []
    for s in marks:
        if s.end <= s.start:
            continue
        if merged and merged[-1].kind == s.kind and merged[-1].end == s.start:
            merged[-1] = Segment(s.kind, merged[-1].start, s.end)
        else:
            merged.append(s)
    return merged


def _outside_thinking(text: str, start: int, end: int) -> list[Segment]:
    lines = _lines(text, start, end)
    out: list[Segment] = []
    i = 0
    while i < len(lines):
        a, b = lines[i]
        line = text[a:b]
        fence = _FENCE.match(line)
        if fence:
            j = i + 1
            while j < len(lines) and not text[lines[j][0] : lines[j][1]].strip().startswith(fence.group(1)):
                j += 1
            last = min(j, len(lines) - 1)
            kind = "json" if fence.group(2).lower() in ("json", "jsonl", "json5") else "code"
            out.append(Segment(kind, a, lines[last][1]))
            i = last + 1
            continue
        stripped = line.lstrip()
        if stripped[:1] in ("{", "["):
            close = _json_end(text, a + len(line) - len(stripped), end)
            if close is not None:
                out.append(Segment("json", a, close))
                while i < len(lines) and lines[i][1] <= close:
                    i += 1
                if i < len(lines) and lines[i][0] < close:  # the JSON ended mid-line: the rest is prose
                    out.append(Segment("prose", close, lines[i][1]))
                    i += 1
                continue
        if _ITEM.match(line):
            j = i + 1
            while j < len(lines) and _in_list(text, lines, j):
                j += 1
            out.append(Segment("list", a, lines[j - 1][1]))
            i = j
            continue
        out.append(Segment("prose", a, b))
        i += 1
    return out


def _in_list(text: str, lines: list[tuple[int, int]], j: int) -> bool:
    """Line j goes on a list: an item, an indented continuation, or a blank line between items."""
    line = text[lines[j][0] : lines[j][1]]
    if _ITEM.match(line) or (line[:1] in (" ", "\t") and line.strip()):
        return True
    return not line.strip() and j + 1 < len(lines) and bool(_ITEM.match(text[lines[j + 1][0] : lines[j + 1][1]]))


def _lines(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """(start, end) of each line in text[start:end], the newline included."""
    out = []
    a = start
    while a < end:
        nl = text.find("\n", a, end)
        b = end if nl < 0 else nl + 1
        out.append((a, b))
        a = b
    return out


def _json_end(text: str, start: int, end: int) -> int | None:
    """Where a JSON value starting at `start` ends, if it parses (or runs to the reply's end
    looking like one: a reply cut by max-tokens mid-object)."""
    depth, in_string, escaped = 0, False, False
    for i in range(start, end):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                try:
                    json.loads(text[start : i + 1])
                except ValueError:
                    return None
                return i + 1
    return end if end == len(text) and '":' in text[start:end] else None


def acceptance_by_segment(tokens: list[TokenEvent], rounds: Iterable[RoundEvent]) -> tuple[ContentStats, ...]:
    """Each part of a reply with its tokens, drafts, acceptances and rounds.

    Counts come from the rounds, so the parts add up to the reply's figures even where a
    round's last token was not shown (a stop string's tail): what has no token of its own
    counts in the reply's last part.
    """
    text = "".join(t.text for t in tokens)
    segments = segment_text(text) or [Segment("prose", 0, 0)]
    acc = [dict(tokens=0, decoded_tokens=0, drafted=0, accepted=0, rounds=0.0) for _ in segments]
    where: dict[tuple[int, int], dict] = {}  # (round, position) -> its token's part
    offset, k = 0, 0
    for t in tokens:
        while k + 1 < len(segments) and offset >= segments[k].end:
            k += 1
        acc[k]["tokens"] += 1
        where[(t.round_index, t.position)] = acc[k]
        offset += len(t.text)
    last = acc[-1]
    for r in rounds:
        if r.from_prefill:
            continue
        shown = [where[(r.round_index, p)] for p in range(r.accepted + 1) if (r.round_index, p) in where]
        for part in shown:
            part["decoded_tokens"] += 1
            part["rounds"] += 1 / len(shown)
        if not shown:
            last["rounds"] += 1
        for p in range(r.accepted):
            part = where.get((r.round_index, p), last)
            part["drafted"] += 1
            part["accepted"] += 1
        if r.drafted > r.accepted:  # refused drafts count where the target's own token landed
            where.get((r.round_index, r.accepted), last)["drafted"] += r.drafted - r.accepted
    counts = ("tokens", "decoded_tokens", "drafted", "accepted")
    return tuple(
        ContentStats(s.kind, **{k: int(a[k]) for k in counts}, rounds=a["rounds"], start=s.start, end=s.end)
        for s, a in zip(segments, acc)
    )
