"""What a GGUF drafter that reads the target needs of it (engine.models.rules.fits): its width, the
layers it reads inside the target's depth, an assistant's family and the shape of the cache it reads.
The pairing doctor's rule and the load path refuse by this one rule, so `draftlight pair` and
`draftlight chat` refuse a mismatched drafter of each kind in the same sentence, and where the rule
holds the probe runs. Tiny files written here (tests/engine/synthetic*.py). Fast."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from engine.cli import main
from engine.models.facts import gguf_facts
from engine.models.rules import fits
from engine.runtime.gguf import read_gguf
from tests.engine import synthetic

pytest.importorskip("gguf")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from synthetic_gemma4 import gemma4_assistant  # it imports `synthetic` as a top-level module

TRAINED = ": it was trained for another target."
# file: (the kind the doctor names, the clause its rule fails with)
MISMATCHED = {
    "dflash-deep": ("dflash", "is a DFlash drafter reading the target's layers 0 and 5, and draftlight test hybrid "
                    "has layers 0 to 1"),
    "eagle3-deep": ("eagle3", "is an EAGLE-3 drafter reading the target's layers 0, 1 and 7, and draftlight test "
                    "hybrid has layers 0 to 1 and its final state"),
    "mtp-gemma-4": ("assistant", "is a Gemma 4 assistant model for a model 128 wide, and draftlight test hybrid is "
                    "256 wide"),
    "eagle3-map": ("eagle3", "is an EAGLE-3 drafter mapping its tokens into a vocabulary of 5, and draftlight test "
                   "hybrid has 128"),
}  # fmt: skip


@contextlib.contextmanager
def reading(layers: list[int]):
    """The writers of tests/engine/synthetic.py, with a drafter's target layers set to `layers`."""
    writer = synthetic._writer

    def with_layers(*args, **kwargs):
        w = writer(*args, **kwargs)
        add_array = w.add_array
        w.add_array = lambda key, value: add_array(key, layers if key.endswith(".target_layers") else value)
        return w

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(synthetic, "_writer", with_layers)
        yield


@contextlib.contextmanager
def without_map():
    """The writers of tests/engine/synthetic.py, leaving out an EAGLE-3 drafter's `d2t`: its output rows then
    write a vocabulary of their own, not the target's."""
    writer = synthetic._writer

    def no_d2t(*args, **kwargs):
        w = writer(*args, **kwargs)
        add_tensor = w.add_tensor
        w.add_tensor = lambda name, *rest, **kw: None if name == "d2t" else add_tensor(name, *rest, **kw)
        return w

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(synthetic, "_writer", no_d2t)
        yield


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("gguf-fits")
    out = {
        "hybrid": synthetic.hybrid_qwen35(folder / "hybrid.gguf"),
        "dflash": synthetic.dflash(folder / "dflash.gguf"),
        "eagle3": synthetic.eagle3(folder / "eagle3.gguf"),
        "mtp-gemma-4": gemma4_assistant(folder / "mtp-gemma-4.gguf"),
    }
    with reading([0, 5]):
        out["dflash-deep"] = synthetic.dflash(folder / "dflash-deep.gguf")
    with reading([0, 1, 7]):
        out["eagle3-deep"] = synthetic.eagle3(folder / "eagle3-deep.gguf")
    with without_map():
        out["eagle3-map"] = synthetic.eagle3(folder / "eagle3-map.gguf", vocab=(3, 4, 5, 6, 7))
    return out


def pair(target: Path, drafter: Path, probe: bool) -> tuple[int, dict, str]:
    out, err = io.StringIO(), io.StringIO()
    argv = ["pair", str(target), str(drafter), "--json", "--max-prompts", "1", "--max-tokens", "6",
            *(["--probe-seconds", "60"] if probe else ["--no-probe"])]  # fmt: skip
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, json.loads(out.getvalue()), err.getvalue()


@pytest.mark.parametrize("name", list(MISMATCHED))
def test_pair_and_chat_refuse_a_mismatched_gguf_drafter_in_one_sentence(files, name, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path))
    kind, clause = MISMATCHED[name]
    code, report, said = pair(files["hybrid"], files[name], probe=False)
    assert code == 1 and not report["compatible"] and report["drafter_kind"] == kind
    (failed,) = [r for r in report["rules"] if not r["holds"]]
    assert failed["name"] == "made for this target" and failed["sentence"] == f"{name}.gguf {clause}{TRAINED}"
    argv = ["chat", "hello", "--target", str(files["hybrid"]), "--drafter", str(files[name]), "--depth", "2"]
    assert main(argv) == 2
    refused = capsys.readouterr().err
    assert refused == said == f"draftlight: The drafter cannot draft for this target: it {clause}{TRAINED}\n"


@pytest.mark.parametrize("name", ["dflash", "eagle3"])
def test_a_drafter_whose_rule_holds_has_its_probe_run(files, name, tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTLIGHT_CACHE", str(tmp_path))
    code, report, _ = pair(files["hybrid"], files[name], probe=True)
    assert code == 0 and report["compatible"] and report["drafter_kind"] == name
    assert report["probe"]["note"] == "" and report["probe"]["drafted"] > 0


def test_an_assistant_beside_another_family_of_its_shape_is_refused_by_its_header(files):
    """A target as wide as the assistant's, with the cache it reads, of another family: refused for the family."""
    assistant = read_gguf(files["mtp-gemma-4"])
    target = read_gguf(files["hybrid"])
    arch, theirs = target.architecture, assistant.metadata
    shaped = {
        **target.metadata,
        f"{arch}.embedding_length": theirs["gemma4-assistant.embedding_length_out"],
        **{f"{arch}.attention.{k}": theirs.get(f"gemma4-assistant.attention.{k}") for k in ("head_count_kv", "key_length")},
    }  # fmt: skip
    said, why_not = fits(gguf_facts(replace(target, metadata=shaped)), gguf_facts(assistant))
    assert said == "a Gemma 4 assistant model"
    assert why_not == (
        "is a Gemma 4 assistant model made for a Gemma 4 target, and draftlight test hybrid is qwen35: it was "
        "trained for another target"
    )
