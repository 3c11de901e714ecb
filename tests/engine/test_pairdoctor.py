"""The pairing doctor on the real models: the default pair, incompatible drafters, the probe against
a direct run of the engine, and `draftlight pair` in text and JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine import GenerationConfig, Message, RunStats
from engine.measure.costmodel import best_depth, conditional_acceptance
from engine.measure.profile import save_profile
from engine.pairdoctor import pair_report
from engine.runtime import RuntimeOptions
from tests.conftest import PROMPTS
from tests.engine import box_profiles
from tests.engine.pair_cli import run_pair

ROOT = Path(__file__).resolve().parents[2]
TOKENS = 16


@pytest.fixture
def cache(monkeypatch, tmp_path) -> Path:
    """A private cache: no box profile but those a test saves."""
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_default_pair_holds_every_rule(target_path, drafter_path, cache):
    report = pair_report(target_path, drafter_path, probe_seconds=0)
    assert [(r.name, r.holds, r.sentence) for r in report.rules] == [
        ("vocabulary type", True, "Both vocabularies are byte-level BPE."),
        (
            "special tokens",
            True,
            "The special tokens agree: neither adds a start-of-text token, neither adds an end-of-text token.",
        ),
        ("vocabulary size", True, "The sizes match: 151,936 tokens each (at most 128 apart allowed)."),
        ("token texts", True, "Every token from id 5 to 151,935 is spelled the same in both."),
    ]
    assert report.compatible and report.drafter_kind == "model"
    assert report.verdict == "The drafter can draft for this target."
    assert report.architecture == (
        "The target (Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)) is a qwen2 transformer, 28 layers: a rejected draft is "
        "dropped from its KV cache, which costs next to nothing.",
        "The drafter (Qwen2.5-Coder-0.5B-Instruct (Q4_K_M)) is a draft model of its own: a qwen2 model, 24 layers.",
    )
    # llama.cpp's own log for these contexts: "size = 59.50 MiB (4096 cells, 28 layers)" and 25.50 MiB
    assert report.memory.target_kv == int(59.50 * 2**20)
    assert report.memory.drafter_kv == int(25.50 * 2**20)
    assert report.memory.target_weights == target_path.stat().st_size
    assert report.memory.drafter_weights == drafter_path.stat().st_size
    assert report.suggestion == ""  # the catalog's own pair
    assert report.prediction.sentence.startswith(
        "No box profile for this pair on this machine yet: "
        "`draftlight tune --target qwen2.5-coder-1.5b --drafter qwen2.5-coder-0.5b`"
    )


@pytest.mark.parametrize(
    ("drafter", "failing"),
    [
        ("smollm", ["vocabulary size", "token texts"]),
        ("gemma", ["vocabulary type", "special tokens", "vocabulary size", "token texts"]),
    ],
)
def test_an_incompatible_drafter_names_the_rules_that_fail(
    drafter, failing, target_path, smollm_path, gemma_path, cache
):
    path = {"smollm": smollm_path, "gemma": gemma_path}[drafter]
    report = pair_report(target_path, path, probe_seconds=5)
    assert [r.name for r in report.rules if not r.holds] == failing
    assert not report.compatible
    assert report.verdict == f"The drafter cannot draft for this target: {len(failing)} rule(s) fail."
    assert report.probe is not None and report.probe.prompts == ()
    assert report.probe.note == "The probe did not run: this drafter cannot draft for this target."
    assert report.prediction.sentence == "None: this drafter cannot draft for this target, so replies would run plain."
    assert report.suggestion.endswith("`draftlight pair qwen2.5-coder-1.5b qwen2.5-coder-0.5b` checks that pair.")


def _direct(engine, text: str) -> RunStats:
    engine.forget()
    ids = engine.prompt_ids([Message("user", text)])
    config = GenerationConfig(max_tokens=TOKENS, depth=3, probabilities=False)
    return [e for e in engine.stream(ids, config) if isinstance(e, RunStats)][-1]


def test_the_probe_counts_what_a_direct_run_counts(target_path, drafter_path, engine, cache):
    """Greedy is deterministic on a box: the probe's drafts and acceptances are a direct run's."""
    options = RuntimeOptions()
    save_profile(box_profiles.profile(target_path, drafter_path, options, *box_profiles.PAYING))
    prompts = [("code", PROMPTS["code"]), ("prose", PROMPTS["prose"])]
    report = pair_report(target_path, drafter_path, options, prompts, probe_seconds=600, max_tokens=TOKENS)
    probe = report.probe
    assert probe is not None and probe.note == "" and probe.source == "your recent prompts"
    assert [p.name for p in probe.prompts] == ["code", "prose"]
    for found, (_, text) in zip(probe.prompts, prompts, strict=True):
        direct = _direct(engine, text)
        assert (found.tokens, found.drafted, found.accepted) == (
            direct.generated_tokens,
            direct.drafted,
            direct.accepted,
        )
        assert not found.cut_short
    assert probe.accepted > 0
    assert probe.acceptance == probe.accepted / probe.drafted
    assert sum(d for d, _ in probe.rounds) == probe.drafted
    profile = box_profiles.profile(target_path, drafter_path, options, *box_profiles.PAYING)
    best, rates = best_depth(profile, conditional_acceptance(probe.rounds, profile.max_depth))
    assert (report.prediction.depth, report.prediction.tps) == (best, rates[best])
    assert report.prediction.sentence.startswith(f"At the probe's acceptance ({probe.acceptance:.0%}), depth {best}")


def test_the_command_reads_like_a_doctors_report(target_path, smollm_path, tmp_path):
    result = run_pair(str(target_path), str(smollm_path), "--no-probe", tmp_path=tmp_path)
    assert result.returncode == 1, result.stderr  # it cannot draft
    assert result.stderr.splitlines() == [  # the sentence `chat` refuses the pair with
        "draftlight: The drafter cannot draft for this target: the target has 151,936 tokens and the drafter 49,152 "
        "(102,784 apart; at most 128 allowed); token 5 is '&' in the target and '<file_sep>' in the drafter."
    ]
    lines = result.stdout.splitlines()
    assert lines[:6] == [
        "Pairing: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) + SmolLM2-135M-Instruct (Q4_1) on llama.cpp",
        "The drafter cannot draft for this target: 2 rule(s) fail.",
        "  ✓ vocabulary type: Both vocabularies are byte-level BPE.",
        "  ✓ special tokens: The special tokens agree: neither adds a start-of-text token, "
        "neither adds an end-of-text token.",
        "  ✗ vocabulary size: The target has 151,936 tokens and the drafter 49,152 (102,784 apart; at most 128 allowed).",
        "  ✗ token texts: Token 5 is '&' in the target and '<file_sep>' in the drafter.",
    ]
    assert [line.split(":")[0] for line in lines if not line.startswith(" ")][2:] == [
        "Architecture",
        "Memory",
        "Probe",
        "Prediction",
        "Suggestion",
        "Ledger",
    ]
    ascii_run = subprocess.run(
        [sys.executable, "-m", "engine.cli", "pair", str(target_path), str(smollm_path), "--no-probe"],
        capture_output=True,
        env={**os.environ, "PYTHONIOENCODING": "ascii", "DRAFTLIGHT_CACHE": str(tmp_path / "cache")},
        cwd=ROOT,
        timeout=300,
    )
    assert ascii_run.returncode == 1 and b"  x vocabulary size:" in ascii_run.stdout  # marks a terminal can show


def test_the_command_in_json(target_path, drafter_path, tmp_path):
    result = run_pair(str(target_path), str(drafter_path), "--no-probe", "--json", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["compatible"] is True
    assert [(r["name"], r["holds"]) for r in report["rules"]] == [
        ("vocabulary type", True),
        ("special tokens", True),
        ("vocabulary size", True),
        ("token texts", True),
    ]
    assert report["memory"]["total"] == sum(
        report["memory"][k] for k in ("target_weights", "drafter_weights", "target_kv", "drafter_kv")
    )
    assert report["target"]["layers"] == 28 and report["drafter"]["kv_heads"] == 2
    assert report["probe"] is None and report["suggestion"] == ""
