"""The engine on the MLX runtime, end to end: MLX folders (weights, tokenizer, chat template) loaded by
`Engine.load` and by `draftlight chat --target DIR --drafter DIR`, the runtime chosen by the format,
and pairs refused in a sentence. Fast: tiny random-weight folders written here (mlx_folders)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")

from engine.chat import Message
from engine.cli import main
from engine.errors import IncompatibleDrafter, ModelFileError
from engine.events import RunStats, TokenEvent
from engine.rounds import GenerationConfig
from engine.runtime.formats import model_format, runtime_for
from engine.runtime.loading import chosen_runtime
from engine.session import Engine
from tests.engine.runtime.mlx_folders import write_qwen2_folder

PROMPT = "write a function"


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mlx")
    return {
        "target": write_qwen2_folder(root / "target", seed=0),
        "other": write_qwen2_folder(root / "other", seed=3),  # a drafter that disagrees now and then
        "small": write_qwen2_folder(root / "small", seed=0, layers=1),
    }


def chat(*argv: str, max_tokens: int = 24) -> list[dict]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["chat", *argv, "--json", "--max-tokens", str(max_tokens), "--ignore-eos"]) == 0
    return [json.loads(line) for line in out.getvalue().splitlines()]


def ids_and_kinds(lines: list[dict]) -> tuple[list[int], str]:
    tokens = [line for line in lines if "token_id" in line]
    return [t["token_id"] for t in tokens], "".join(t["kind"][0].upper() for t in tokens)


def test_the_format_picks_the_runtime(folders, tmp_path):
    assert model_format(folders["target"]) == "mlx" and runtime_for(folders["target"]) == "mlx"
    assert runtime_for(tmp_path) is None  # an empty folder is nothing
    (tmp_path / "x.gguf").write_bytes(b"GGUF" + bytes(20))
    assert runtime_for(tmp_path / "x.gguf") == "llama"
    with pytest.raises(ModelFileError, match=r"is an MLX model folder and llama[.]cpp reads GGUF files"):
        chosen_runtime(folders["target"], "llama")
    assert chosen_runtime(tmp_path, "auto").name == "mlx"  # a folder: MLX's loader says what it lacks
    assert chosen_runtime(tmp_path / "notes.txt", "auto").name == "llama"  # a file: the GGUF reader's words
    with pytest.raises(ModelFileError, match=f"{tmp_path} is not an MLX model folder: it has no config.json"):
        Engine.load(tmp_path, None)


def test_chat_on_mlx_folders_streams_provenance_equal_to_plain(folders):
    """`draftlight chat PROMPT --target MLX_DIR --drafter MLX_DIR --depth 2 --json`: the greedy ids of
    --depth 0, with provenance. The target drafting for itself is right every time: each round is
    two accepted drafts and a bonus token, after the prefill's plain first token."""
    target = str(folders["target"])
    plain, kinds = ids_and_kinds(chat(PROMPT, "--target", target, "--drafter", str(folders["other"]), "--depth", "0"))
    assert kinds == "P" * 24 and len(set(plain)) > 8
    own, kinds = ids_and_kinds(chat(PROMPT, "--target", target, "--drafter", target, "--depth", "2"))
    assert own == plain and kinds == "P" + "AAB" * 7 + "AB"  # the last round had room for one draft
    other, kinds = ids_and_kinds(chat(PROMPT, "--target", target, "--drafter", str(folders["other"]), "--depth", "2"))
    assert other == plain
    assert "R" in kinds and "A" in kinds and set(kinds) <= set("PARB") and kinds[0] == "P"


def test_ngram_drafts_on_mlx_keep_the_plain_ids(folders):
    """`--drafter ngram` on an MLX folder: the random target repeats itself, the n-grams draft from what
    it said, and the ids are --depth 0's with every kind of token among them."""
    target = str(folders["target"])
    plain, kinds = ids_and_kinds(chat(PROMPT, "--target", target, "--drafter", "ngram", "--depth", "0", max_tokens=48))
    assert kinds == "P" * 48
    drafted, kinds = ids_and_kinds(
        chat(PROMPT, "--target", target, "--drafter", "ngram", "--depth", "3", max_tokens=48)
    )
    assert drafted == plain
    assert kinds == "PPPPPPPAAABAARPPARRPPPPPPRPPAAABARPAAABAARPPRRAB"


def test_the_engine_names_its_runtime_and_renders_with_the_folders_template(folders):
    engine = Engine.load(folders["target"], folders["small"], runtime="auto")
    try:
        assert engine.runtime.name == "mlx" and engine.drafter.kind == "model" and engine.verdict.compatible
        messages = [Message("system", "be brief"), Message("user", PROMPT)]
        ids = engine.prompt_ids(messages)
        # mlx-lm's own rendering of the same conversation: the same template, the same tokens
        tokenizer = engine.target.tokenizer
        theirs = tokenizer.apply_chat_template(
            [{"role": m.role, "content": m.content} for m in messages], add_generation_prompt=True
        )
        assert ids == list(theirs)
        events = list(engine.reply(messages, GenerationConfig(max_tokens=12, depth=3, ignore_eog=True)))
        stats = events[-1]
        assert isinstance(stats, RunStats) and len([e for e in events if isinstance(e, TokenEvent)]) == 12
        assert engine.ctx.tokens[: len(ids)] == ids
    finally:
        engine.close()


def test_a_drafter_of_another_vocabulary_is_refused_in_words(folders, tmp_path):
    odd = write_qwen2_folder(tmp_path / "odd", seed=1, corpus=("Lorem ipsum dolor sit amet, consectetur.",))
    with pytest.raises(
        IncompatibleDrafter,
        match="cannot draft for this target: token 259 is 'Ġf' in the target and 'et' in the drafter",
    ):
        Engine.load(folders["target"], odd)


def test_a_gguf_drafter_beside_an_mlx_target_or_the_reverse_is_refused(folders, tmp_path):
    from engine.models import catalog

    try:
        gguf = catalog.resolve("smollm2-135m", download=False)
    except Exception:
        pytest.skip("the small GGUF test model is not installed (make test-models)")
    with pytest.raises(IncompatibleDrafter, match=r"MLX model folder and .* runs on llama[.]cpp"):
        Engine.load(gguf, folders["target"])
