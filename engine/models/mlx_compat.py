"""MLX pairs from their folders' headers alone: can this folder draft for that target, and `--drafter auto`.

The rules are llama.cpp's in spirit, read from files rather than a loaded vocabulary: the two
tokenizer.json vocabularies spell every token alike (or, where a drafter carries none, the
vocabulary sizes agree within llama.cpp's tolerance), the special tokens agree, and a drafter that
reads the target's insides (DFlash, DSpark, EAGLE-3, a Gemma 4 assistant, an MTP head) is as wide as
the target. A GGUF drafter for an MLX target, or an MLX one for a GGUF target, is refused: the runtimes
differ. Nothing here imports mlx.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from engine.drafting import kinds
from engine.errors import ModelFileError
from engine.models.compat import VOCAB_SIZE_TOLERANCE, Rule, Verdict, verdict_of
from engine.models.mlx_folders import (
    DRAFTER_WORDS,
    MAX_TOKENIZER_BYTES,
    MlxFolder,
    inside,
    read_folder,
    read_header,
    read_json,
)
from engine.runtime.mlx_check import check_folder
from engine.runtime.runtimes import Runtime

KIND_OF = {"dflash": kinds.DFLASH, "dspark": kinds.DSPARK, "eagle3": kinds.EAGLE3, "assistant": kinds.ASSISTANT,
           "mtp": kinds.MTP}  # fmt: skip
WIDTH_KEYS = ("target_hidden_size", "backbone_hidden_size")
ASSISTANT_TARGETS = frozenset({"gemma4", "gemma4_text"})  # the families a Gemma 4 assistant attends to
WORDS = DRAFTER_WORDS


@dataclass(frozen=True)
class Vocabulary:
    tokens: dict[str, int] | None  # tokenizer.json's model.vocab; None where the folder has none readable
    special: dict[int, str]  # its added tokens marked special
    eos: frozenset[int]


def own_root(folder: Path) -> Path:
    """The root a folder's files may be read inside: a Hugging Face snapshot's repository (its files are
    symlinks into ../../blobs), else the folder itself."""
    return folder.parents[1] if folder.parent.name == "snapshots" else folder


def name_of(folder: MlxFolder) -> str:
    parts = folder.path.parts
    if folder.path.parent.name == "snapshots" and parts[-3].startswith("models--"):
        return parts[-3][len("models--") :].replace("--", "/")
    return folder.path.name


def read_mlx(path: str | Path) -> MlxFolder | None:
    folder = Path(path).expanduser()
    return read_folder(folder, own_root(folder))


def refusal(path: str | Path) -> str:
    """Why the MLX loaders would refuse a folder, in the folder check's own sentence (engine.runtime.mlx_check);
    "" where it passes. `--drafter auto`, the listing, the pair verdicts and the loaders run this one check."""
    try:
        check_folder(path)
    except ModelFileError as e:
        return str(e)
    return ""


def checked(path: str | Path) -> MlxFolder:
    """A folder's description once the loaders' check passes; else ModelFileError with the check's sentence,
    or, where the folder is whole and still not one MLX loads, a sentence saying so."""
    check_folder(path)
    folder = read_mlx(path)
    if folder is None:
        raise ModelFileError(f"{Path(path).name} is not an MLX model folder this can read.")
    return folder


def kind_of(folder: MlxFolder) -> kinds.DrafterKind:
    """The kind of drafter an MLX folder is: a draft model of its own unless its config says otherwise."""
    return KIND_OF.get(folder.drafter, kinds.MODEL)


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


def made_for_rule(target: MlxFolder, drafter: MlxFolder) -> Rule | None:
    """Whether a drafter that reads the target's insides is as wide (and, for DFlash, as deep) as the target;
    None for a draft model of its own."""
    kind = kind_of(drafter)
    if not kind.reads_target:
        return None
    what, why_not = fits(target, drafter)
    if why_not:
        return Rule("made for this target", False, f"{name_of(drafter)} {why_not}.", (f"it {why_not}",))
    return Rule("made for this target", True, f"{name_of(drafter)} is {what}, as wide as the target.")


def fits(target: MlxFolder, side: MlxFolder) -> tuple[str, str]:
    """(what the folder is, in words; why it does not fit this target, or ""): what each kind needs of
    its target, from config.json alone: its width, the layers it reads inside the target's depth, an
    assistant's family, EAGLE-3's vocabulary map. The loaders (engine.drafting.on_mlx) check the same."""
    kind = kind_of(side)
    if not kind.reads_target:
        return "a draft model", ""
    said = WORDS[side.drafter]
    why_not = next((why for why in _needs(target, side, kind) if why), "")
    return said, f"is {said} {why_not}: it was trained for another target" if why_not else ""


def _needs(target: MlxFolder, side: MlxFolder, kind: kinds.DrafterKind):
    """Each thing the drafter needs of the target, as the clause saying it does not hold ("" where it holds)."""
    width = target.hidden_size
    theirs = next((v for v in (side.config.get(k) for k in WIDTH_KEYS) if _whole(v)), None)
    if theirs is None and kind is not kinds.ASSISTANT:  # DFlash, DSpark and MTP heads run at the target's width
        theirs = side.hidden_size
    if theirs is not None and width is not None and theirs != width:
        yield f"for a model {theirs:,} wide, and the target is {width:,} wide"
    flash = side.config.get("dflash_config")
    flash = flash if isinstance(flash, dict) else {}
    trained = side.config.get("num_target_layers", flash.get("num_target_layers"))
    if _whole(trained) and target.layers is not None and trained != target.layers:
        yield f"for a model of {trained} layers, and the target has {target.layers}"
    if kind is kinds.ASSISTANT and target.architecture not in ASSISTANT_TARGETS:
        yield f"made for a Gemma 4 target, and the target is {target.architecture}"
    reads = _layers_read(side, kind, flash)
    if target.layers is not None and any(not 0 <= i < target.layers for i in reads):
        yield f"reading the target's layers {said_and(reads)}, and the target has layers 0 to {target.layers - 1}"
    if kind is kinds.EAGLE3:
        yield _vocabulary_map(target, side)


def made_for(target: MlxFolder, side: MlxFolder) -> bool:
    """Whether a drafter's config names the target it was made for and this target is it: an assistant
    beside a Gemma 4, a drafter trained on a target of this many layers. `--drafter auto` takes these first."""
    kind = kind_of(side)
    if kind is kinds.ASSISTANT:
        return target.architecture in ASSISTANT_TARGETS
    flash = side.config.get("dflash_config")
    trained = side.config.get("num_target_layers", flash.get("num_target_layers") if isinstance(flash, dict) else None)
    return kind.reads_target and _whole(trained) and trained == target.layers


def said_and(numbers: list[int]) -> str:
    """ "0", "0 and 5", "-5, 1 and 2"."""
    words = [str(n) for n in numbers]
    return " and ".join(words) if len(words) < 3 else f"{', '.join(words[:-1])} and {words[-1]}"


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _layers_read(side: MlxFolder, kind: kinds.DrafterKind, flash: dict) -> list[int]:
    """The target's layers a drafter reads: DFlash's and DSpark's `target_layer_ids`; EAGLE-3's, with the
    layers before them whose outputs it taps (as mlx-vlm's Eagle3Config derives `capture_layer_ids`)."""
    if kind in (kinds.DFLASH, kinds.DSPARK):
        ids = flash.get("target_layer_ids", side.config.get("target_layer_ids"))
    elif kind is kinds.EAGLE3:
        ids = side.config.get("target_layer_ids") or side.config.get("eagle_aux_hidden_state_layer_ids")
        capture = side.config.get("capture_layer_ids")
        if isinstance(capture, list) and isinstance(ids, list):
            ids = [*ids, *capture]
    else:
        return []
    return sorted({i for i in ids if _whole(i)}) if isinstance(ids, list) else []


def _vocabulary_map(target: MlxFolder, side: MlxFolder) -> str:
    """Why an EAGLE-3 drafter's tokens do not map onto the target's, or "": its head writes the target's
    vocabulary, directly or through `d2t` (a draft vocabulary's id to the target's)."""
    layer = side.config.get("transformer_layer_config")
    full = layer.get("vocab_size") if isinstance(layer, dict) else None
    draft = side.config.get("draft_vocab_size", full)
    if _whole(full) and target.vocab_size is not None and full != target.vocab_size:
        return f"mapping its tokens into a vocabulary of {full:,}, and the target has {target.vocab_size:,}"
    if _whole(draft) and _whole(full) and draft != full and _d2t_size(side) != draft:
        return f"with a draft vocabulary of {draft:,} tokens and no map (d2t) of as many into the target's"
    return ""


def _d2t_size(side: MlxFolder) -> int | None:
    """The length of the drafter's `d2t` tensor, from its safetensors headers; None where it has none."""
    for path in side.weights:
        header = read_header(path)
        shape = header.tensors.get("d2t", (None, ()))[1] if header is not None else ()
        if len(shape) == 1:
            return shape[0]
    return None


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
    made_for = made_for_rule(target, drafter)
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
