"""The ruler: prompts, statistics and reports from recorded runs, and a short real run."""

from __future__ import annotations

import json
import warnings

import pytest

from engine.errors import DraftlightError
from engine.ruler import report
from engine.ruler.prompts import ARTICLE, BUILT_IN, built_in, load_file
from engine.ruler.runner import Arm, BenchConfig, BenchResult, RunRecord, run_bench


def test_six_built_in_prompts_one_per_kind():
    assert list(BUILT_IN) == ["writing", "summarization", "arithmetic", "qa", "code", "structured"]
    assert 350 <= len(ARTICLE.split()) <= 450
    assert "bubble sort" in BUILT_IN["code"] and "C++" in BUILT_IN["code"]
    assert [p.name for p in built_in(["code", "qa"])] == ["code", "qa"]
    with pytest.raises(DraftlightError, match="No built-in prompt named poetry"):
        built_in(["poetry"])


def test_prompt_files_jsonl_and_spec_bench(tmp_path):
    plain = tmp_path / "mine.jsonl"
    plain.write_text('{"category": "code", "prompt": "a"}\n\n{"category": "code", "prompt": "b"}\n{"prompt": "c"}\n')
    assert [(p.name, p.category, p.text) for p in load_file(plain)] == [
        ("code", "code", "a"),
        ("code-2", "code", "b"),
        ("prompt", "prompt", "c"),
    ]
    spec = tmp_path / "question.jsonl"
    spec.write_text(
        '{"question_id": 81, "category": "writing", "turns": ["Compose a blog post.", "Rewrite it."]}\n'
        '{"question_id": 82, "category": "math", "turns": ["2+2?"]}\n'
    )
    assert [(p.name, p.category, p.text) for p in load_file(spec)] == [
        ("writing-81", "writing", "Compose a blog post."),
        ("math-82", "math", "2+2?"),
    ]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "x"}\n')
    with pytest.raises(DraftlightError, match="line 1 has neither 'prompt' nor 'turns'"):
        load_file(bad)
    bad.write_text("not json\n")
    with pytest.raises(DraftlightError, match="line 1 is not JSON"):
        load_file(bad)


def _rec(arm, prompt, tps, decode_s, rounds, generated=96, drafted=None, accepted=None, acc=(), ids=None, **kw):
    return RunRecord(
        arm=arm, prompt=prompt, repeat=kw.pop("repeat", 0), prompt_tokens=40, generated_tokens=generated,
        prefill_s=kw.pop("prefill_s", 0.5), decode_s=decode_s, decode_tps=tps, end_to_end_tps=tps * 0.9,
        rounds=rounds, drafted=drafted, accepted=accepted, acceptance_per_position=list(acc),
        token_ids=list(ids or range(generated)), **kw,
    )  # fmt: skip


def _result(records):
    cfg = {"target": "t.gguf", "drafter": "d.gguf", "arms": [], "n_tokens": 96, "repeats": 3, "threads": 2,
           "n_ctx": 4096, "thinking": False, "oracle": "stock"}  # fmt: skip
    return BenchResult(cfg, {"cpu": "test cpu", "cpu_count": 2}, {"code": "rendered"}, records)


def test_statistics_from_recorded_runs():
    records = [
        # ours: plain at 20 tok/s (95 rounds of 50 ms after the prefill's token); depth 1 at 25 tok/s
        _rec("ours d0", "code", 20.0, 4.75, 95, repeat=0),
        _rec("ours d0", "code", 19.0, 5.0, 95, repeat=1),
        _rec("ours d0", "code", 21.0, 4.52, 95, repeat=2),
        _rec(
            "ours d1",
            "code",
            25.0,
            3.8,
            51,
            drafted=50,
            accepted=45,
            acc=[0.9],
            draft_s=1.0,
            verify_s=2.6,
            commit_s=0.2,
            rewind_s=0.01,
            overhead_s=0.05,
        ),
        # llama.cpp: 95 decoded tokens after the prefill's first
        _rec("llama.cpp d0", "code", 19.0, 5.0, 95),
        _rec("llama.cpp d1", "code", 20.0, 4.75, 50, drafted=50, accepted=45),
    ]
    cells, overall = report.summarize(_result(records))
    cell = {c.arm: c for c in cells}
    assert cell["ours d0"].decode_tps == 20.0 and cell["ours d0"].runs == 3  # the median of three
    d1 = cell["ours d1"]
    assert d1.speedup == pytest.approx(25.0 / 20.0)
    assert d1.round_cost == pytest.approx((3.8 / 51) / (4.75 / 95))
    assert d1.round_cost_from_speedup == pytest.approx((1 + 0.9) / (25.0 / 20.0))
    assert d1.vs_llama == pytest.approx(25.0 / 20.0)
    assert d1.mean_length == pytest.approx(95 / 51)
    assert d1.split_ms["draft"] == pytest.approx(1000 / 51)
    assert d1.split_ms["commit"] == pytest.approx((0.2 - 0.01) * 1000 / 51)
    assert d1.overhead_ms == pytest.approx(50 / 51)
    theirs = cell["llama.cpp d1"]
    assert theirs.mean_length == pytest.approx(95 / 50)
    assert theirs.acceptance == [pytest.approx(0.9)]
    assert theirs.round_cost == pytest.approx((4.75 / 50) / (5.0 / 95))
    over = {c.arm: c for c in overall}
    assert over["ours d1"].decode_tps == pytest.approx(95 / 3.8)
    assert over["ours d0"].speedup == pytest.approx(1.0)


def test_mismatches_are_reported_with_the_first_differing_token():
    records = [
        _rec("ours d0", "code", 20, 4.8, 96, ids=[1, 2, 3, 4]),
        _rec("ours d2", "code", 20, 4.8, 40, ids=[1, 2, 3, 4]),
        _rec("llama.cpp d0", "code", 20, 4.8, 95, ids=[1, 2, 9, 4]),
    ]
    wrong = report.mismatches(_result(records))
    assert wrong == ["code: llama.cpp d0 differs from ours d0 at token 2 (9 vs 3)"]
    md = report.markdown(_result(records))
    assert "MISMATCH code: llama.cpp d0 differs" in md


def test_report_files(tmp_path):
    records = [
        _rec("ours d0", "code", 20.0, 4.8, 96),
        _rec("ours d1", "code", 25.0, 3.8, 51, drafted=50, accepted=45, acc=[0.9]),
    ]
    paths = report.write(_result(records), tmp_path)
    md = paths["markdown"].read_text()
    assert "| ours d1 | 25.00 |" in md and "## Overall" in md and "### code" in md
    data = json.loads(paths["json"].read_text())
    assert len(data["records"]) == 2 and data["records"][1]["acceptance_per_position"] == [0.9]
    assert data["mismatches"] == []
    assert paths["tokens_per_second"].read_bytes()[:4] == b"\x89PNG"
    assert paths["acceptance"].read_bytes()[:4] == b"\x89PNG"


def test_a_short_real_run_agrees_with_itself_and_the_oracle(target_path, drafter_path):
    from engine.ruler.oracle import find_oracle

    build = find_oracle()
    arms = [Arm("ours", "none", 0), Arm("ours", "model", 2), Arm("ours", "ngram", 3)]
    if build is not None:
        arms += [Arm("llama.cpp", "none", 0), Arm("llama.cpp", "model", 2)]
    config = BenchConfig(target_path, drafter_path, built_in(["code"]), arms, n_tokens=12, repeats=1, cool_pause_s=0.0)
    lines = []
    result = run_bench(config, build, lines.append)
    assert len(result.records) == len(arms)
    assert report.mismatches(result) == []
    assert {r.generated_tokens for r in result.records} == {12}
    prompt_tokens = {r.arm: r.prompt_tokens for r in result.records}
    if build is not None:  # the same bytes, tokenized alike by both engines
        assert prompt_tokens["llama.cpp d0"] == prompt_tokens["ours d0"]
    runs = [line for line in lines if line.startswith("[")]  # one progress line per arm and prompt
    assert len(runs) == len(arms) and all("repeat 1/1" in line and "tok/s" in line for line in runs)


def test_an_auto_arm_runs_what_the_command_line_runs_where_drafts_cannot_pay(
    target_path, drafter_path, tmp_path, monkeypatch
):
    """With a saved profile saying no depth could pay here, "ours auto" decodes plainly on the
    fast layout (as `draftlight chat --depth auto` does), and the report says why."""
    from engine.measure.profile import save_profile
    from engine.runtime import RuntimeOptions
    from tests.engine.box_profiles import HOPELESS, profile

    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path))
    save_profile(profile(target_path, drafter_path, RuntimeOptions(n_ctx=4096), *HOPELESS))
    arms = [Arm("ours", "model", "auto"), Arm("ours", "none", 0, fast=True)]
    config = BenchConfig(target_path, drafter_path, built_in(["code"]), arms, n_tokens=12, repeats=1, cool_pause_s=0.0)
    result = run_bench(config, None, progress=lambda _m: None)
    auto, plain = result.records
    assert auto.arm == "ours auto" and auto.drafted == 0 and auto.rounds == 11 and auto.depth_used == []
    assert auto.token_ids == plain.token_ids  # the fast layout's plain text: the same engine, the same settings
    assert len(result.notes) == 1 and result.notes[0].startswith("ours auto: Speculation cannot pay on this machine")


def test_a_report_with_no_draft_says_so_in_its_acceptance_chart(tmp_path):
    """Depth 0 alone: the acceptance chart carries a sentence, not an empty legend (matplotlib warned)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        paths = report.write(_result([_rec("ours d0", "code", 20.0, 4.8, 96)]), tmp_path)
    assert paths["acceptance"].read_bytes()[:4] == b"\x89PNG"
