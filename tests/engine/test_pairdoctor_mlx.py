"""The pairing doctor on MLX: folders read from their headers, probed on MLX; and where a GGUF file
has an MLX conversion, both runtimes timed on this box and the faster one named with the figures."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("mlx_lm")

from engine.pairdoctor import pair_report
from tests.engine.runtime.mlx_folders import CORPUS, write_qwen2_folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mlx-pair")
    return {
        "target": write_qwen2_folder(root / "target", seed=0),
        "drafter": write_qwen2_folder(root / "drafter", seed=0, layers=1),
        # another tokenizer: trained on other text, so its tokens are spelled otherwise
        "stranger": write_qwen2_folder(root / "stranger", seed=1, corpus=("a stranger's words " * 9, *CORPUS[1:])),
    }


def test_an_mlx_pair_is_checked_from_its_folders(tmp_path, monkeypatch, folders):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path))
    report = pair_report(folders["target"], folders["drafter"], probe_seconds=0)
    assert report.runtime == "mlx" and report.compatible and report.drafter_kind == "model"
    assert [(r.name, r.holds, r.sentence) for r in report.rules] == [
        ("vocabulary type", True, "Both vocabularies are byte-level BPE."),
        (
            "special tokens",
            True,
            "The special tokens agree: neither names a start-of-text token, neither names an end-of-text token.",
        ),
        ("vocabulary size", True, "The sizes match: 300 tokens each (at most 128 apart allowed)."),
        ("token texts", True, "Every token from id 5 to 299 is spelled the same in both."),
    ]
    lines = report.lines()
    assert lines[:2] == ["Pairing: target + drafter on MLX", "The drafter can draft for this target."]
    assert report.architecture[1] == "The drafter (drafter) is a draft model of its own: a qwen2 model, 1 layer."
    assert report.target.layers == 2 and report.target.kv_heads == 2 and report.target.key_dim == 16
    assert report.runtimes == "" and report.to_json()["runtime"] == "mlx"


def test_an_mlx_drafter_with_another_tokenizer_is_refused(tmp_path, monkeypatch, folders):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path))
    report = pair_report(folders["target"], folders["stranger"], probe_seconds=0)
    assert not report.compatible
    (failed,) = [r for r in report.rules if not r.holds]
    assert (failed.name, failed.sentence) == ("token texts", "Token 259 is 'Ġf' in the target and 'er' in the drafter.")


@pytest.mark.slow
def test_the_probe_runs_an_mlx_pair_on_mlx(tmp_path, monkeypatch, folders):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path))
    report = pair_report(folders["target"], folders["target"], probe_seconds=60, max_tokens=8, max_prompts=1)
    probe = report.probe
    # The target drafting for itself: every draft accepted, as on llama.cpp.
    assert probe.speculates and probe.drafted > 0 and probe.accepted == probe.drafted
    assert report.runtimes == ""  # an MLX folder alone: one runtime runs it


@pytest.mark.slow
def test_both_runtimes_are_timed_where_a_gguf_has_an_mlx_conversion(smollm_path):
    from engine.models.mlx_conversions import mlx_folder_for

    mlx_folder_for(smollm_path)  # the conversion the comparison needs, converted once into the user cache
    report = pair_report(smollm_path, smollm_path, probe_seconds=60, max_tokens=4, max_prompts=1)
    assert report.runtime == "llama" and report.probe.drafted > 0
    said = re.fullmatch(
        r"Measured on this box, the same greedy reply \(4 tokens\): llama\.cpp ([\d.]+) tok/s and MLX ([\d.]+) "
        r"tok/s; (llama\.cpp|MLX) is ([\d.]+)x as fast as (llama\.cpp|MLX) here\.",
        report.runtimes,
    )
    assert said is not None, report.runtimes
    llama, mlx = float(said[1]), float(said[2])
    faster, slower = ("llama.cpp", "MLX") if llama >= mlx else ("MLX", "llama.cpp")
    assert (said[3], said[5]) == (faster, slower)
    assert float(said[4]) == pytest.approx(max(llama, mlx) / min(llama, mlx), rel=0.05)  # of figures rounded
    assert f"Runtimes: {report.runtimes}" in report.lines()
