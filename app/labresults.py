"""The prompt lab's figures in plain Python: prompts in, runs, the best depth, tables out."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from engine import (
    BenchPrompt,
    BoxProfile,
    DraftlightError,
    RunStats,
    best_depth,
    conditional_acceptance,
    load_prompts_file,
)

DEFAULT_DEPTHS = (0, 1, 2, 3)

# ---- prompts ----------------------------------------------------------------------------


def parse_prompts(text: str) -> list[BenchPrompt]:
    """Pasted prompts: one per line, or JSONL of {"category", "prompt"}, or Spec-Bench's question.jsonl.

    The text is JSON lines when its first line is a JSON object; then every line must be.
    """
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise DraftlightError("There are no prompts: paste one per line, or load a file.")
    json_lines = _json_object(lines[0][1]) is not None
    prompts: list[BenchPrompt] = []
    counts: dict[str, int] = {}
    for number, line in lines:
        name = None
        if not json_lines:
            prompt, category = line, "prompt"
        else:
            item = _json_object(line)
            if item is None:
                raise DraftlightError(f"Line {number} is not a JSON object, and the lines above it are.")
            if "turns" in item:  # Spec-Bench: the first turn
                turns = item.get("turns") or [""]
                prompt, category = turns[0], str(item.get("category", "spec-bench"))
                if "question_id" in item:
                    name = f"{category}-{item['question_id']}"
            elif "prompt" in item:
                prompt, category = item["prompt"], str(item.get("category", "prompt"))
            else:
                raise DraftlightError(f'Line {number} has neither "prompt" nor "turns".')
            if not isinstance(prompt, str) or not prompt.strip():
                raise DraftlightError(f"Line {number} has an empty prompt.")
        counts[category] = counts.get(category, 0) + 1
        name = name or (category if counts[category] == 1 else f"{category}-{counts[category]}")
        prompts.append(BenchPrompt(name, category, prompt))
    return prompts


def _json_object(line: str) -> dict | None:
    if not line.startswith("{"):
        return None
    try:
        item = json.loads(line)
    except json.JSONDecodeError:
        return None
    return item if isinstance(item, dict) else None


def load_prompts(path: str | Path) -> list[BenchPrompt]:
    """A prompts file: JSONL or Spec-Bench through the ruler's reader; plain lines otherwise."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise DraftlightError(f"Cannot read the prompts file {path}: {exc.strerror}.") from exc
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return load_prompts_file(path) if first.startswith("{") else parse_prompts(text)


def as_jsonl(prompts: list[BenchPrompt]) -> str:
    """Prompts as JSONL, which parse_prompts reads back (prompts may hold new lines)."""
    return "\n".join(json.dumps({"category": p.category, "prompt": p.text}, ensure_ascii=False) for p in prompts)


# ---- runs and the best depth (no Qt) --------------------------------------------------------


@dataclass(frozen=True)
class LabRequest:
    prompts: tuple[BenchPrompt, ...]
    depths: tuple[int, ...] = DEFAULT_DEPTHS
    max_tokens: int = 64


@dataclass(frozen=True)
class LabRun:
    """One prompt at one depth: the engine's RunStats and each round's (drafted, accepted)."""

    prompt_index: int
    prompt: BenchPrompt
    depth: int
    stats: RunStats
    rounds: tuple[tuple[int, int], ...]


def best_for_prompt(runs: list[LabRun], profile: BoxProfile | None) -> tuple[int, str] | None:
    """The best depth for one prompt's runs, and what it rests on: "profile" or "measured".

    With a profile: engine.tuner.best_depth on the conditional acceptance measured over
    all the prompt's rounds. Without: the depth with the highest measured decode tok/s.
    """
    if not runs:
        return None
    if profile is not None:
        acceptance = conditional_acceptance([r for run in runs for r in run.rounds], max(run.depth for run in runs))
        return best_depth(profile, acceptance)[0], "profile"
    return max(runs, key=lambda run: run.stats.decode_tps).depth, "measured"


@dataclass(frozen=True)
class Column:
    header: str
    value: Callable[[LabRun], object]  # the raw figure (None where there is none)
    show: Callable[[object], str] = str
    text: bool = False  # sorts as text; numbers sort as numbers


def _percent(v: object) -> str:
    return f"{v:.1%}"


def _fixed(places: int) -> Callable[[object], str]:
    return lambda v: f"{v:.{places}f}"


@dataclass
class LabResults:
    """The runs so far and the columns that show them (no Qt)."""

    profile: BoxProfile | None = None  # this pair's box profile, where one is saved
    max_depth: int = max(DEFAULT_DEPTHS)
    runs: list[LabRun] = field(default_factory=list)

    def columns(self) -> list[Column]:
        accept = [
            Column(
                f"Accept @{i + 1}",
                lambda r, i=i: r.stats.acceptance_per_position[i] if i < len(r.stats.acceptance_per_position) else None,
                _percent,
            )
            for i in range(self.max_depth)
        ]
        return [
            Column("#", lambda r: r.prompt_index + 1),
            Column("Category", lambda r: r.prompt.category, text=True),
            Column("Prompt", lambda r: _first_line(r.prompt.text), text=True),
            Column("Depth", lambda r: r.depth),
            Column("Tokens", lambda r: r.stats.generated_tokens),
            *accept,
            Column("Mean accepted length", lambda r: r.stats.mean_accepted_length, _fixed(2)),
            Column("Decode tok/s", lambda r: r.stats.decode_tps, _fixed(1)),
            Column("By content", lambda r: r.stats.content_summary() or None, text=True),
            Column("Speedup vs depth 0", self.speedup, lambda v: f"{v:.2f}×"),
            Column("Best depth", lambda r: self.best(r.prompt_index)[0]),
            Column("Best from", lambda r: self.best(r.prompt_index)[1], text=True),
        ]

    def runs_of(self, prompt_index: int) -> list[LabRun]:
        return [r for r in self.runs if r.prompt_index == prompt_index]

    def best(self, prompt_index: int) -> tuple[int, str]:
        return best_for_prompt(self.runs_of(prompt_index), self.profile) or (0, "")

    def speedup(self, run: LabRun) -> float | None:
        plain = next((r for r in self.runs_of(run.prompt_index) if r.depth == 0), None)
        if plain is None or plain.stats.decode_tps <= 0:
            return None
        return run.stats.decode_tps / plain.stats.decode_tps

    def write_csv(self, path: Path, order: list[int] | None = None) -> None:
        """Raw figures, full precision, rows in `order` (the table's sorting)."""
        columns = self.columns()
        with Path(path).open("w", newline="", encoding="utf-8") as f:
            out = csv.writer(f)
            out.writerow([c.header for c in columns])
            for i in order if order is not None else range(len(self.runs)):
                out.writerow(["" if (v := c.value(self.runs[i])) is None else v for c in columns])

    def markdown(self, order: list[int] | None = None) -> str:
        """The table as shown, as a markdown table."""
        columns = self.columns()
        lines = ["| " + " | ".join(c.header for c in columns) + " |", "|" + "---|" * len(columns)]
        for i in order if order is not None else range(len(self.runs)):
            cells = [self.shown(c, self.runs[i]).replace("|", "\\|") for c in columns]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"

    @staticmethod
    def shown(column: Column, run: LabRun) -> str:
        value = column.value(run)
        return "—" if value is None else column.show(value)


def _first_line(text: str, width: int = 60) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"
