"""Real replies on the real default pair fill the ledger; the same drafter against a changed
target (the project's own GGUF with layers swapped, made at test time) raises the warning
with the cause "the target's file changed". Slow: loads the pair twice."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from changed_target import changed_copy

from engine import Engine, GenerationConfig, Message, RunStats
from engine.ledger import drift as drift_module
from engine.ledger import recording
from engine.ledger.fingerprint import identity
from engine.ledger.report import PairLedger
from engine.ledger.store import LedgerReply

# Code from the first token, so that a short reply is all of one content kind.
ONLY_CODE = "Reply with the code alone, no explanation: "
CODE_PROMPTS = (
    ONLY_CODE + "a Python function that merges two sorted lists.",
    ONLY_CODE + "a bubble sort in C++.",
    ONLY_CODE + "a JavaScript function that debounces another function.",
)
AFTER = (*CODE_PROMPTS, ONLY_CODE + "a Rust function that reverses a string.")  # past CHANGE_DRAFTS drafts
TOKENS = 48
BASELINE_DRAFTS = 100  # three replies: the test's baseline, not the thousands of drafts a user's needs
CHANGE_DRAFTS = 100  # the replies since the change are judged on as few


def _replies(engine: Engine, prompts: tuple[str, ...]) -> list[RunStats]:
    out = []
    for text in prompts:
        ids = engine.prompt_ids([Message("user", text)])
        *_, stats = engine.stream(ids, GenerationConfig(max_tokens=TOKENS, depth=3))
        assert isinstance(stats, RunStats)
        out.append(stats)
    return out


@pytest.fixture(scope="module")
def ledger_run(target_path: Path, drafter_path: Path, tmp_path_factory) -> Iterator[tuple]:
    folder = tmp_path_factory.mktemp("ledger")
    before = os.environ["DRAFTLIGHT_LEDGER"]
    os.environ["DRAFTLIGHT_LEDGER"] = str(folder / "ledger.sqlite3")
    try:
        engine = Engine.load(target_path, drafter_path)
        try:
            original = _replies(engine, CODE_PROMPTS)
            kept = recording.ledger().replies()
        finally:
            engine.close()
        changed = changed_copy(target_path, folder / "changed")
        engine = Engine.load(changed, drafter_path)
        try:
            after = _replies(engine, AFTER)
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(drift_module, "BASELINE_DRAFTS", BASELINE_DRAFTS)
                mp.setattr(drift_module, "CHANGE_DRAFTS", CHANGE_DRAFTS)
                view = engine.ledger_view()
        finally:
            engine.close()
        yield original, kept, after, view, changed
    finally:
        os.environ["DRAFTLIGHT_LEDGER"] = before


def test_real_replies_fill_the_ledger(ledger_run, target_path: Path, drafter_path: Path) -> None:
    original, kept, *_ = ledger_run
    assert len(kept) == len(CODE_PROMPTS)
    for stats, reply in zip(original, kept, strict=True):
        assert isinstance(reply, LedgerReply) and reply.source == "engine"
        assert (reply.drafted, reply.accepted) == (stats.drafted, stats.accepted)
        assert reply.drafted_per_position == stats.drafted_per_position
        assert reply.accepted_per_position == stats.accepted_per_position
        assert reply.content == {c.kind: (c.drafted, c.accepted) for c in stats.by_content if c.drafted}
        assert sum(d for d, _ in reply.content.values()) == reply.drafted
        assert reply.setup.target_fingerprint == identity(target_path).fingerprint
        assert reply.setup.drafter_fingerprint == identity(drafter_path).fingerprint
        assert (reply.setup.sampling, reply.setup.depth, reply.setup.drafter_kind) == ("greedy", "3", "model")


def test_a_changed_target_raises_the_warning_naming_the_target(ledger_run, target_path: Path) -> None:
    _, _, _, view, changed = ledger_run
    assert identity(changed).fingerprint != identity(target_path).fingerprint
    assert identity(changed).name == identity(target_path).name  # the same pair by name
    assert isinstance(view, PairLedger) and view.replies == len(CODE_PROMPTS) + len(AFTER)
    stale = [d for d in view.drift if d.stale]
    assert stale and {d.changed for d in stale} == {"target"}
    fallen = stale[0]
    assert fallen.recent.acceptance < fallen.baseline.acceptance - 0.10
    assert view.warnings[0] == fallen.sentence()
    assert fallen.sentence().startswith(f"Acceptance on {fallen.kind} fell from {fallen.baseline.acceptance:.0%}")
    assert "since the target's file changed on" in fallen.sentence()
    assert [row.changed for row in view.history] == [(), ("target file changed",)]
