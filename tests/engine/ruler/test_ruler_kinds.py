"""The ruler with drafters that read the target: an arm per kind beside llama.cpp's same `--spec-type`.

The models are the known-by-construction files of tests/engine/synthetic.py: a hybrid target
carrying an MTP head, with a DFlash and an EAGLE-3 drafter, whose drafts land and fail in a
pattern fixed by their weights; no download offers such models here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from engine.models.discover import drafter_kind
from engine.ruler import report
from engine.ruler.cli import arms_for
from engine.ruler.prompts import built_in
from engine.ruler.runner import Arm, BenchConfig, run_bench

pytest.importorskip("gguf")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from synthetic import N_VOCAB, dflash, eagle3, hybrid_qwen35

F = [(3 * x + 1) % 11 + 40 for x in range(N_VOCAB)]
G = [F[x] if x % 3 else (F[x] + 1) % N_VOCAB for x in range(N_VOCAB)]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    return {
        "target": hybrid_qwen35(folder / "known-mtp.gguf", nextn=True, known=(F, G)),
        "dflash": dflash(folder / "dflash-known.gguf", known=G),
        "eagle3": eagle3(folder / "eagle3-known.gguf", known=G),
        "plain": hybrid_qwen35(folder / "hybrid.gguf"),
    }


def test_each_file_is_named_by_its_kind(files):
    target = files["target"]
    assert drafter_kind(target, "mtp") == "mtp" and drafter_kind(target, "ngram") == "ngram"
    assert drafter_kind(target, files["dflash"]) == "dflash"
    assert drafter_kind(target, files["eagle3"]) == "eagle3"
    assert drafter_kind(target, files["plain"]) == "model"  # a model of the family, without heads


def test_arms_pair_every_kind_and_depth_with_llama_cpps():
    args = argparse.Namespace(depths=[1, 2], ngram_depth=0, auto=False, no_oracle=False, repack=False)
    names = [a.name for a in arms_for(args, ["mtp", "dflash"])]
    assert names == [
        "ours d0", "ours mtp d1", "ours mtp d2", "ours dflash d1", "ours dflash d2",
        "llama.cpp d0", "llama.cpp mtp d1", "llama.cpp mtp d2", "llama.cpp dflash d1", "llama.cpp dflash d2",
    ]  # fmt: skip


def test_a_short_run_of_every_kind_agrees_with_itself_and_llama_cpp(files):
    from engine.ruler.oracle import find_oracle

    build = find_oracle()
    kinds = ["mtp", "dflash", "eagle3"]
    arms = [Arm("ours", "none", 0), *(Arm("ours", k, 2) for k in kinds)]
    if build is not None:
        arms += [Arm("llama.cpp", "none", 0), *(Arm("llama.cpp", k, 2) for k in kinds)]
    drafters = {"mtp": "mtp", "dflash": str(files["dflash"]), "eagle3": str(files["eagle3"])}
    config = BenchConfig(
        files["target"], None, built_in(["code"]), arms, drafters=drafters, n_tokens=16, repeats=1, n_ctx=256,
        cool_pause_s=0.0,
    )  # fmt: skip
    result = run_bench(config, build, lambda line: None)
    assert report.mismatches(result) == []
    runs = {r.arm: r for r in result.records}
    assert {r.generated_tokens for r in runs.values()} == {16}
    for kind in kinds:
        ours = runs[f"ours {kind} d2"]
        assert 0 < ours.accepted < ours.drafted  # the construction makes some drafts land and some fail
        if build is not None:  # the same drafts, so the same counts
            theirs = runs[f"llama.cpp {kind} d2"]
            assert (ours.drafted, ours.accepted) == (theirs.drafted, theirs.accepted)
    md = report.markdown(result)
    assert "| ours eagle3 d2 |" in md and "mtp: the target's own heads" in md
