"""The ruler on MLX: `draftlight bench --runtime mlx` on tiny random-weight folders (mlx_folders), our
MLX engine and mlx-lm's own loops on the same token ids. Greedy, so every arm writes the same ids."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")

from engine.cli import main
from engine.ruler.mlx_reference import _rounds
from tests.engine.runtime.mlx_folders import write_qwen2_folder

ARMS = ["ours-mlx d0", "ours-mlx d2", "mlx-lm d0", "mlx-lm d2"]


def test_mlx_lms_flags_make_rounds_drafts_and_acceptance():
    """Depth 2, 7 tokens after the first: kept kept bonus | refused | kept refused | (1 left: 1 drafted) kept."""
    flags = [True, True, False, False, True, False, True]
    assert _rounds(flags, 2, 7) == (4, 7, 4, [3 / 4, 1 / 3])


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
    assert ours["overhead_s"] > 0 and ours["draft_s"] > 0 and ours["verify_s"] > 0  # our Python per round, split
    text = table.getvalue()
    assert "| ours-mlx d2 |" in text and "ours / mlx-lm" in text and "our Python ms/round" in text
    assert "Every MLX arm gave the token ids of `ours-mlx d0` on every prompt." in text
