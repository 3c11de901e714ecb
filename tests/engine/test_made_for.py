"""Made-for at load: a DFlash drafter whose GGUF metadata names another model as its base
(general.base_model.*) loads, and the one sentence the pairing doctor's rule says of it comes
before the first reply: the engine's notice, `draftlight chat` on stderr and in its --json stats.
Tiny files written here (tests/engine/synthetic.py). Fast."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from engine import Engine
from engine.cli import main
from tests.engine import synthetic

SAID = (
    "dflash-llama.gguf was trained for another target: its metadata names Llama 3.1 8B Instruct as its base, "
    "and the target is draftlight test hybrid. Its drafts may be kept less often."
)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("made-for")
    writer = synthetic._writer

    def with_base(path, arch, *args, **kwargs):
        w = writer(path, arch, *args, **kwargs)
        w.add_uint32("general.base_model.count", 1)
        w.add_string("general.base_model.0.name", "Llama 3.1 8B Instruct")
        return w

    out = {
        "hybrid": synthetic.hybrid_qwen35(folder / "hybrid.gguf"),
        "dflash": synthetic.dflash(folder / "dflash.gguf"),
    }
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(synthetic, "_writer", with_base)
        out["other"] = synthetic.dflash(folder / "dflash-llama.gguf")
    return out


@pytest.mark.parametrize(("drafter", "said"), [("other", SAID), ("dflash", "")])
def test_the_engine_says_whom_the_drafter_was_made_for(files, drafter: str, said: str) -> None:
    engine = Engine.load(files["hybrid"], files[drafter])
    try:
        assert engine.drafter is not None and engine.drafter.kind == "dflash"
        assert engine.verdict is not None and engine.verdict.made_for == said
        assert engine.notice.startswith(said)
    finally:
        engine.close()


def test_chat_says_it_before_the_first_reply_and_in_its_json(files, capsys) -> None:
    argv = ["chat", "hello", "--target", str(files["hybrid"]), "--drafter", str(files["other"]), "--depth", "2",
            "--max-tokens", "4", "--ignore-eos"]  # fmt: skip
    assert main(argv) == 0
    err = capsys.readouterr().err
    said = err.splitlines()
    assert said.index(SAID) < next(i for i, line in enumerate(said) if line.startswith("[4 tokens"))  # before the reply
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*argv, "--json"]) == 0
    stats = json.loads(out.getvalue().splitlines()[-1])
    assert stats["type"] == "stats" and stats["made_for"] == SAID
