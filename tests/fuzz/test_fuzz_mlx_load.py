"""Damaged MLX folders loaded for real: as chat's target, as its drafter, and by `pair`.

Each case (tests/fuzz/mlx_damage.py: every case of issue 45 by name, then seeded mutants, then the
same kinds of damage to a DFlash, DSpark, EAGLE-3 and Gemma 4 assistant folder) is a copy of a tiny
sound MLX folder with one kind of damage, run as `draftlight chat` (as target or as drafter) or
`draftlight pair` in a child under an address-space cap. The contract: the child ends on its own, by no
signal, with no traceback; a damaged folder gets one sentence naming the folder and a non-zero
exit, a whole one an answer and exit 0; its peak memory stays under 1 GiB. `make test` runs a
seeded subset; `make fuzz` every case on every surface.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import pytest

from tests.fuzz.bounded import FULL, ROOT
from tests.fuzz.mlx_damage import DRAFTERS, KIND_TARGETS, NAMED, Case, damaged, random_cases, run_measured

pytest.importorskip("mlx_vlm")

SEED = 45
MEMORY_CAP_MB = 2048  # the child's address space; its resident peak must stay under PEAK_RSS
PEAK_RSS = 1 << 30
HANG_S = 120  # a hang, not a time budget: tests never assert a time
REPORT = os.environ.get("DRAFTLIGHT_FUZZ_REPORT", "")  # a file each run's time and peak memory are added to
CASES = NAMED + random_cases(SEED, 60 if FULL else 0)
SURFACES = ("target", "drafter", "pair")
RUNS = [
    (case, surface)
    for case in CASES
    for surface in SURFACES
    if surface != "drafter" or (case.base == "qwen2" and case.as_drafter)
]
KIND_RUNS = [(case, surface) for case in DRAFTERS for surface in ("drafter", "pair")]  # beside a sound target
if not FULL:  # the seeded subset: a few named cases on each surface, a few drafter kinds' damage
    RUNS = random.Random(SEED).sample(RUNS, 8) + random.Random(SEED).sample(KIND_RUNS, 4)
else:
    RUNS += KIND_RUNS


@pytest.fixture(scope="module")
def sound(tmp_path_factory) -> dict[str, Path]:
    sys.path.insert(0, str(ROOT / "tests" / "engine" / "runtime"))  # mlx_targets imports its neighbours so
    from mlx_folders import CORPUS, write_qwen2_folder
    from mlx_targets import write_target

    from tests.engine.surface_folders import write_folders

    root = tmp_path_factory.mktemp("fuzz-mlx-load")
    kinds = write_folders(root / "kinds")  # the surface matrix's: a qwen35 and a gemma4 target, each kind beside
    return {
        "qwen2": write_qwen2_folder(root / "qwen2", seed=1),
        "drafter": write_qwen2_folder(root / "drafter", seed=2, layers=1),
        "qwen35": write_target(root / "qwen35", 7, "random", tokenizer=CORPUS),
        **{f"{kind}-target": kinds[target] for kind, target in KIND_TARGETS.items()},
        **{kind: kinds[kind] for kind in KIND_TARGETS},
    }


def _args(surface: str, case: Case, folder: Path, sound: dict[str, Path]) -> list[str]:
    # 512: the folder's own context. Depth 2, not Auto: at Auto a pair that loads first profiles the box
    # (seconds of timed passes, again wherever the box is busy), which says nothing of the folder.
    chat = ["chat", "--runtime", "mlx", "--ctx", "512", "--max-tokens", "4", "--depth", "2", "hi"]
    if case.base in KIND_TARGETS:  # a drafter kind's folder damaged, beside the sound target it was made for
        target = str(sound[f"{case.base}-target"])
        if surface == "drafter":
            return [*chat, "--target", target, "--drafter", str(folder)]
        return ["pair", target, str(folder), "--runtime", "mlx", "--no-probe"]
    if surface == "target":
        return [*chat, "--target", str(folder), "--drafter", "mtp" if case.base == "qwen35" else "none"]
    if surface == "drafter":
        return [*chat, "--target", str(sound["qwen2"]), "--drafter", str(folder)]
    return ["pair", str(folder), "mtp" if case.base == "qwen35" else str(sound["drafter"]), "--runtime", "mlx",
            "--no-probe"]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(("case", "surface"), RUNS, ids=[f"{c.label}-{s}" for c, s in RUNS])
def test_a_damaged_folder_is_one_sentence_or_loads(case: Case, surface: str, sound, tmp_path):
    base = sound["drafter"] if surface == "drafter" and case.base == "qwen2" else sound[case.base]
    folder = damaged(case, base, tmp_path)
    measured = run_measured(_args(surface, case, folder, sound), HANG_S, MEMORY_CAP_MB)
    outcome = measured.outcome
    if REPORT:  # each run's figures, for the closing note's ceilings
        with open(REPORT, "a") as out:
            out.write(json.dumps({"case": case.label, "surface": surface, "seconds": measured.seconds,
                                  "max_rss": measured.max_rss, "exit": outcome.returncode}) + "\n")  # fmt: skip
    assert outcome.problems() == [], outcome.stderr[-2000:]
    assert measured.max_rss < PEAK_RSS, f"{case.label}: peak {measured.max_rss:,} bytes"
    if case.whole or (surface == "pair" and case.loader_only):
        assert outcome.returncode in (0, 1), outcome.stderr[-2000:]  # pair exits 1 where the drafter cannot draft
    elif surface == "pair" and case.unsure and outcome.returncode in (0, 1):
        assert "Pairing: " in outcome.stdout  # headers whole: its report (the loader is chat's to run)
    else:
        assert outcome.returncode != 0, outcome.stdout[-2000:]
        assert outcome.stderr.startswith("draftlight: "), outcome.stderr
        assert folder.name in outcome.stderr + outcome.stdout, outcome.stderr  # pair names it in its report
