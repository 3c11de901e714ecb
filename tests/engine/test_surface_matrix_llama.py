"""Every llama.cpp drafter kind on every surface: `draftlight chat`, `draftlight serve` with a request,
`draftlight pair` and its probe, `tune` and Auto depth, a short `draftlight bench` (the app's load, reply,
teaching and lab: tests/app/test_surface_matrix_app_llama.py; bench beside stock llama.cpp:
tests/engine/ruler/test_ruler_kinds.py).

Tiny GGUF files known by construction, written here by tests/engine/synthetic*.py (surface_files): a
hybrid Qwen 3.5 target with its MTP head, a draft model of the same vocabulary, DFlash, DSpark and
EAGLE-3 drafters reading its layers, a Gemma 4 target with its assistant. Each surface loads the drafter
through the engine's one load path and says the kind it loaded; greedy ids are depth 0's; a drafter that
knows the target's choices has drafts accepted. A drafter made for another target, or reading layers
past the target's, is refused in one sentence by each surface. The twin of test_surface_matrix.py (MLX).
"""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("gguf")

from engine.cli import main
from tests.engine.surface_cli import chat_lines, spec
from tests.engine.surface_files import MATRIX, MISMATCHED, PROMPT, WORDS, write_files
from tests.served import free_port, healthy

N = 12
DEPTH = 2


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    return write_files(tmp_path_factory.mktemp("surfaces-llama"))


def chat(files: dict[str, Path], target: str, drafter: str, depth: int | str = DEPTH) -> list[dict]:
    return chat_lines(files, PROMPT, target, drafter, depth, N)


@pytest.fixture(scope="module")
def plain_ids(files) -> dict[str, list[int]]:
    """Each target's greedy ids at depth 0, no drafter."""
    return {t: chat(files, t, "none", 0)[-1]["token_ids"] for t in ("qwen35", "gemma4")}


@pytest.mark.parametrize("kind", list(MATRIX))
def test_chat_loads_each_kind_and_writes_depth_0s_ids(files, plain_ids, kind: str):
    target, drafter, knows = MATRIX[kind]
    lines = chat(files, target, drafter)
    stats = lines[-1]
    assert stats["drafter_kind"] == kind
    assert stats["token_ids"] == plain_ids[target] and len(stats["token_ids"]) == N
    assert stats["drafted"] > 0
    if knows:
        assert stats["accepted"] > 0 and "accepted" in {t["kind"] for t in lines if t["type"] == "token"}


@pytest.fixture(scope="module")
def served(files):
    """`draftlight serve` as its command runs it (Engine.load, then the app on uvicorn), one pair at a time."""
    import uvicorn

    from engine.runtime import RuntimeOptions
    from engine.serve.app import ServeConfig, build_app
    from engine.session import Engine

    @contextlib.contextmanager
    def running(target: str, drafter: str):
        engine = Engine.load(spec(files, target), spec(files, drafter), RuntimeOptions())
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(build_app(engine, target, ServeConfig()), port=port, log_level="error"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        try:
            while not healthy(port):
                time.sleep(0.05)
            yield port
        finally:
            server.should_exit = True
            thread.join(timeout=30)
            engine.close()

    return running


@pytest.mark.parametrize("kind", list(MATRIX))
def test_serve_answers_a_request_with_each_kind(served, plain_ids, kind: str):
    target, drafter, knows = MATRIX[kind]
    with served(target, drafter) as port:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        body = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": N, "ignore_eos": True,
                "draftlight": {"depth": DEPTH}}  # fmt: skip
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body))
        response = conn.getresponse()
        assert response.status == 200
        answer = json.loads(response.read())["draftlight"]
    stats = answer["stats"]
    assert stats["drafter_kind"] == kind and stats["token_ids"] == plain_ids[target]
    assert stats["drafted"] > 0
    if knows:
        assert stats["accepted"] > 0


@pytest.mark.parametrize("kind", list(MATRIX))
def test_tune_and_auto_depth_reach_each_kind(files, plain_ids, kind: str, tmp_path, monkeypatch, capsys):
    """`draftlight tune` profiles the pair, and a reply at Auto depth loads the same kind and writes depth 0's ids."""
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path))
    target, drafter, _ = MATRIX[kind]
    code = main(["tune", "--target", spec(files, target), "--drafter", spec(files, drafter)])
    said = capsys.readouterr()
    # A draft model costs a pass of its own a draft: tune refuses to save a profile whose drafter step measured
    # slower than the target's pass (a busy box), and where the profile says no depth can pay, Auto drops the
    # drafter (Engine.depth_policy) rather than run slower than plain. Both rest on timings, so either is right
    # for it; the other kinds are profiled and kept whatever the box.
    if kind == "model" and code == 2:
        assert said.err.splitlines()[-1].startswith(
            "draftlight: The box profile was not saved: a drafter step measured"
        )
    else:
        assert code == 0 and "Box profile for" in said.out
    stats = chat(files, target, drafter, "auto")[-1]
    assert stats["drafter_kind"] in ((kind, "none") if kind == "model" else (kind,))
    assert stats["token_ids"] == plain_ids[target]


def pair(files: dict[str, Path], target: str, drafter: str, probe: bool = True) -> tuple[int, dict, str]:
    out, err = io.StringIO(), io.StringIO()
    argv = ["pair", spec(files, target), spec(files, drafter), "--json", "--max-prompts", "1", "--max-tokens",
            "8", *(["--probe-seconds", "60"] if probe else ["--no-probe"])]  # fmt: skip
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, json.loads(out.getvalue()), err.getvalue()


@pytest.mark.parametrize("kind", list(MATRIX))
def test_pair_passes_each_kind_and_its_probe_runs(files, kind: str):
    target, drafter, knows = MATRIX[kind]
    code, report, _ = pair(files, target, drafter)
    assert code == 0 and report["compatible"] and report["drafter_kind"] == kind and report["runtime"] == "llama"
    probe = report["probe"]
    assert probe["drafted"] > 0 and probe["note"] == ""
    if knows:
        assert probe["accepted"] > 0


@pytest.mark.parametrize("name", list(MISMATCHED))
def test_a_mismatched_drafter_is_refused_in_one_sentence_by_pair_and_chat(files, name: str, capsys):
    """The doctor's rule and the load path's check are one (engine.models.rules.fits): pair fails the rule
    and says on stderr the very sentence chat refuses the pair with, and no traceback. Layers are counted
    without the target's MTP head: its block is no layer a drafter can read."""
    target, kind, clause = MISMATCHED[name]
    code, report, said = pair(files, target, name, probe=False)
    assert code == 1 and not report["compatible"] and report["drafter_kind"] == kind
    (failed,) = [r for r in report["rules"] if not r["holds"]]
    assert failed["name"] == "made for this target" and clause in failed["sentence"]
    argv = ["chat", PROMPT, "--target", str(files[target]), "--drafter", str(files[name]), "--depth", "2"]
    assert main(argv) == 2
    refused = capsys.readouterr().err
    assert (
        refused
        == said
        == f"draftlight: The drafter cannot draft for this target: it is {WORDS[kind]} {clause}: it was trained for another target.\n"
    )


def test_the_same_prompt_again_on_a_hybrid_target_rewinds_past_its_snapshots(files, plain_ids):
    """The lab's runs, a regenerated reply: the prompt's pass is kept, the reply after it undone. A hybrid
    target's state past its snapshots is decoded again from the prompt, which once lost the prompt's row
    (TypeError in the lab for a draft model and n-gram); the second run writes the first's ids."""
    from engine import Engine, GenerationConfig, Message

    engine = Engine.load(files["qwen35"], files["draft"])
    try:
        prompt = engine.prompt_ids([Message("user", PROMPT)])
        runs = [
            list(engine.stream(prompt, GenerationConfig(max_tokens=N, depth=depth, ignore_eog=True)))[-1].token_ids
            for depth in (0, 2, 2)
        ]
    finally:
        engine.close()
    assert runs == [runs[0]] * 3 and len(runs[0]) == N


@pytest.mark.parametrize("target", ["qwen35", "gemma4"])
def test_a_short_bench_runs_each_kind_beside_depth_0(files, target: str, tmp_path, monkeypatch):
    """`draftlight bench` (our arms: the oracle's are tests/engine/ruler/test_ruler_kinds.py) with every kind
    of the target's as an arm: --strict exits 1 where an arm's greedy ids differ from depth 0's."""
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path / "cache"))
    names = [kind for kind, (t, _, _) in MATRIX.items() if t == target]
    drafters = [a for kind in names for a in ("--drafter", spec(files, MATRIX[kind][1]))]
    argv = ["bench", "--target", str(files[target]), *drafters, "--depths", "0,2", "--ngram-depth", str(DEPTH if "ngram" in names else 0), "--only",
            "code", "--tokens", str(N), "--repeats", "1", "--no-oracle", "--strict", "--cool-pause", "0", "--out",
            str(tmp_path / "bench")]  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0
    found = json.loads((tmp_path / "bench" / "bench.json").read_text())
    arms = {r["arm"]: r for r in found["records"]}
    named = {kind: f"ours d{DEPTH}" if kind == "model" else f"ours {kind} d{DEPTH}" for kind in names}
    assert set(arms) == {"ours d0", *named.values()} and found["mismatches"] == []
    for kind, arm in named.items():
        assert arms[arm]["generated_tokens"] == N and arms[arm]["drafted"] > 0, arm
        assert arms[arm]["accepted"] > 0 or not MATRIX[kind][2], arm
