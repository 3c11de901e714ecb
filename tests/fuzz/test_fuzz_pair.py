"""`draftlight pair` on hostile files and arguments: it ends, by no signal, with no traceback, and a
failure is one sentence (exit 2); a report exits 0 (or 1: the drafter cannot draft)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.engine import synthetic
from tests.fuzz.bounded import case_count, run_bounded

HEADER_BYTES = 4096  # where a GGUF's metadata lives in these small files


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    return synthetic.mamba(tmp_path_factory.mktemp("fuzz-pair") / "mamba.gguf")


def _mutated(clean: Path, rng: random.Random, folder: Path, index: int) -> Path:
    data = bytearray(clean.read_bytes())
    how = rng.choice(("truncate", "flip", "zero-run"))
    if how == "truncate":
        data = data[: rng.randrange(0, HEADER_BYTES)]
    elif how == "flip":
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(4, HEADER_BYTES)] = rng.randrange(256)
    else:
        start = rng.randrange(4, HEADER_BYTES - 64)
        data[start : start + rng.randint(1, 64)] = bytes(64)[: rng.randint(1, 64)]
    path = folder / f"case-{index}-{how}.gguf"
    path.write_bytes(bytes(data))
    return path


def _check(outcome) -> None:
    assert outcome.problems() == [], outcome.stderr[-2000:]
    assert outcome.returncode in (0, 1, 2)
    if outcome.returncode:
        assert outcome.stderr.startswith("draftlight: ")
    if outcome.returncode != 2:
        assert outcome.stdout.startswith("Pairing: ")


@pytest.mark.parametrize("index", range(case_count(4, 40)))
def test_a_hostile_target_file(index, clean, tmp_path):
    rng = random.Random(7100 + index)
    target = _mutated(clean, rng, tmp_path, index)
    _check(run_bounded(["pair", str(target), "none", "--no-probe"], timeout_s=60, env={"HF_HUB_OFFLINE": "1"}))


@pytest.mark.parametrize("index", range(case_count(3, 30)))
def test_a_hostile_drafter_file(index, clean, tmp_path):
    rng = random.Random(7200 + index)
    drafter = _mutated(clean, rng, tmp_path, index)
    _check(run_bounded(["pair", str(clean), str(drafter), "--no-probe"], timeout_s=60, env={"HF_HUB_OFFLINE": "1"}))


ARGUMENTS = [
    ["--probe-seconds", "nan"],
    ["--probe-seconds", "0"],
    ["--probe-seconds", "1e309"],
    ["--max-tokens", "-3"],
    ["--max-prompts", "x"],
    ["--prompts", "/nonexistent/prompts.jsonl"],
    ["--ctx", "0"],
    ["ngram", "extra"],
]


@pytest.mark.parametrize("index", range(case_count(3, len(ARGUMENTS))))
def test_odd_arguments(index, clean, tmp_path):
    args = random.Random(7300).sample(ARGUMENTS, len(ARGUMENTS))[index]
    outcome = run_bounded(["pair", str(clean), *args], timeout_s=60, env={"HF_HUB_OFFLINE": "1"})
    if outcome.returncode == 2 and "usage:" in outcome.stderr:  # argparse's refusal: its usage, then the sentence
        assert "Traceback" not in outcome.stderr and not outcome.timed_out
        last = outcome.stderr.strip().splitlines()[-1]
        assert last.startswith(("draftlight pair: error: ", "draftlight: error: unrecognized arguments"))
    else:
        _check(outcome)
