"""Hostile replay files: wrong types, missing fields, huge sizes, deep nesting, bad UTF-8 and
seeded mutations of a real-shaped replay. Each case ends within its budget with either a
replay the teaching window steps through to the end, or one sentence; never an exception.

Mutations run in-process (a subprocess each would cost a second apiece), each under a
deadline on a thread; the huge files run in a child under a memory cap, as bounded.py does.
"""

from __future__ import annotations

import copy
import json
import random
import threading
from pathlib import Path

import pytest

from engine.errors import DraftlightError
from engine.replay import Replay, load
from tests.engine.replay_samples import sample_replay
from tests.fuzz.bounded import case_count, run_bounded

CASE_DEADLINE_S = 5.0
DEEP = "<deep nesting goes here>"
HOSTILE_VALUES = [
    None, True, -1, 0, 2**70, -(2**40), 1e308, 0.5, "", "x" * 5000, "<h1>", [], {}, [[[[]]]], {"a": {"b": {}}},
    [1, 2, 3], "NaN", "\udcff",
]  # fmt: skip


def paths_of(value, depth: int = 40):
    """Every (container, key) inside a JSON value, down to `depth`, for picking a place to break."""
    found, stack = [], [(value, 0)]
    while stack:
        node, level = stack.pop()
        if level >= depth:
            continue
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in items:
            found.append((node, key))
            stack.append((child, level + 1))
    return found


def mutate(rng: random.Random, base: dict) -> bytes:
    """One hostile variant of a replay, as the bytes of a file."""
    data = json.loads(json.dumps(base))
    how = rng.choice(["set", "set", "delete", "truncate", "flip", "utf8", "nest", "grow", "swap"])
    places = paths_of(data)
    if how in ("set", "delete", "nest", "swap"):
        for _ in range(rng.randint(1, 3)):
            container, key = rng.choice(places)
            if how == "delete":
                if isinstance(container, dict):
                    container.pop(key, None)
                elif container:
                    container.pop(rng.randrange(len(container)))
            elif how == "nest":
                container[key] = DEEP if rng.random() < 0.5 else [container[key]]
            elif how == "swap":
                container[key] = copy.deepcopy(rng.choice(places)[0])
            else:
                container[key] = rng.choice(HOSTILE_VALUES)
            places = paths_of(data)
            if not places:
                break
    if how == "grow":  # many rounds, or long texts, within the file cap
        if rng.random() < 0.5:
            data["rounds"] = data["rounds"] * rng.randint(20, 60)
        else:
            data["pieces"][next(iter(data["pieces"]))] = "y" * rng.choice([1000, 1025, 100_000])
    raw = json.dumps(data, ensure_ascii=False).encode("utf-8", "surrogatepass")
    depth = rng.choice([30, 3000, 300_000])  # within, at and far past Python's recursion limit
    raw = raw.replace(json.dumps(DEEP).encode(), b"[" * depth + b"]" * depth)
    if how == "truncate":
        raw = raw[: rng.randrange(len(raw))]
    elif how == "flip":
        b = bytearray(raw)
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        raw = bytes(b)
    elif how == "utf8":
        at = rng.randrange(len(raw))
        raw = raw[:at] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00"]) + raw[at:]
    return raw


def load_within_deadline(path: Path) -> Replay | str:
    """The replay, or the sentence refusing it; fails the test on a hang or any other exception."""
    result: list = []

    def run() -> None:
        try:
            result.append(load(path))
        except DraftlightError as exc:
            result.append(str(exc))
        except BaseException as exc:  # the contract's "traceback"
            result.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(CASE_DEADLINE_S)
    assert result, f"{path.name}: did not end within {CASE_DEADLINE_S} s"
    assert not isinstance(result[0], BaseException), f"{path.name}: raised {result[0]!r}"
    return result[0]


def step_through(teach, path: Path) -> None:
    """Open the replay in the teaching window and step to its end, as Play would."""
    assert teach.open_replay_file(path)
    for _ in range(2 * len(teach.replay.steps) + 2):
        teach.step()
    assert teach.stats is not None


@pytest.fixture(scope="module")
def base() -> dict:
    return sample_replay(rounds=10).to_json()


@pytest.fixture
def teach(qtbot):
    from app.teaching import TeachingWindow

    window = TeachingWindow()
    qtbot.addWidget(window)
    return window


def test_seeded_mutations_load_or_say_why(tmp_path, base, teach):
    rng = random.Random(1414)
    refused = shown = 0
    for case in range(case_count(fast=80, full=800)):
        path = tmp_path / f"case{case}.json"
        path.write_bytes(mutate(rng, base))
        outcome = load_within_deadline(path)
        if isinstance(outcome, str):
            assert outcome.startswith(f"{path.name} ") and "\n" not in outcome and outcome.endswith("."), outcome
            assert len(outcome) < 400, outcome
            refused += 1
        else:
            step_through(teach, path)
            shown += 1
    assert refused and shown  # both sides of the schema were exercised


def test_a_real_replay_mutated(tmp_path, smollm_path, teach):
    """The same mutations on a replay recorded from a real model (text, candidates and all)."""
    from engine import Engine, GenerationConfig, Message, Stepper, record_replay

    engine = Engine.load(smollm_path, "ngram")
    prompt = engine.prompt_ids([Message("user", "Count from one to twenty in words.")])
    stepper = Stepper(engine.stream(prompt, GenerationConfig(max_tokens=24, depth=3, top_candidates=5)))
    while stepper.step() is not None:
        pass
    real = record_replay(stepper.steps, stepper.stats, engine.target.display, "smollm", "ngram", "p", {"depth": 3})
    engine.close()
    step_through(teach, real.save(tmp_path / "real.json"))
    rng = random.Random(2026)
    for case in range(case_count(fast=40, full=400)):
        path = tmp_path / f"real{case}.json"
        path.write_bytes(mutate(rng, real.to_json()))
        outcome = load_within_deadline(path)
        if isinstance(outcome, str):
            assert outcome.startswith(f"{path.name} ") and "\n" not in outcome, outcome
        else:
            step_through(teach, path)


CHILD = """
import sys
from engine.errors import DraftlightError
from engine.replay import load
try:
    load(sys.argv[1])
except DraftlightError as exc:
    print(exc, file=sys.stderr)
    sys.exit(1)
"""


@pytest.mark.parametrize("shape", ["whole", "one_token", "just_under"])
def test_huge_replays_are_refused_within_a_small_budget(tmp_path, shape):
    path = tmp_path / f"{shape}.json"
    with open(path, "wb") as f:
        head = b'{"format": "draftlight-replay", "version": 1, "rounds": [], "pieces": {"1": "'
        f.write(head)
        if shape == "whole":  # 200 MB of rounds, as the file
            f.seek(200 * 2**20)
            f.write(b'"}}')
        elif shape == "one_token":  # one 200 MB token
            f.write(b"z" * (200 * 2**20))
            f.write(b'"}}')
        else:  # a 15 MB token: under the file cap, over the token cap
            f.write(b"z" * (15 * 2**20))
            f.write(b'"}, "stats": {}}')
    outcome = run_bounded(["-c", CHILD, str(path)], timeout_s=30, memory_mb=1024)
    assert outcome.problems() == []
    assert outcome.returncode == 1
    sentence = outcome.stderr.strip()
    if shape == "just_under":
        assert "characters long, over the limit of 1,024" in sentence
    else:
        assert "MB, too large for a replay (the limit is 16 MB)" in sentence
