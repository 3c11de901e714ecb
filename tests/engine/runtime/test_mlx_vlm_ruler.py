"""The MLX ruler with a drafter that reads the target: our rounds against mlx-vlm 0.7.10's own rounds.

A tiny Qwen 3.5 folder with its MTP head and a tokenizer (mlx_targets.write_target), a gated delta-net
layer and an attention layer as Qwen 3.5 has them; run_mlx_bench runs our engine, mlx-lm's plain loop
(depth 0) and mlx-vlm's run_speculative_rounds (engine.ruler.mlx_vlm_reference) on the same prompt ids.
Every kind that reads the target: its MTP head, and folders of their own for DFlash, DSpark and
EAGLE-3 (mlx_targets' writers), and Gemma 4's assistant on a tiny Gemma 4 (gemma4_targets'), the
writers the kinds' oracle tests use. Greedy, so every arm writes the ids of our depth 0. Fast: MLX's
CPU backend.
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

from gemma4_targets import write_assistant, write_gemma4
from mlx_folders import CORPUS
from mlx_targets import TOKENIZER_VOCAB, write_dflash, write_dspark, write_eagle3, write_target

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
    assert "`ours-mlx` our engine on MLX (mlx cpu compiled joined)" in mlx_report.markdown(result)  # compiled, joined


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
    # --ngram-depth's default adds prompt lookup, swapped in for the head that reads the target: the same ids
    assert sorted(records) == sorted([*ARMS, "ours-mlx ngram d3"]) and data["mismatches"] == []
    assert data["config"]["kind"] == "mtp"
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


def same_ids(result, records: dict) -> list[int]:
    """Depth 0's ids, which every arm wrote (the report finds no mismatch)."""
    ids = records["ours-mlx d0"].token_ids
    assert len(ids) == N_TOKENS and len(set(ids)) > 3
    assert all(r.token_ids == ids for r in records.values())
    assert mlx_report.mismatches(result) == []
    return ids


@pytest.mark.parametrize(
    ("kind", "layers"),
    [(kinds.EAGLE3.name, 4), (kinds.DSPARK.name, 3)],
)
def test_a_drafter_that_misses_against_mlx_vlms_own_rounds_gives_every_arm_the_same_ids(
    tmp_path: Path, kind: str, layers: int
):
    """Random weights, so every draft missed and each round writes one token. EAGLE-3 reads the inputs
    of the target's layers 1-3, against mlx-vlm's EAGLE-3 rounds; DSpark (DFlash with a Markov head)
    reads layers 0 and 2, against the DFlash rounds mlx-vlm runs DSpark with. As many rounds in our
    loop as in mlx-vlm's. Ours drafts no more than the tokens left less one (room for the bonus): one
    in the round before last, none in the last; mlx-vlm's block is at most the tokens left plus one:
    one in its last."""
    target = qwen35(tmp_path, "random", layers=layers)
    if kind == kinds.EAGLE3.name:
        drafter = write_eagle3(tmp_path / kind, 12, vocab=TOKENIZER_VOCAB)
    else:
        drafter = write_dspark(tmp_path / kind, 141, vocab=TOKENIZER_VOCAB)
    result, records = bench(target, drafter, kind)
    assert sorted(records) == ["mlx-lm d0", f"mlx-vlm {kind} d2", "ours-mlx d0", f"ours-mlx {kind} d2"]
    same_ids(result, records)
    ours, theirs = records[f"ours-mlx {kind} d2"], records[f"mlx-vlm {kind} d2"]
    assert ours.rounds == theirs.rounds == N_TOKENS - 1 and ours.accepted == theirs.accepted == 0
    assert (ours.drafted, theirs.drafted) == (DEPTH * (N_TOKENS - 3) + 1, DEPTH * (N_TOKENS - 2) + 1)


def test_dspark_asked_past_its_block_drafts_as_many_in_both_loops(tmp_path: Path):
    """At depth 4 a DSpark folder whose block holds 3 drafts drafts 3 a round in our loop, and the
    ruler asks mlx-vlm's rounds for the same block (engine.ruler.mlx_vlm_reference.block_size), not
    the longer one it would run when asked for 4 (66 drafts here): random weights, every draft missed,
    one token a round; ours drafts no more than the tokens left less one, mlx-vlm's block is at most
    the tokens left plus one."""
    target = qwen35(tmp_path, "random", layers=3)
    drafter = write_dspark(tmp_path / "dspark", 141, vocab=TOKENIZER_VOCAB)
    config = MlxBenchConfig(
        target=target, drafter=drafter, prompts=built_in(["qa"]), kind=kinds.DSPARK.name, depths=[0, 4],
        n_tokens=N_TOKENS, repeats=1,
    )  # fmt: skip
    result = run_mlx_bench(config, progress=lambda line: None)
    records = {r.arm: r for r in result.records}
    assert sorted(records) == ["mlx-lm d0", "mlx-vlm dspark d4", "ours-mlx d0", "ours-mlx dspark d4"]
    same_ids(result, records)
    ours, theirs = records["ours-mlx dspark d4"], records["mlx-vlm dspark d4"]
    assert ours.rounds == theirs.rounds == N_TOKENS - 1 and ours.accepted == theirs.accepted == 0
    assert (ours.drafted, theirs.drafted) == (3 * (N_TOKENS - 4) + 3, 3 * (N_TOKENS - 3) + 3) == (48, 51)


def test_bench_reads_a_drafter_folders_kind_from_its_config(tmp_path: Path):
    """`draftlight bench --runtime mlx --drafter FOLDER` with an EAGLE-3 folder: the kind comes from its
    config (engine.models.discover.drafter_kind), and its arms run against mlx-vlm's EAGLE-3 rounds."""
    target, out = qwen35(tmp_path, "random", layers=4), tmp_path / "out"
    drafter = write_eagle3(tmp_path / "eagle3", 12, vocab=TOKENIZER_VOCAB)
    argv = ["bench", "--runtime", "mlx", "--target", str(target), "--drafter", str(drafter), "--depths",
            f"0,{DEPTH}", "--only", "qa", "--tokens", str(N_TOKENS), "--repeats", "1", "--cool-pause", "0",
            "--out", str(out), "--strict"]  # fmt: skip
    table = io.StringIO()
    with contextlib.redirect_stdout(table):
        assert main(argv) == 0
    data = json.loads((out / "bench-mlx.json").read_text())
    assert data["config"]["kind"] == "eagle3" and data["config"]["drafter"] == str(drafter)
    assert sorted(r["arm"] for r in data["records"]) == [
        "mlx-lm d0", "mlx-vlm eagle3 d2", "ours-mlx d0", "ours-mlx eagle3 d2", "ours-mlx ngram d3"
    ]  # fmt: skip
    assert data["mismatches"] == [] and "| mlx-vlm eagle3 d2 |" in table.getvalue()


def test_bench_refuses_a_folder_of_mtp_heads_alone_in_a_sentence(tmp_path: Path, capsys):
    """MLX reads MTP heads from the target's own folder: a folder holding the heads alone is refused."""
    import mlx.core as mx

    target = qwen35(tmp_path, "random")
    heads = tmp_path / "heads"
    heads.mkdir()
    (heads / "config.json").write_text((target / "config.json").read_text())
    saved = mx.load(str(target / "model.safetensors"))
    mx.save_safetensors(str(heads / "model.safetensors"), {k: v for k, v in saved.items() if k.startswith("mtp.")})
    argv = ["bench", "--runtime", "mlx", "--target", str(target), "--drafter", str(heads), "--out", str(tmp_path)]
    assert main(argv) == 2
    assert "heads holds MTP heads alone, and the MLX runtime reads them from the target's own folder" in (
        capsys.readouterr().err
    )


def test_gemma4_assistant_against_mlx_vlms_own_mtp_rounds_drafts_and_keeps_alike(tmp_path: Path):
    """Gemma 4's assistant (the copy one: it guesses from the token's embedding) on the random Gemma 4
    it was written for, a text-only folder: mlx-vlm's MTP rounds run on its Gemma 4 language model over
    the folder's weights (its text-only class hands the loop no hidden states). Some drafts kept, some
    refused, and the two loops draft and keep the same in the same rounds, to the last."""
    target = write_gemma4(tmp_path / "gemma4", 61, tokenizer=CORPUS)
    drafter = write_assistant(tmp_path / "assistant", 161, target, "copy", vocab=TOKENIZER_VOCAB)
    result, records = bench(target, drafter, kinds.ASSISTANT.name)
    assert sorted(records) == ["mlx-lm d0", "mlx-vlm assistant d2", "ours-mlx assistant d2", "ours-mlx d0"]
    same_ids(result, records)
    ours, theirs = records["ours-mlx assistant d2"], records["mlx-vlm assistant d2"]
    assert (ours.rounds, ours.drafted, ours.accepted) == (theirs.rounds, theirs.drafted, theirs.accepted)
    assert 0 < ours.accepted < ours.drafted and ours.acceptance_per_position == theirs.acceptance_per_position


def test_acceptance_per_position_from_each_rounds_counts():
    """Three rounds drafting 2, 2, 1 and keeping 2, 0, 1: position 0 kept in 2 of 3, position 1 in 1 of 2."""
    assert per_position([2, 2, 1], [2, 0, 1]) == [2 / 3, 1 / 2]
    assert per_position([], []) == []
