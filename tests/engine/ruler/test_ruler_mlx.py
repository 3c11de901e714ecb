"""The ruler on MLX: `draftlight bench --runtime mlx` on tiny random-weight folders (mlx_folders), our
MLX engine and mlx-lm's own loops on the same token ids. Greedy, so every arm writes the same ids."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")

from engine.chat import Message
from engine.cli import main
from engine.drafting import kinds
from engine.ruler.mlx_arms import OURS, MlxBenchConfig, OurArms, mlx_arms
from engine.ruler.mlx_reference import _rounds
from engine.ruler.prompts import BenchPrompt
from engine.ruler.runner import Arm
from engine.runtime import RuntimeOptions
from tests.engine.runtime.mlx_folders import write_qwen2_folder

ARMS = ["ours-mlx d0", "ours-mlx d2", "ours-mlx ngram d3", "mlx-lm d0", "mlx-lm d2"]
REPEATING = BenchPrompt("repeat", "repeat", "the cat sat on the mat. " * 6)


def test_mlx_lms_flags_make_rounds_drafts_and_acceptance():
    """Depth 2, 7 tokens after the first: kept kept bonus | refused | kept refused | (1 left: 1 drafted) kept."""
    flags = [True, True, False, False, True, False, True]
    assert _rounds(flags, 2, 7) == (4, 7, 4, [3 / 4, 1 / 3])


def test_the_mlx_rulers_ngram_arm_is_ours_alone_and_depth_0_leaves_it_out(tmp_path):
    """Prompt lookup has no mlx-lm or mlx-vlm loop: one arm of ours, after our depths, whatever the drafter."""
    config = MlxBenchConfig(target=tmp_path, drafter=tmp_path, prompts=[], depths=[0, 2], ngram_depth=3)
    assert [a.name for a in mlx_arms(config)] == ["ours-mlx d0", "ours-mlx d2", "ours-mlx ngram d3", "mlx-lm d0",
                                                  "mlx-lm d2"]  # fmt: skip
    config.kind = kinds.MTP.name
    assert [a.name for a in mlx_arms(config)] == ["ours-mlx d0", "ours-mlx mtp d2", "ours-mlx ngram d3",
                                                  "mlx-lm d0", "mlx-vlm mtp d2"]  # fmt: skip
    config.ngram_depth = 0
    assert all(a.drafter != kinds.NGRAM.name for a in mlx_arms(config))


@pytest.mark.slow
def test_the_mlx_rulers_ngram_arm_drafts_by_prompt_lookup_and_keeps_depth_0s_ids(tmp_path):
    """The n-gram arm swaps our MLX engine to prompt lookup: on a prompt that repeats, the random target falls
    into a two-token loop that the table continues, every draft kept, the ids those of depth 0."""
    target = write_qwen2_folder(tmp_path / "target", seed=0)
    arms = OurArms(target, target, "mlx", RuntimeOptions())
    try:
        ids = arms.engine.tokenize_prompt(arms.engine.render([Message("user", REPEATING.text)]))
        plain = arms.run(Arm(OURS, kinds.NONE.name, 0), REPEATING, ids, 20)
        ngram = arms.run(Arm(OURS, kinds.NGRAM.name, 3), REPEATING, ids, 20)
        assert arms.engine.drafter is arms.ngram and arms.engine.drafter.kind == kinds.NGRAM.name
    finally:
        arms.close()
    assert ngram.arm == "ours-mlx ngram d3" and ngram.token_ids == plain.token_ids
    assert plain.token_ids == [65, 88] + [170, 180] * 9
    assert (ngram.rounds, ngram.drafted, ngram.accepted) == (9, 10, 10)
    assert ngram.acceptance_per_position == [1.0, 1.0]


@pytest.mark.slow
def test_the_mlx_ruler_gives_every_arm_the_same_ids_and_reports_them(tmp_path):
    target = write_qwen2_folder(tmp_path / "target", seed=0)
    out = tmp_path / "out"
    argv = ["bench", "--runtime", "mlx", "--target", str(target), "--drafter", str(target), "--depths", "0,2",
            "--only", "qa", "--tokens", "20", "--repeats", "1", "--cool-pause", "0", "--out", str(out), "--strict"]  # fmt: skip
    table = io.StringIO()
    with contextlib.redirect_stdout(table):
        assert main(argv) == 0  # --strict: 1 had any arm's ids differed
    data = json.loads((out / "bench-mlx.json").read_text())
    records = {r["arm"]: r for r in data["records"]}
    assert sorted(records) == sorted(ARMS) and data["mismatches"] == []
    ids = records["ours-mlx d0"]["token_ids"]
    assert len(ids) == 20 and len(set(ids)) > 3
    assert all(r["token_ids"] == ids and r["generated_tokens"] == 20 for r in records.values())
    ours, theirs = records["ours-mlx d2"], records["mlx-lm d2"]
    # The target drafting for itself (as mlx-lm's own test does): every draft kept. Six rounds of two
    # drafts and a bonus; one token left: we decode it plainly (no room for a bonus), mlx-lm drafts it.
    assert (ours["rounds"], ours["drafted"], ours["accepted"]) == (7, 12, 12)
    assert (theirs["rounds"], theirs["drafted"], theirs["accepted"]) == (7, 13, 13)
    assert ours["acceptance_per_position"] == theirs["acceptance_per_position"] == [1.0, 1.0]
    assert records["ours-mlx d0"]["rounds"] == records["mlx-lm d0"]["rounds"] == 19
    ngram = records["ours-mlx ngram d3"]  # --ngram-depth's default: prompt lookup, the ids above
    assert (ngram["rounds"], ngram["drafted"], ngram["accepted"]) == (13, 7, 6)
    assert ours["overhead_s"] > 0 and ours["draft_s"] > 0 and ours["verify_s"] > 0  # our Python per round, split
    text = table.getvalue()
    assert "| ours-mlx d2 |" in text and "ours / mlx-lm" in text and "our Python ms/round" in text
    assert "| ours-mlx ngram d3 |" in text and "so it has no oracle and its comparison is `ours-mlx d0`" in text
    assert "Every MLX arm gave the token ids of `ours-mlx d0` on every prompt." in text


@pytest.mark.slow
def test_bench_drafter_ngram_on_mlx_measures_prompt_lookup_against_depth_0(tmp_path):
    """`draftlight bench --runtime mlx --drafter ngram`: no draft model, as on llama.cpp: depth 0, the n-gram
    arm at --ngram-depth and mlx-lm's plain loop; the n-gram arm drafts on a prompt that repeats."""
    target, out, prompts = write_qwen2_folder(tmp_path / "target", seed=0), tmp_path / "out", tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"category": REPEATING.category, "prompt": REPEATING.text}) + "\n")
    argv = ["bench", "--runtime", "mlx", "--target", str(target), "--drafter", "ngram", "--ngram-depth", "3",
            "--prompts", str(prompts), "--tokens", "20", "--repeats", "1", "--cool-pause", "0", "--out", str(out),
            "--strict"]  # fmt: skip
    table = io.StringIO()
    with contextlib.redirect_stdout(table):
        assert main(argv) == 0
    data = json.loads((out / "bench-mlx.json").read_text())
    records = {r["arm"]: r for r in data["records"]}
    assert sorted(records) == ["mlx-lm d0", "ours-mlx d0", "ours-mlx ngram d3"] and data["mismatches"] == []
    assert data["config"]["kind"] == "ngram" and data["config"]["drafter"] is None
    assert all(r["token_ids"] == [65, 88] + [170, 180] * 9 for r in records.values())
    ngram = records["ours-mlx ngram d3"]
    assert (ngram["rounds"], ngram["drafted"], ngram["accepted"]) == (9, 10, 10)
    assert "drafter prompt lookup alone" in table.getvalue() and "| ours-mlx ngram d3 |" in table.getvalue()
