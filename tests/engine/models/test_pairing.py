"""The pairing doctor on files made at test time: architectures, memory, a drafter made for another
target, suggestions, predictions from a saved profile. No real model: every test here is fast."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import ModelFileError
from engine.measure.costmodel import best_depth, conditional_acceptance, why_plain
from engine.models.pairing import suggest
from engine.pairdoctor import pair_report, predict_speed
from engine.pairprobe import Probe, PromptProbe
from engine.runtime import RuntimeOptions
from tests.engine import box_profiles, synthetic
from tests.engine.pair_cli import run_pair


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("pairing")
    return {
        "hybrid": synthetic.hybrid_qwen35(folder / "hybrid.gguf"),
        "hybrid_mtp": synthetic.hybrid_qwen35(folder / "hybrid-mtp.gguf", nextn=True),
        "mamba": synthetic.mamba(folder / "mamba.gguf"),
        "dflash": synthetic.dflash(folder / "dflash-hybrid.gguf"),
    }


@pytest.fixture
def no_profiles(monkeypatch, tmp_path):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path / "cache"))


def test_a_hybrid_target_drafting_with_its_heads(files, no_profiles):
    report = pair_report(files["hybrid_mtp"], "mtp", probe_seconds=0)
    assert [(r.name, r.holds) for r in report.rules] == [("MTP heads", True)]
    assert report.compatible and report.drafter_kind == "mtp"
    target, drafter, rollback = report.architecture
    assert "is a hybrid qwen35 model, recurrent layers beside attention (1 of 3 keep a KV cache)" in target
    assert "keeps a state snapshot per drafted token" in target
    assert drafter == "The drafter is the target's multi-token-prediction heads."
    assert rollback == "`draftlight tune` times what undoing a rejected draft costs on this box."
    # one attention layer of 2 heads x 128 in q8_0 (8 blocks of 34 bytes), keys and values, 4,096 positions
    assert report.memory.target_kv == 1 * 2 * (8 * 34) * 4096 == 2_228_224
    assert report.memory.drafter_weights == 0 and report.memory.drafter_kv == 0  # the heads are in the file
    assert report.memory.target_weights == files["hybrid_mtp"].stat().st_size
    assert report.prediction.sentence.startswith("No box profile for this pair on this machine yet: `draftlight tune")


def test_mtp_for_a_target_without_heads_fails_its_rule(files, no_profiles):
    report = pair_report(files["hybrid"], "mtp", probe_seconds=0)
    rule = report.rules[0]
    assert (rule.name, rule.holds) == ("MTP heads", False)
    assert rule.sentence == "Hybrid carries no multi-token-prediction heads: it cannot draft for itself."
    assert not report.compatible
    assert report.prediction.sentence.startswith("None: this drafter cannot draft for this target")


def test_a_recurrent_target_has_a_state_not_a_kv_cache(files, no_profiles):
    report = pair_report(files["mamba"], "none", probe_seconds=0)
    assert report.rules == ()
    assert report.architecture[0].startswith("The target (mamba) is a recurrent mamba model")
    assert report.memory.target_kv == 0
    assert "a recurrent state in place of a KV cache" in report.memory.sentence()
    assert report.verdict == "No drafter chosen: nothing to check."


def test_a_drafter_whose_metadata_names_another_base_was_trained_for_another_target(
    files, tmp_path, monkeypatch, no_profiles
):
    assert pair_report(files["hybrid"], files["dflash"], probe_seconds=0).rules[-1].holds
    writer = synthetic._writer

    def with_base(path, arch, *args, **kwargs):
        w = writer(path, arch, *args, **kwargs)
        w.add_uint32("general.base_model.count", 1)
        w.add_string("general.base_model.0.name", "Llama 3.1 8B Instruct")
        return w

    monkeypatch.setattr(synthetic, "_writer", with_base)
    other = synthetic.dflash(tmp_path / "dflash-llama.gguf")
    report = pair_report(files["hybrid"], other, probe_seconds=0)
    assert [r.holds for r in report.rules] == [True, True, True, True, False]
    rule = report.rules[-1]
    assert rule.name == "made for this target"
    assert rule.sentence == (
        "dflash-llama.gguf was trained for another target: its metadata names Llama 3.1 8B Instruct as its base, "
        "and the target is draftlight test hybrid."
    )
    assert not report.compatible
    assert report.probe is None


def test_the_catalog_pair_is_suggested_for_its_target():
    folder = Path("/models")
    target = folder / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    smollm = str(folder / "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert suggest(target, smollm, smollm, False) == (
        "The catalog pairs Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) with Qwen2.5-Coder-0.5B-Instruct (Q4_K_M): "
        "`draftlight pair qwen2.5-coder-1.5b qwen2.5-coder-0.5b` checks that pair."
    )
    drafter = str(folder / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
    assert suggest(target, "default", drafter, True) == ""
    assert suggest(target, "qwen2.5-coder-0.5b", drafter, True) == ""
    big = folder / "Qwen3.6-27B-Q4_K_M.gguf"
    assert suggest(big, "none", None, False) == (
        "Qwen3.6-27B with its MTP head (Q4_K_M) drafts for itself: `draftlight pair qwen3.6-27b-mtp mtp` checks that pair."
    )
    assert suggest(big, "mtp", None, True) == ""


def test_a_target_outside_the_catalog_is_offered_its_own_heads(files, no_profiles):
    report = pair_report(files["hybrid_mtp"], "none", probe_seconds=0)
    assert report.suggestion == (
        f"draftlight test hybrid with MTP carries 1 multi-token-prediction head: it drafts for itself. "
        f"`draftlight pair {files['hybrid_mtp']} mtp` checks that pair."
    )


def _probe(rounds: list[tuple[int, int]]) -> Probe:
    drafted, accepted = sum(d for d, _ in rounds), sum(a for _, a in rounds)
    return Probe("the built-in prompts", 3, 1.0, (PromptProbe("code", 20, drafted, accepted, False),), tuple(rounds))


def test_the_prediction_uses_the_probes_acceptance_and_this_boxs_costs(tmp_path):
    options = RuntimeOptions()
    target, drafter = tmp_path / "t.gguf", tmp_path / "d.gguf"
    for path in (target, drafter):
        path.write_bytes(b"GGUF")
    rounds = [(3, 3), (3, 2), (3, 1), (3, 3), (3, 0)]
    paying = box_profiles.profile(target, drafter, options, *box_profiles.PAYING)
    found = predict_speed(paying, _probe(rounds), target, drafter, "model")
    best, rates = best_depth(paying, conditional_acceptance(rounds, paying.max_depth))
    assert best > 0
    assert (found.depth, found.tps, found.plain_tps) == (best, rates[best], rates[0])
    assert found.sentence == (
        f"At the probe's acceptance (60%), depth {best} is predicted at {rates[best]:.1f} tok/s on this box "
        f"against {rates[0]:.1f} plain: {rates[best] / rates[0]:.2f}x."
    )
    assert found.profile_basis == f"plain {1 / paying.plain_pass_s:.1f} tok/s ±0%, measured today"
    hopeless = box_profiles.profile(target, drafter, options, *box_profiles.HOPELESS)
    assert predict_speed(hopeless, _probe(rounds), target, drafter, "model").sentence == why_plain(hopeless)


def test_a_probe_says_what_it_measured():
    probe = _probe([(3, 3), (3, 0)])
    assert (
        probe.summary() == "Acceptance 50% overall (3 of 6 drafts) at depth 3 on 1 of the built-in prompts, in 1.0 s."
    )
    assert PromptProbe("x", 1, 0, 0, True).acceptance is None
    assert Probe("the built-in prompts", 3, 0.0, note="The probe did not run: x.").summary() == (
        "The probe did not run: x."
    )


def test_a_file_that_is_not_a_model_is_one_sentence(tmp_path, no_profiles):
    notes = tmp_path / "notes.gguf"
    notes.write_text("Hello, these are notes.")
    with pytest.raises(ModelFileError) as caught:
        pair_report(notes, "none", probe_seconds=0)
    assert str(caught.value) == (
        "notes.gguf is not a GGUF model file (it starts with 'Hell', not 'GGUF'). Choose a .gguf file made for llama.cpp."
    )


def test_the_command_refuses_bad_input_in_one_sentence_with_status_2(tmp_path):
    notes = tmp_path / "notes.gguf"
    notes.write_text("Hello, these are notes.")
    result = run_pair(str(notes), "none", tmp_path=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "draftlight: notes.gguf is not a GGUF model file (it starts with 'Hell', not 'GGUF'). "
        "Choose a .gguf file made for llama.cpp."
    ]
    missing = run_pair(str(tmp_path / "gone.gguf"), "none", tmp_path=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.startswith(f"draftlight: No model file at {tmp_path / 'gone.gguf'}, and no catalog model")
    assert len(missing.stderr.strip().splitlines()) == 1
    bad = run_pair(str(notes), "--probe-seconds", "-1", tmp_path=tmp_path)
    assert bad.returncode == 2
    assert "'-1' is not a number above 0 and at most 3600" in bad.stderr


def test_the_memory_sentence_names_the_runtime_that_holds_the_pair():
    from engine.models.pairing import Memory

    sizes = dict(target_weights=1_000_000_000, drafter_weights=400_000_000, target_kv=60_000_000, drafter_kv=0)
    llama = Memory(**sizes, n_ctx=4096, kv_type="f16")
    mlx = Memory(**sizes, n_ctx=4096, kv_type="f16", runtime="mlx")
    head = "About 1.46 GB: weights 1.00 GB + 400 MB, and a KV cache of 60 MB for 4,096 tokens (f16); "
    assert llama.sentence() == head + "llama.cpp adds its working buffers (tens of MB on a CPU)."
    assert mlx.sentence() == head + "MLX adds the arrays each pass computes, freed as it goes."
