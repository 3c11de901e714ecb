"""`--drafter auto` and the pair verdicts for MLX folders: the target's own heads, a drafter folder beside it,
a smaller model of its family on this machine; GGUF files refused because the runtimes differ."""

from __future__ import annotations

import json

import pytest

from engine.errors import IncompatibleDrafter, ModelFileError
from engine.models.compat import Verdict
from engine.models.discover import discover, drafter_kind
from engine.models.mlx_compat import check_folders
from tests.engine.models.mlx_trees import QWEN_TOKENS, mlx_folder, plain_tensors, quantized_tensors
from tests.engine.models.test_local import tiny_gguf

DFLASH = {"architectures": ["DFlashDraftModel"], "dflash_config": {"target_layer_ids": [0, 1]}, "num_target_layers": 2}
HEADS = {"text_config": {"mtp_num_hidden_layers": 1}}


@pytest.fixture
def no_home(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))
    for var in ("OLLAMA_MODELS", "HF_HOME", "HF_HUB_CACHE", "LLAMA_CACHE"):
        monkeypatch.delenv(var, raising=False)


def test_a_target_whose_weights_carry_its_heads_drafts_for_itself(tmp_path, no_home):
    with_heads = mlx_folder(
        tmp_path / "Qwen3.6-27B-MTPLX", extra=HEADS, tensors={**quantized_tensors(), "mtp.fc.weight": ("BF16", [4])}
    )
    found = discover(with_heads)
    assert (found.spec, found.said) == (
        "mtp",
        "Qwen3.6-27B-MTPLX carries 1 multi-token-prediction head: it drafts for itself.",
    )


def test_a_dflash_folder_beside_the_target_is_found_and_a_gguf_file_refused(tmp_path, no_home):
    target = mlx_folder(tmp_path / "models/Qwen3.6-27B-4bit", extra=HEADS)  # declares a head its weights lack
    tiny_gguf(tmp_path / "models/dflash-Qwen3.6-27B-Q8_0.gguf", "dflash")
    wide = mlx_folder(tmp_path / "models/Other-DFlash", bits=None, fmt="pt", hidden=128, extra=DFLASH)
    assert discover(target).said == (
        "No drafter found for Qwen3.6-27B-4bit: it carries no MTP heads, and no MLX drafter or smaller model of its "
        "family on this machine fits. Passed over: Qwen3.6-27B-4bit declares an MTP head, but its weights leave it "
        "out (as most MLX conversions do); dflash-Qwen3.6-27B-Q8_0.gguf is a GGUF file and the target "
        "Qwen3.6-27B-4bit is an MLX folder: the runtimes differ, so one cannot draft for the other; pick a drafter "
        "made for MLX; Other-DFlash is a DFlash drafter for a model 128 wide, and the target is 64 wide: it was "
        "trained for another target."
    )
    side = mlx_folder(tmp_path / "models/Qwen3.6-27B-DFlash", bits=None, fmt="pt", tokens=None, extra=DFLASH)
    found = discover(target)
    assert (found.spec, found.said) == (
        str(side),
        "Found Qwen3.6-27B-DFlash: a DFlash drafter, as wide as Qwen3.6-27B-4bit.",
    )
    assert drafter_kind(target, side) == "dflash" and drafter_kind(target, wide) == "dflash"
    assert check_folders(target, side) == Verdict(True)
    assert check_folders(target, wide) == Verdict(
        False,
        ("it is a DFlash drafter for a model 128 wide, and the target is 64 wide: it was trained for another target",),
    )


def test_a_smaller_model_of_the_family_on_this_machine_drafts_when_its_vocabulary_matches(tmp_path):
    home = tmp_path / "home"
    target = mlx_folder(tmp_path / "mine/Qwen3-8B-4bit", layers=8, tensors={**quantized_tensors(), **{
        f"model.layers.{i}.mlp.up_proj.weight": ("U32", [64, 64]) for i in range(8)}})  # fmt: skip
    other = dict(QWEN_TOKENS, hello=7, z=1)
    mlx_folder(home / ".lmstudio/models/someone/Qwen3-Mangled-4bit", tokens=other)
    small = mlx_folder(home / ".lmstudio/models/mlx-community/Qwen3-0.6B-4bit")
    mlx_folder(home / ".lmstudio/models/mlx-community/Llama-3.2-1B-4bit", "llama")  # another family
    found = discover(target, home=home, env={})
    assert (found.spec, found.said) == (str(small), "Qwen3-0.6B-4bit, a smaller qwen3 model, drafts for it.")
    (small / "config.json").unlink()
    found = discover(target, home=home, env={})
    assert found.spec is None
    assert found.said.endswith(
        "Passed over: Qwen3-Mangled-4bit: Token 7 is 'z' in the target and 'hello' in the drafter."
    )


def test_a_pair_across_runtimes_is_refused_in_a_sentence(tmp_path):
    target = mlx_folder(tmp_path / "Qwen3-4B-4bit")
    gguf = tiny_gguf(tmp_path / "Qwen3-0.6B-Q8_0.gguf", "q", 7)
    with pytest.raises(IncompatibleDrafter) as refused:
        drafter_kind(target, gguf)
    assert str(refused.value) == (
        "Qwen3-0.6B-Q8_0.gguf is a GGUF file and the target Qwen3-4B-4bit is an MLX folder: the runtimes differ, "
        "so one cannot draft for the other; pick a drafter made for MLX."
    )
    with pytest.raises(IncompatibleDrafter, match=r"is an MLX folder and the target Qwen3-0\.6B-Q8_0\.gguf is a GGUF"):
        drafter_kind(gguf, target)
    assert drafter_kind(target, "ngram") == "ngram"


def test_the_verdict_names_what_differs(tmp_path):
    target = mlx_folder(tmp_path / "t", vocab=151_936)
    assert check_folders(target, mlx_folder(tmp_path / "same", vocab=151_936 + 128)) == Verdict(True)
    assert check_folders(target, mlx_folder(tmp_path / "far", vocab=152_064 + 1, extra={"eos_token_id": [5, 6]})) == Verdict(
        False,
        ("the end-of-text token is 0 in the target and 5 or 6 in the drafter",
         "the target has 151,936 tokens and the drafter 152,065 (129 apart; at most 128 allowed)"),
    )  # fmt: skip
    assert check_folders(target, tmp_path / "nothing").reasons == ("nothing is not an MLX model folder this can read",)


def test_auto_and_the_verdict_refuse_what_the_loader_would_in_its_sentence(tmp_path, no_home):
    target = mlx_folder(tmp_path / "models/Qwen3-8B-4bit")
    short = mlx_folder(tmp_path / "models/Qwen3-8B-DFlash", bits=None, fmt="pt", tokens=None, layers=5,
                       tensors=plain_tensors(layers=2), extra=DFLASH)  # fmt: skip
    said = "Qwen3-8B-DFlash's config.json says 5 layers and its weights hold 2: the folder is incomplete or its config is wrong"
    assert discover(target).said == (
        "No drafter found for Qwen3-8B-4bit: it carries no MTP heads, and no MLX drafter or smaller model of its "
        f"family on this machine fits. Passed over: {said}."
    )
    assert check_folders(target, short) == Verdict(False, (said,))
    assert check_folders(short, target) == Verdict(False, (said,))
    config = json.loads((target / "config.json").read_text())
    (target / "config.json").write_text(json.dumps({**config, "vocab_size": 10**12}))
    with pytest.raises(ModelFileError) as refused:
        discover(target)
    assert str(refused.value) == (
        "Qwen3-8B-4bit's config.json says vocab_size is 1,000,000,000,000, outside 1 to 4,194,304: not a real model."
    )
