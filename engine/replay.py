"""Replays: a reply recorded round by round, to be shown later without the models.

The file holds the rendered prompt, every round's drafts and verdict, each token's
probabilities and top candidates, the timings, and the text of every token it mentions,
so a teacher can step through a recorded session on a laptop that has no model.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from engine.errors import DraftlightError
from engine.events import Event, RoundEvent, RunStats, TokenEvent
from engine.replayschema import MAX_FILE_BYTES, Invalid, check_replay
from engine.stepping import RoundStep, Stepper

FORMAT = "draftlight-replay"
VERSION = 1


@dataclass
class Replay:
    target: str
    drafter: str
    prompt: str  # the rendered prompt text the target read
    config: dict
    steps: list[RoundStep]
    stats: RunStats
    pieces: dict[int, str] = field(default_factory=dict)  # token id -> text, for every id mentioned
    plain_pass_ms: float | None = None  # one plain target pass on the recording machine, if known

    def piece(self, token: int) -> str:
        return self.pieces.get(token, f"<{token}>")

    def events(self) -> Iterator[Event]:
        """The recorded stream, event for event as the engine yielded it."""
        for step in self.steps:
            yield from step.tokens
            yield step.round
        yield self.stats

    def to_json(self) -> dict:
        return {
            "format": FORMAT,
            "version": VERSION,
            "target": self.target,
            "drafter": self.drafter,
            "prompt": self.prompt,
            "config": self.config,
            "plain_pass_ms": self.plain_pass_ms,
            "rounds": [step.round.to_json() | {"tokens": [t.to_json() for t in step.tokens]} for step in self.steps],
            "stats": self.stats.to_json(),
            "pieces": {str(k): v for k, v in sorted(self.pieces.items())},
        }

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_json(), ensure_ascii=False, indent=1), encoding="utf-8")
        return path


def mentioned_tokens(steps: list[RoundStep]) -> set[int]:
    """Every token id a replay shows: drafts, emitted tokens, rejected drafts, candidates."""
    ids: set[int] = set()
    for step in steps:
        ids.update(step.round.draft_tokens)
        for t in step.tokens:
            ids.add(t.token_id)
            if t.rejected_id is not None:
                ids.add(t.rejected_id)
            ids.update(i for i, _ in t.target_top)
            ids.update(i for i, _ in t.draft_top)
    return ids


def record(
    steps: list[RoundStep],
    stats: RunStats,
    piece,
    target: str,
    drafter: str,
    prompt: str,
    config: dict,
    plain_pass_ms: float | None = None,
) -> Replay:
    """A replay of a finished reply; `piece(token_id) -> str` names every token mentioned."""
    pieces = {t: piece(t) for t in mentioned_tokens(steps)}
    return Replay(target, drafter, prompt, config, list(steps), stats, pieces, plain_pass_ms)


def recorded(
    events: Iterable[Event],
    piece,
    target: str,
    drafter: str,
    prompt: str,
    config: dict,
    plain_pass_ms: float | None = None,
) -> Iterator[Event | Replay]:
    """The stream unchanged, with the reply's replay yielded just before its RunStats: a chat
    reply kept so it can be stepped through later, as teaching mode records one.
    `piece` is called on the engine's thread, where the models are, before the stats leave."""
    seen: list[Event] = []
    for event in events:
        if isinstance(event, RunStats):
            stepper = Stepper([*seen, event])
            while stepper.step() is not None:
                pass
            yield record(stepper.steps, event, piece, target, drafter, prompt, config, plain_pass_ms)
        else:
            seen.append(event)
        yield event


def load(path: str | Path) -> Replay:
    """Read a replay file; a file that is not one, or breaks the schema, gets a sentence saying so.

    The size is checked before a byte is read, and every field before an event is made
    (engine/replayschema.py holds the limits and why).
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise DraftlightError(f"{path.name} is not a file: choose a Draftlight replay (.json).")
        if size > MAX_FILE_BYTES:
            raise DraftlightError(
                f"{path.name} is {size / 2**20:,.0f} MB, too large for a replay (the limit is "
                f"{MAX_FILE_BYTES // 2**20} MB): it is not one Draftlight recorded."
            )
        raw = path.read_bytes()
    except OSError as exc:
        raise DraftlightError(f"Cannot read {path}: {exc.strerror or exc}.") from exc
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise DraftlightError(
            f"{path.name} is not a Draftlight replay (not UTF-8 text at byte {exc.start:,})."
        ) from exc
    except RecursionError as exc:
        raise DraftlightError(f"{path.name} is not a Draftlight replay (its JSON is nested too deeply).") from exc
    except ValueError as exc:
        raise DraftlightError(f"{path.name} is not a Draftlight replay (not JSON: {exc}).") from exc
    return from_json(data, path.name)


def from_json(data, name: str) -> Replay:
    """A replay's parsed JSON, checked field by field; `name` says where it came from in the sentences."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise DraftlightError(f"{name} is not a Draftlight replay (no '{FORMAT}' marker).")
    version = data.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version > VERSION:
        raise DraftlightError(f"{name} was written by a newer Draftlight (replay version {version}).")
    if version != VERSION or isinstance(version, bool):
        raise DraftlightError(f"{name} is a damaged replay: its version is {str(version)[:40]!r}, not {VERSION}.")
    try:
        check_replay(data)
        steps = [
            RoundStep(RoundEvent.from_json(r), tuple(TokenEvent.from_json(t) for t in r["tokens"]))
            for r in data["rounds"]
        ]
        stats = RunStats.from_json(data["stats"])
        pieces = {int(k): v for k, v in data.get("pieces", {}).items()}
    except Invalid as exc:
        raise DraftlightError(f"{name} is a damaged replay: {exc}.") from exc
    except (KeyError, TypeError, ValueError) as exc:  # the schema should have said it: a last guard
        raise DraftlightError(f"{name} is a damaged replay ({type(exc).__name__}: {exc}).") from exc
    return Replay(
        data.get("target", "?"),
        data.get("drafter", "?"),
        data.get("prompt", ""),
        data.get("config", {}),
        steps,
        stats,
        pieces,
        data.get("plain_pass_ms"),
    )
