"""The MLX ruler with a drafter that reads the target: our MTP round against mlx-vlm 0.7.10's own rounds.

A tiny Qwen 3.5 folder with its MTP head and a tokenizer (mlx_targets.write_target), a gated delta-net
layer and an attention layer as Qwen 3.5 has them; run_mlx_bench runs our engine, mlx-lm's plain loop
(depth 0) and mlx-vlm's run_speculative_rounds (engine.ruler.mlx_vlm_reference) on the same prompt ids.
Greedy, so every arm writes the ids of our depth 0. Fast: MLX's CPU backend.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from pathlib import Path

import pytest

pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")
pytest.importorskip("mlx_vlm")

from mlx_folders import CORPUS
from mlx_targets import TOKENIZER_VOCAB, write_dflash, write_target

from engine.cli import main
from engine.drafting import kinds
from engine.ruler import mlx_report
from engine.ruler.mlx_arms import MlxBenchConfig, run_mlx_bench
from engine.ruler.oracle_arms import per_position
from engine.ruler.prompts import built_in

DEPTH = 2
N_TOKENS = 1 + 6 * (DEPTH + 1)  # six whole rounds after the first token: both loops draft full depth in each
ARMS = ["ours-mlx d0", "ours-mlx mtp d2", "mlx-lm d0", "mlx-vlm mtp d2"]


def bench(folder: Path, drafter: Path | None = None, kind: str = kinds.MTP.name):
    config = MlxBenchConfig(
        target=folder, drafter=drafter, prompts=built_in(["qa"]), kind=kind, depths=[0, DEPTH],
        n_tokens=N_TOKENS, repeats=1,
    )  # fmt: skip
    result = run_mlx_bench(config, progress=lambda line: None)
    return result, {r.arm: r for r in result.records}


def qwen35(tmp_path: Path, head: str, layers: int = 2) -> Path:
    return write_target(tmp_path / "qwen35", 3, head, layers=layers, interval=2, tokenizer=CORPUS)


def test_every_draft_kept_gives_both_loops_the_same_rounds_and_ids(tmp_path: Path):
    """The copy head guesses every token: six rounds of two drafts and the bonus, in our round and in
    mlx-vlm's; every arm writes depth 0's ids, and an arm whose ids differ is reported where they do."""
    result, records = bench(qwen35(tmp_path, "copy"))
    assert sorted(records) == sorted(ARMS)
    ids = records["ours-mlx d0"].token_ids
    assert len(ids) == N_TOKENS and len(set(ids)) > 3
    assert all(r.token_ids == ids for r in records.values())
    assert mlx_report.mismatches(result) == []
    ours, theirs = records["ours-mlx mtp d2"], records["mlx-vlm mtp d2"]
    assert (ours.rounds, ours.drafted, ours.accepted) == (theirs.rounds, theirs.drafted, theirs.accepted) == (6, 12, 12)
    assert ours.acceptance_per_position == theirs.acceptance_per_position == [1.0, 1.0]
    assert records["mlx-lm d0"].rounds == records["ours-mlx d0"].rounds == N_TOKENS - 1
    wrong = [*ids[:5], (ids[5] + 1) % 300, *ids[6:]]
    result.records = [dataclasses.replace(r, token_ids=wrong) if r is theirs else r for r in result.records]
    assert mlx_report.mismatches(result) == ["qa: mlx-vlm mtp d2 differs from ours-mlx d0 at token 5"]
    assert "MISMATCH qa: mlx-vlm mtp d2 differs from ours-mlx d0 at token 5" in mlx_report.markdown(result)


def test_a_head_that_misses_gives_both_loops_the_same_ids_and_acceptance_up_to_the_last_round(tmp_path: Path):
    """`draftlight bench --runtime mlx --drafter mtp` with the noisy head, which keeps some drafts and
    refuses others: the walks agree on every id, and the loops draft alike but for the last round,
    where ours leaves room for the bonus."""
    folder, out = qwen35(tmp_path, "noisy"), tmp_path / "out"
    argv = ["bench", "--runtime", "mlx", "--target", str(folder), "--drafter", "mtp", "--depths", f"0,{DEPTH}",
            "--only", "qa", "--tokens", str(N_TOKENS), "--repeats", "1", "--cool-pause", "0", "--out", str(out),
            "--strict"]  # fmt: skip
    table = io.StringIO()
    with contextlib.redirect_stdout(table):
        assert main(argv) == 0  # --strict: 1 had any arm's ids differed
    data = json.loads((out / "bench-mlx.json").read_text())
    records = {r["arm"]: r for r in data["records"]}
    assert sorted(records) == sorted(ARMS) and data["mismatches"] == [] and data["config"]["kind"] == "mtp"
    ids = records["ours-mlx d0"]["token_ids"]
    assert all(r["token_ids"] == ids for r in records.values())
    ours, theirs = records["ours-mlx mtp d2"], records["mlx-vlm mtp d2"]
    assert 0 < ours["accepted"] < ours["drafted"] and ours["rounds"] == theirs["rounds"]
    assert 0 <= theirs["drafted"] - ours["drafted"] <= DEPTH and 0 <= theirs["accepted"] - ours["accepted"] <= DEPTH
    assert "| mlx-vlm mtp d2 |" in table.getvalue() and "ours / mlx-lm or mlx-vlm" in table.getvalue()


def test_dflash_against_mlx_vlms_own_dflash_rounds_gives_every_arm_the_same_ids(tmp_path: Path):
    """A DFlash drafter folder reading the target's layers 0 and 2: our round and mlx-vlm's DFlash rounds
    write depth 0's ids in as many rounds, and ours drafts no more than theirs (room for the bonus)."""
    target = qwen35(tmp_path, "random", layers=3)
    drafter = write_dflash(tmp_path / "dflash", 121, vocab=TOKENIZER_VOCAB)
    result, records = bench(target, drafter, kinds.DFLASH.name)
    assert sorted(records) == ["mlx-lm d0", "mlx-vlm dflash d2", "ours-mlx d0", "ours-mlx dflash d2"]
    ids = records["ours-mlx d0"].token_ids
    assert len(ids) == N_TOKENS and all(r.token_ids == ids for r in records.values())
    assert mlx_report.mismatches(result) == []
    ours, theirs = records["ours-mlx dflash d2"], records["mlx-vlm dflash d2"]
    assert ours.rounds == theirs.rounds and 0 < ours.drafted <= theirs.drafted and ours.accepted == theirs.accepted


def test_acceptance_per_position_from_each_rounds_counts():
    """Three rounds drafting 2, 2, 1 and keeping 2, 0, 1: position 0 kept in 2 of 3, position 1 in 1 of 2."""
    assert per_position([2, 2, 1], [2, 0, 1]) == [2 / 3, 1 / 2]
    assert per_position([], []) == []
