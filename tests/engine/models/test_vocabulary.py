"""One set of vocabulary rules over both readers: the same difference between a target and a drafter gives the
same rules and the same sentences whether the two vocabularies are read from loaded GGUF models (llama.cpp's
vocabulary loader, files written here) or from MLX folders (their config.json, tokenizer_config.json and
tokenizer.json, written here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.models.facts import read_mlx
from engine.models.mlx_compat import check_folders
from engine.models.vocabulary import (
    Vocabulary,
    check,
    folder_vocabulary,
    loaded_vocabulary,
    vocabulary_rules,
)
from engine.runtime import Model
from tests.engine.models.mlx_trees import mlx_folder
from tests.engine.synthetic import vocabulary_gguf

SIZE = 300
EOS = 2
SPECIAL = {"<unk>": 0, "<s>": 1, "</s>": 2, "<|im_end|>": 6}


def tokens(size: int = SIZE, special: dict[str, int] | None = None) -> dict[str, int]:
    """A vocabulary of `size` tokens: the special ones, then words spelled by their id."""
    special = SPECIAL if special is None else special
    return {**{f"w{i}": i for i in range(size) if i not in special.values()}, **special}


# Each pair: what the drafter's vocabulary changes of the target's (tokens, eos).
PAIRS = {
    "alike": {},
    "a token spelled differently": {"tokens": {**tokens(), "w9": 10, "w10": 9}},
    "sizes 200 apart": {"tokens": tokens(SIZE + 200)},
    "a different eos": {"eos": 6},
    "a different special token": {"tokens": tokens(special={**SPECIAL, "<|im_end|>": -1, "<|end|>": 6})},
}

EXPECTED = {
    "alike": [
        ("vocabulary type", True, "Both vocabularies are SentencePiece (SPM)."),
        ("special tokens", True, "The special tokens agree: neither adds a start-of-text token, both add end-of-text token 2."),
        ("vocabulary size", True, "The sizes match: 300 tokens each (at most 128 apart allowed)."),
        ("token texts", True, "Every token from id 5 to 299 is spelled the same in both."),
    ],
    "a token spelled differently": [("token texts", False, "Token 9 is 'w9' in the target and 'w10' in the drafter.")],
    "sizes 200 apart": [
        ("vocabulary size", False, "The target has 300 tokens and the drafter 500 (200 apart; at most 128 allowed).")
    ],
    "a different eos": [("special tokens", False, "The end-of-text token is 2 in the target and 6 in the drafter.")],
    "a different special token": [
        ("token texts", False, "Token 6 is '<|im_end|>' in the target and '<|end|>' in the drafter.")
    ],
}  # fmt: skip


def _clean(vocabulary: dict[str, int]) -> dict[str, int]:
    return {t: i for t, i in vocabulary.items() if i >= 0}


def write_gguf(path: Path, change: dict) -> Path:
    return vocabulary_gguf(path, _ids(_clean(change.get("tokens", tokens()))), eos=change.get("eos", EOS))


def write_folder(path: Path, change: dict) -> Path:
    vocabulary = _clean(change.get("tokens", tokens()))
    folder = mlx_folder(path, vocab=len(vocabulary), tokens=None, extra={"eos_token_id": change.get("eos", EOS)})
    special = {t: i for t, i in vocabulary.items() if t.startswith("<")}
    added = [{"id": i, "content": t, "special": True} for t, i in special.items()]
    tokenizer = {"version": "1.0", "added_tokens": added, "model": {"type": "BPE", "vocab": vocabulary, "merges": []}}
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    (folder / "tokenizer_config.json").write_text(json.dumps({"add_bos_token": False, "add_eos_token": True}))
    return folder


def _ids(vocabulary: dict[str, int]) -> list[str]:
    by_id = {i: t for t, i in vocabulary.items()}
    return [by_id[i] for i in range(len(by_id))]


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    root = tmp_path_factory.mktemp("vocabularies")
    out = {"target": (write_gguf(root / "target.gguf", {}), write_folder(root / "target", {}))}
    for i, (name, change) in enumerate(PAIRS.items()):
        out[name] = (write_gguf(root / f"drafter{i}.gguf", change), write_folder(root / f"drafter{i}", change))
    return out


def _found(target: Vocabulary, drafter: Vocabulary, alike: bool) -> list[tuple[str, bool, str]]:
    rules = vocabulary_rules(target, drafter)
    return [(r.name, r.holds, r.sentence) for r in rules if alike or not r.holds]


@pytest.mark.parametrize("pair", list(PAIRS))
def test_both_readers_find_the_same_differences_in_the_same_words(written, pair):
    (target_gguf, target_folder), (drafter_gguf, drafter_folder) = written["target"], written[pair]
    target_model, drafter_model = Model(target_gguf, vocab_only=True), Model(drafter_gguf, vocab_only=True)
    try:
        from_gguf = _found(loaded_vocabulary(target_model), loaded_vocabulary(drafter_model), pair == "alike")
        verdict = check(target_model, drafter_model)
    finally:
        drafter_model.close()
        target_model.close()
    target, drafter = read_mlx(target_folder), read_mlx(drafter_folder)
    assert target is not None and drafter is not None
    from_folders = _found(folder_vocabulary(target), folder_vocabulary(drafter), pair == "alike")
    assert from_gguf == from_folders == EXPECTED[pair]
    assert verdict == check_folders(target_folder, drafter_folder)
    assert verdict.compatible is (pair == "alike")


def test_a_rule_says_so_where_one_side_states_nothing():
    stated = Vocabulary(
        type="byte-level BPE", size=300, bos=1, eos=frozenset({2}), add_bos=True, add_eos=False, spelled=True
    )
    assert [(r.name, r.holds, r.sentence) for r in vocabulary_rules(stated, Vocabulary())] == [
        ("vocabulary type", True, "The drafter's vocabulary does not say its type: the types are not compared."),
        (
            "special tokens",
            True,
            "The special tokens agree: the drafter names no start-of-text token, the target adds no end-of-text token.",
        ),
        ("vocabulary size", True, "The drafter does not say how many tokens it has: the sizes are not compared."),
        ("token texts", True, "The drafter spells no tokens (no tokenizer.json): only the sizes are compared."),
    ]
    assert [r.sentence for r in vocabulary_rules(Vocabulary(), Vocabulary())] == [
        "Neither vocabulary says its type: the types are not compared.",
        "The special tokens agree: neither names a start-of-text token, neither names an end-of-text token.",
        "Neither model says how many tokens it has: the sizes are not compared.",
        "Neither model spells its tokens (no tokenizer.json): only the sizes are compared.",
    ]


def test_token_texts_are_looked_up_no_further_than_a_tokenizer_spells(tmp_path):
    """A config.json may claim more tokens than its tokenizer.json holds: the ids past both tokenizers' last
    are not looked up, and the sentence says which were compared."""
    target = read_mlx(mlx_folder(tmp_path / "target", vocab=4_000))
    drafter = read_mlx(mlx_folder(tmp_path / "drafter", vocab=4_100))
    assert target is not None and drafter is not None
    (texts,) = [
        r for r in vocabulary_rules(folder_vocabulary(target), folder_vocabulary(drafter)) if r.name == "token texts"
    ]
    assert (texts.holds, texts.sentence) == (True, "Every token from id 5 to 7 is spelled the same in both.")
