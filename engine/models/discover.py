"""`--drafter auto`: find what can draft for a target, and say in words what was found and why.

In order: the target's own multi-token-prediction heads; a drafter file beside it
(mtp-*, dflash-*, eagle3-*, an assistant); a smaller model of the same family among the
catalog's models on this machine. Only headers are read here (the vocabulary check runs
when the drafter loads); a file that does not fit is named with the reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from engine.drafting import kinds
from engine.drafting.dflash import LAYER_INPUT_ARCHITECTURES
from engine.errors import DraftlightError, IncompatibleDrafter
from engine.models import catalog, mlx_compat
from engine.runtime.gguf import GGUFInfo, read_gguf
from engine.runtime.llama import RUNTIME as LLAMA_RUNTIME
from engine.runtime.loading import runtime_owning
from engine.runtime.mlx import RUNTIME as MLX_RUNTIME

SIDECAR_PATTERNS = ("mtp-*.gguf", "dflash-*.gguf", "eagle3-*.gguf", "*assistant*.gguf")


@dataclass(frozen=True)
class Discovery:
    """What `auto` chose: a drafter spec (the MTP kind's name, or a path), or None; and the sentence saying why."""

    spec: str | None
    said: str


def _width(info: GGUFInfo) -> int | None:
    return _whole(info.metadata.get(f"{info.architecture}.embedding_length"))


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


SAID = {
    kinds.DFLASH: "a DFlash drafter",
    kinds.DSPARK: "a DFlash drafter",
    kinds.EAGLE3: "an EAGLE-3 drafter",
    kinds.ASSISTANT: "a Gemma 4 assistant model",
}
# What a Gemma 4 assistant reads of the target's cache: its shape must be the target's (engine.drafting.mtp).
CACHE_SHAPE = {
    "attention.head_count_kv": "reading a cache of {} key/value heads, and {}'s has {}",
    "attention.key_length": "reading keys {} wide, and {}'s are {} wide",
}


def fits(target: GGUFInfo, side: GGUFInfo) -> tuple[str, str]:
    """(what the file is, in words; why it does not fit this target, or ""): what each kind needs of its
    target, from the headers alone: its width, the layers it reads inside the target's depth and handed out
    by llama.cpp for its architecture, an assistant's family and the shape of the cache it reads. The pairing
    doctor, `--drafter auto` and the load path (engine.pairloading) refuse by this one rule."""
    kind = kinds.kind_of_file(side, target.architecture)
    if not kind.reads_target:
        return side.architecture, f"is a {side.architecture} model, not a drafter this target can use"
    said = SAID.get(kind, f"{target.name}'s MTP head in a file of its own")
    why_not = next((why for why in _needs(target, side, kind) if why), "")
    return said, f"is {said} {why_not}: it was trained for another target" if why_not else ""


def _needs(target: GGUFInfo, side: GGUFInfo, kind: kinds.DrafterKind) -> Iterator[str]:
    """Each thing a GGUF drafter needs of the target, as the clause saying it does not hold ("" where it holds);
    the kinds' loaders (engine.drafting.dflash, eagle3, mtp) check the same of the loaded files."""
    width, meta = _width(target), side.metadata
    if kind is kinds.EAGLE3:
        theirs = _whole(meta.get(f"{side.architecture}.target_hidden_size"))
    elif kind is kinds.ASSISTANT:  # it reads the target's final hidden state
        theirs = _whole(meta.get(f"{side.architecture}.embedding_length_out"))
    else:
        theirs = _width(side)
    if theirs != width:
        yield f"for a model {theirs} wide, and {target.name} is {width} wide"
    if kind is kinds.ASSISTANT:
        if target.architecture not in mlx_compat.ASSISTANT_TARGETS:
            yield f"made for a Gemma 4 target, and {target.name} is {target.architecture}"
        for key, words in CACHE_SHAPE.items():
            ours, theirs_ = target.metadata.get(f"{target.architecture}.{key}"), meta.get(f"{side.architecture}.{key}")
            yield words.format(theirs_, target.name, ours) if ours != theirs_ else ""
    if kind in (kinds.DFLASH, kinds.DSPARK, kinds.EAGLE3):
        yield from _layers_needed(target, side, kind)


def _layers_needed(target: GGUFInfo, side: GGUFInfo, kind: kinds.DrafterKind) -> Iterator[str]:
    """The target's layers a DFlash or EAGLE-3 drafter reads: named, inside the target's depth (EAGLE-3's
    may name the layer past the last, the final state), and handed out by llama.cpp for its architecture."""
    value = side.metadata.get(f"{side.architecture}.target_layers")
    if not isinstance(value, list):  # not in the header (or past the reader's bound): llama.cpp's loader decides
        return
    reads = [i for i in value if _whole(i) is not None]
    depth = _whole(target.metadata.get(f"{target.architecture}.block_count")) or 0
    if kind is kinds.EAGLE3 and len(reads) != 3:
        yield f"naming {len(reads)} of the target's layers to read, where EAGLE-3 reads three"
        return
    if not reads:
        yield "naming none of the target's layers to read"
        return
    handed_out = target.architecture in LAYER_INPUT_ARCHITECTURES
    if not handed_out and (kind is not kinds.EAGLE3 or min(reads) < depth):
        yield (
            f"reading the target's layers, which llama.cpp does not hand out for {target.name}'s architecture "
            f"({target.architecture})"
        )
    last = depth if kind is kinds.EAGLE3 else depth - 1  # EAGLE-3's layer `depth`: the final hidden state
    if not all(0 <= i <= last for i in reads):
        yield (
            f"reading the target's layers {mlx_compat.said_and(sorted(reads))}, and {target.name} has layers 0 "
            f"to {depth - 1}{' and its final state' if kind is kinds.EAGLE3 else ''}"
        )


def discover(target_path: str | Path) -> Discovery:
    """The drafter `auto` picks for the target at target_path (a GGUF file, or an MLX folder: discover_mlx)."""
    target_path = Path(target_path)
    if MLX_RUNTIME.owns(target_path):
        return discover_mlx(target_path)
    target = read_gguf(target_path)
    if target.nextn_layers:
        heads = f"{target.nextn_layers} multi-token-prediction head{'s' if target.nextn_layers > 1 else ''}"
        return Discovery(kinds.MTP.name, f"{target.name} carries {heads}: it drafts for itself.")
    passed_over: list[str] = []
    seen: set[Path] = {target_path.resolve()}
    for pattern in SIDECAR_PATTERNS:
        for path in sorted(target_path.parent.glob(pattern)):
            if path.resolve() in seen:
                continue
            seen.add(path.resolve())
            try:
                side = read_gguf(path)
            except DraftlightError as exc:
                passed_over.append(f"{path.name}: {exc}")
                continue
            kind, why_not = fits(target, side)
            if why_not:
                passed_over.append(f"{path.name} {why_not}")
                continue
            return Discovery(str(path), f"Found {path.name} beside the target: {kind}, as wide as {target.name}.")
    for model in catalog.CATALOG.values():
        path = catalog.models_dir() / model.filename
        if not path.is_file() or path.resolve() in seen:
            continue
        try:
            info = read_gguf(path)
        except DraftlightError:
            continue
        if info.architecture == target.architecture and path.stat().st_size < target_path.stat().st_size:
            return Discovery(str(path), f"{model.title}, a smaller {target.architecture} model, drafts for it.")
    said = (
        f"No drafter found for {target.name}: it carries no MTP heads, no mtp-, dflash- or eagle3- file beside "
        "it fits, and no smaller model of its family is on this machine."
    )
    if passed_over:
        said += " Passed over: " + "; ".join(passed_over) + "."
    return Discovery(None, said)


def discover_mlx(target_path: Path, home: Path | None = None, env=None, folders=()) -> Discovery:
    """`auto` for an MLX target folder: its own MTP heads; an MLX drafter folder beside it or on this
    machine that fits (DFlash, DSpark, EAGLE-3, an assistant, an MTP head); a smaller model of its family that
    shares its vocabulary. GGUF files beside it are passed over: the runtimes differ."""
    target = mlx_compat.checked(target_path)
    name = mlx_compat.name_of(target)
    passed_over: list[str] = []
    if target.mtp_layers and target.mtp_weights:
        heads = f"{target.mtp_layers} multi-token-prediction head{'s' if target.mtp_layers > 1 else ''}"
        return Discovery(kinds.MTP.name, f"{name} carries {heads}: it drafts for itself.")
    if target.mtp_layers:
        passed_over.append(f"{name} declares an MTP head, but its weights leave it out (as most MLX conversions do)")
    for path in sorted(target_path.parent.glob("*.gguf")):
        passed_over.append(mlx_compat.runtimes_differ(target_path, path, MLX_RUNTIME, LLAMA_RUNTIME))
    found = mlx_compat.candidates(target, folders, home, env)
    drafters = [f for f in found if mlx_compat.kind_of(f).reads_target]
    drafters.sort(key=lambda f: not mlx_compat.made_for(target, f))  # made for this target first, else in order
    models = [f for f in found if not f.drafter and f.architecture == target.architecture and f.size < target.size]
    for side in [*drafters, *sorted(models, key=lambda f: -f.size)]:
        unloadable = mlx_compat.refusal(side.path)  # what the loader would refuse, auto passes over in its words
        if unloadable:
            passed_over.append(unloadable.rstrip("."))
            continue
        what, why_not = mlx_compat.fits(target, side)
        refused = [r.sentence for r in mlx_compat.vocabulary_rules(target, side) if not r.holds]
        side_name = mlx_compat.name_of(side)
        if why_not or refused:
            passed_over.append(f"{side_name} {why_not}" if why_not else f"{side_name}: {refused[0].rstrip('.')}")
            continue
        if side in drafters:
            return Discovery(str(side.path), f"Found {side_name}: {what}, as wide as {name}.")
        return Discovery(str(side.path), f"{side_name}, a smaller {target.architecture} model, drafts for it.")
    said = (
        f"No drafter found for {name}: it carries no MTP heads, and no MLX drafter or smaller model of its "
        "family on this machine fits."
    )
    if passed_over:
        said += " Passed over: " + "; ".join(passed_over) + "."
    return Discovery(None, said)


def drafter_kind(target_path: str | Path, spec: str | Path) -> str:
    """The name of the kind of drafter `spec` names for this target, from headers alone
    (engine.drafting.kinds.kind_of_spec; an MLX folder's config). A drafter for another runtime than
    the target's is refused in a sentence."""
    keyword = kinds.kind_named(str(spec))
    if keyword is not None and keyword.keyword:
        return keyword.name
    ours, theirs = runtime_owning(target_path), runtime_owning(spec)
    if ours is not None and theirs is not None and ours is not theirs:
        raise IncompatibleDrafter(mlx_compat.runtimes_differ(target_path, spec, ours, theirs) + ".")
    if theirs is MLX_RUNTIME:
        return mlx_compat.kind_of(mlx_compat.checked(spec)).name
    return kinds.kind_of_spec(target_path, spec).name
