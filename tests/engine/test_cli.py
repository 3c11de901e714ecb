"""`draftlight chat`: JSON lines for programs, text and a summary for people."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from engine import MAX_DEPTH, GenerationConfig, Message, TokenEvent

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "Write a bubble sort in C++."
TOKEN_FIELDS = {
    "type",
    "token_id",
    "text",
    "kind",
    "round",
    "position",
    "target_prob",
    "draft_prob",
    "rejected_id",
    "rejected_text",
}
STATS_FIELDS = {"type", "decode_tps", "acceptance_per_position", "finish_reason", "generated_tokens", "token_ids"}


def chat(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DRAFTLIGHT_CACHE": str(tmp_path / "cache"),
        "HF_HUB_OFFLINE": "1",
    }
    env.pop("NO_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", "chat", PROMPT, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )


def engine_reply(engine, **config):
    prompt = engine.prompt_ids([Message("user", PROMPT)])
    return list(engine.stream(prompt, GenerationConfig(**config)))


@pytest.fixture(scope="module")
def json_run(tmp_path_factory, target_path, drafter_path):
    tmp_path = tmp_path_factory.mktemp("cli")
    result = chat(
        "--json", "--max-tokens", "8", "--depth", "2", "--target", str(target_path), "--drafter", str(drafter_path),
        tmp_path=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result


def test_json_lines_are_tokens_then_stats(json_run):
    lines = [json.loads(line) for line in json_run.stdout.splitlines()]
    tokens, stats = lines[:-1], lines[-1]
    assert len(tokens) == 8
    for t in tokens:
        assert t["type"] == "token"
        assert t.keys() >= TOKEN_FIELDS
        assert t["kind"] in {"accepted", "replaced", "bonus", "plain"}
        assert isinstance(t["token_id"], int) and isinstance(t["text"], str)
        assert 0.0 < t["target_prob"] <= 1.0
        if t["kind"] == "replaced":
            assert isinstance(t["rejected_id"], int) and t["rejected_id"] != t["token_id"]
            assert isinstance(t["rejected_text"], str)
        else:
            assert t["rejected_id"] is None and t["rejected_text"] is None
        if t["kind"] in ("accepted", "replaced"):
            assert 0.0 <= t["draft_prob"] <= 1.0
        else:
            assert t["draft_prob"] is None
    # depth 2: the prefill's first token is plain; after it only a round the budget left no draft for is
    assert tokens[0]["kind"] == "plain"
    assert {t["kind"] for t in tokens[1:-1]} <= {"accepted", "replaced", "bonus"}
    assert (tokens[0]["round"], tokens[0]["position"]) == (0, 0)
    for a, b in itertools.pairwise(tokens):  # positions count up within a round and restart with the next
        assert (b["round"], b["position"]) in ((a["round"], a["position"] + 1), (a["round"] + 1, 0))
    assert stats["type"] == "stats"
    assert stats.keys() >= STATS_FIELDS
    assert stats["finish_reason"] == "max_tokens"
    assert stats["generated_tokens"] == 8
    assert stats["decode_tps"] > 0
    assert stats["depth"] == 2
    assert len(stats["acceptance_per_position"]) == 2
    assert all(0.0 <= a <= 1.0 for a in stats["acceptance_per_position"])
    assert stats["token_ids"] == [t["token_id"] for t in tokens]
    assert "".join(t["text"] for t in tokens) == "Certainly! Below is a simple implementation of"


def test_json_tokens_are_the_engines(json_run, engine):
    lines = [json.loads(line) for line in json_run.stdout.splitlines()]
    events = engine_reply(engine, max_tokens=8, depth=2)
    mine = [e for e in events if isinstance(e, TokenEvent)]
    theirs = lines[:-1]
    assert [t["token_id"] for t in theirs] == [e.token_id for e in mine]
    # the same drafter and depth make the same rounds, so the provenance agrees too
    assert [(t["kind"], t["round"], t["position"]) for t in theirs] == [
        (e.kind.value, e.round_index, e.position) for e in mine
    ]
    assert lines[-1]["acceptance_per_position"] == list(events[-1].acceptance_per_position)


def test_json_output_has_nothing_on_stderr(json_run):
    assert json_run.stderr == ""


def test_plain_output_is_the_text_and_a_summary(tmp_path, target_path, engine, json_run):
    result = chat("--max-tokens", "4", "--drafter", "none", "--target", str(target_path), tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    # greedy text does not depend on the depth: the first four tokens of the depth-2 run
    expected = "".join(json.loads(line)["text"] for line in json_run.stdout.splitlines()[:4])
    assert expected == "Certainly! Below is"
    assert result.stdout == expected + "\n"  # not a terminal: no colour codes
    n_prompt = len(engine.prompt_ids([Message("user", PROMPT)]))
    summary = result.stderr.strip().splitlines()
    assert len(summary) == 1
    assert re.fullmatch(
        rf"\[4 tokens, decode [\d.]+ tok/s, end-to-end [\d.]+ tok/s, prefill \d+ ms for {n_prompt} tokens; depth 0, "
        r"acceptance 0% \(per position -\), mean accepted length 1\.00; max_tokens\]",
        summary[0],
    ), summary[0]


def test_a_bad_depth_is_refused_by_the_parser(tmp_path):
    result = chat("--depth", "9", tmp_path=tmp_path)
    assert result.returncode == 2
    assert f"depth must be 0-{MAX_DEPTH} or auto" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_break_even_gauge_is_in_the_stats_and_the_summary(tmp_path, monkeypatch, target_path, drafter_path):
    """With a saved box profile, the stats hold this reply against the target's plain speed here."""
    from engine import RunStats, gauge
    from engine.measure.profile import save_profile
    from engine.runtime import RuntimeOptions
    from tests.engine.box_profiles import HOPELESS, profile

    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path / "cache"))  # the folder chat() gives the child
    saved = profile(target_path, drafter_path, RuntimeOptions(), *HOPELESS)
    save_profile(saved)
    args = ("--max-tokens", "8", "--depth", "2", "--target", str(target_path), "--drafter", str(drafter_path))
    result = chat("--json", *args, tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    line = json.loads(result.stdout.splitlines()[-1])
    expected = gauge([RunStats.from_json(line)], saved.plain_pass_s, saved.basis())
    assert line["plain_tps"] == pytest.approx(1 / saved.plain_pass_s) == pytest.approx(expected.plain_tps)
    assert line["speedup"] == pytest.approx(expected.speedup) and line["verdict"] == expected.verdict()
    text = chat(*args, tmp_path=tmp_path)
    assert text.returncode == 0, text.stderr
    last = text.stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        r"\[speculation (saves \d+% of the time|is \d+% slower than plain decoding) here \([^)]*\)(: .*)?\]", last
    )


def test_chat_sizes_its_context_like_the_app_unless_told():
    from engine.cli import build_parser

    parse = build_parser().parse_args
    assert parse(["chat", "hi"]).ctx == 0  # 0: sized by engine/runtime/contextsize.py, as the app's Auto
    assert parse(["chat", "hi", "--ctx", "auto"]).ctx == 0
    assert parse(["chat", "hi", "--ctx", "2048"]).ctx == 2048
    assert parse(["serve", "--ctx", "auto"]).ctx == 0 and parse(["serve"]).ctx == 4096


def test_chat_default_context_is_the_trained_length_where_memory_allows(smollm_path):
    from engine import Engine
    from engine.arguments import runtime_options
    from engine.cli import build_parser

    options = runtime_options(build_parser().parse_args(["chat", "hi", "--target", str(smollm_path)]))
    engine = Engine.load(smollm_path, "none", options)
    try:  # a 135M model's KV cache: far below a quarter of this machine's free memory
        assert engine.ctx.n_ctx == min(engine.target.n_ctx_train, 32_768) == 8192
    finally:
        engine.close()
