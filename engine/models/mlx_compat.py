"""MLX pairs from their folders' headers alone: can this folder draft for that target, and `--drafter auto`.

The rules are llama.cpp's in spirit, read from files rather than a loaded vocabulary: the two
tokenizer.json vocabularies spell every token alike (or, where a drafter carries none, the
vocabulary sizes agree within llama.cpp's tolerance), the special tokens agree, and a drafter that
reads the target's insides (DFlash, DSpark, EAGLE-3, a Gemma 4 assistant, an MTP head) passes the one
rule of what it needs of its target (engine.models.rules, over engine.models.facts). A GGUF drafter for an MLX target, or an MLX one for a GGUF target, is refused: the runtimes
differ. Nothing here imports mlx.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from engine.errors import ModelFileError
from engine.models.compat import VOCAB_SIZE_TOLERANCE, Rule, Verdict, verdict_of
from engine.models.facts import mlx_facts, own_root, read_mlx
from engine.models.mlx_folders import MAX_TOKENIZER_BYTES, MlxFolder, inside, read_json
from engine.models.rules import made_for_rule
from engine.runtime.mlx_check import check_folder
from engine.runtime.runtimes import Runtime


@dataclass(frozen=True)
class Vocabulary:
    tokens: dict[str, int] | None  # tokenizer.json's model.vocab; None where the folder has none readable
    special: dict[int, str]  # its added tokens marked special
    eos: frozenset[int]


def refusal(path: str | Path) -> str:
    """Why the MLX loaders would refuse a folder, in the folder check's own sentence (engine.runtime.mlx_check);
    "" where it passes. `--drafter auto`, the listing, the pair verdicts and the loaders run this one check."""
    try:
        check_folder(path)
    except ModelFileError as e:
        return str(e)
    return ""


def vocabulary(folder: MlxFolder) -> Vocabulary:
    eos_value = folder.config.get("eos_token_id")
    eos_ids = eos_value if isinstance(eos_value, list) else [eos_value]
    eos = frozenset(i for i in eos_ids if isinstance(i, int) and not isinstance(i, bool) and i >= 0)
    path = inside(folder.path / "tokenizer.json", own_root(folder.path).resolve())
    data = read_json(path, MAX_TOKENIZER_BYTES) if path is not None else None
    model = data.get("model") if data is not None else None
    vocab = model.get("vocab") if isinstance(model, dict) else None
    tokens = (
        {t: i for t, i in vocab.items() if isinstance(i, int) and not isinstance(i, bool)}
        if isinstance(vocab, dict)
        else None
    )
    added = data.get("added_tokens") if data is not None else None
    special = {
        a["id"]: a["content"]
        for a in (added if isinstance(added, list) else ())
        if isinstance(a, dict) and a.get("special") is True and isinstance(a.get("id"), int)
        if isinstance(a.get("content"), str)
    }
    return Vocabulary(tokens or None, special, eos)


def _rule(name: str, holds: bool, sentence: str) -> Rule:
    return Rule(name, holds, sentence[0].upper() + sentence[1:] + ".", () if holds else (sentence,))


def vocabulary_rules(target: MlxFolder, drafter: MlxFolder) -> tuple[Rule, ...]:
    """The tokens spelled alike, the sizes, the special tokens."""
    a, b = vocabulary(target), vocabulary(drafter)
    found: list[Rule] = []
    if a.tokens is not None and b.tokens is not None:
        if a.tokens == b.tokens:
            found.append(_rule("token texts", True, f"both tokenizers spell their {len(a.tokens):,} tokens alike"))
        else:
            ids_a, ids_b = ({i: t for t, i in v.items()} for v in (a.tokens, b.tokens))
            first = min(i for i in set(ids_a) | set(ids_b) if ids_a.get(i) != ids_b.get(i))
            found.append(
                _rule(
                    "token texts",
                    False,
                    f"token {first:,} is {ids_a.get(first)!r} in the target and {ids_b.get(first)!r} in the drafter",
                )
            )
    else:
        which = "the target carries" if a.tokens is None else "the drafter carries"
        found.append(Rule("token texts", True, f"{which.capitalize()} no tokenizer.json: only sizes are compared."))
    if target.vocab_size is not None and drafter.vocab_size is not None:
        diff = abs(target.vocab_size - drafter.vocab_size)
        sizes = f"the target has {target.vocab_size:,} tokens and the drafter {drafter.vocab_size:,}"
        found.append(
            _rule("vocabulary size", diff <= VOCAB_SIZE_TOLERANCE, f"{sizes} (at most {VOCAB_SIZE_TOLERANCE} apart)")
        )
    shared = set(a.special) & set(b.special)
    differ = sorted(i for i in shared if a.special[i] != b.special[i])
    if differ:
        i = differ[0]
        found.append(_rule("special tokens", False, f"special token {i:,} is {a.special[i]!r} in the target and "
                           f"{b.special[i]!r} in the drafter"))  # fmt: skip
    elif a.eos and b.eos and not a.eos & b.eos:
        found.append(_rule("special tokens", False, f"the target ends text with token {min(a.eos):,} and the "
                           f"drafter with {min(b.eos):,}"))  # fmt: skip
    else:
        found.append(Rule("special tokens", True, "The special tokens agree."))
    return tuple(found)


def runtimes_differ(target: str | Path, drafter: str | Path, target_runtime: Runtime, drafter_runtime: Runtime) -> str:
    """The refusal of a pair whose files are for two runtimes, in a sentence."""
    return (
        f"{Path(drafter).name} is {drafter_runtime.files} and the target {Path(target).name} is "
        f"{target_runtime.files}: the runtimes differ, so one cannot draft for the other; pick a drafter "
        f"made for {target_runtime.label}"
    )


def check_folders(target_path: str | Path, drafter_path: str | Path) -> Verdict:
    """The verdict on an MLX pair, every rule from headers, once each folder passes the loaders' check."""
    target, drafter = read_mlx(target_path), read_mlx(drafter_path)
    for path, folder in ((target_path, target), (drafter_path, drafter)):
        if folder is None:
            return Verdict(False, (f"{Path(path).name} is not an MLX model folder this can read",))
        refused = refusal(path)
        if refused:
            return Verdict(False, (refused.rstrip("."),))
    assert target is not None and drafter is not None  # the loop returned for either that is None
    made_for = made_for_rule(mlx_facts(target), mlx_facts(drafter))
    return verdict_of((*vocabulary_rules(target, drafter), *((made_for,) if made_for else ())))


def candidates(
    target: MlxFolder,
    folders: Iterable[str | Path] = (),
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> list[MlxFolder]:
    """MLX folders that might draft for target: the folders beside it, then the MLX models on this machine."""
    from engine.models.local import local_models

    beside = sorted(p for p in target.path.parent.iterdir() if p.is_dir()) if target.path.parent.is_dir() else []
    paths = [*beside, *(m.path for m in local_models(folders, home, env) if m.is_folder)]
    seen, out = {target.path.resolve()}, []
    for path in paths:
        if path.resolve() in seen:
            continue
        seen.add(path.resolve())
        folder = read_mlx(path)
        if folder is not None:
            out.append(folder)
    return out
