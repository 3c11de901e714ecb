"""`--drafter auto`: find what can draft for a target, and say in words what was found and why.

In order: the target's own multi-token-prediction heads; a drafter file beside it
(mtp-*, dflash-*, eagle3-*, an assistant); a smaller model of the same family among the
catalog's models on this machine. Only headers are read here (the vocabulary check runs
when the drafter loads); a file that does not fit is named with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.drafting import kinds
from engine.errors import DraftlightError, IncompatibleDrafter
from engine.models import catalog, mlx_compat
from engine.models.facts import ModelFacts, checked_folder, facts_of, mlx_facts
from engine.models.rules import fits, made_for
from engine.runtime.llama import RUNTIME as LLAMA_RUNTIME
from engine.runtime.loading import runtime_owning
from engine.runtime.mlx import RUNTIME as MLX_RUNTIME

SIDECAR_PATTERNS = ("mtp-*.gguf", "dflash-*.gguf", "eagle3-*.gguf", "*assistant*.gguf")


@dataclass(frozen=True)
class Discovery:
    """What `auto` chose: a drafter spec (the MTP kind's name, or a path), or None; and the sentence saying why."""

    spec: str | None
    said: str


def discover(target_path: str | Path) -> Discovery:
    """The drafter `auto` picks for the target at target_path (a GGUF file, or an MLX folder: discover_mlx)."""
    target_path = Path(target_path)
    if MLX_RUNTIME.owns(target_path):
        return discover_mlx(target_path)
    target = facts_of(target_path)
    if target.mtp_heads:
        heads = f"{target.mtp_heads} multi-token-prediction head{'s' if target.mtp_heads > 1 else ''}"
        return Discovery(kinds.MTP.name, f"{target.called} carries {heads}: it drafts for itself.")
    passed_over: list[str] = []
    seen: set[Path] = {target_path.resolve()}
    for pattern in SIDECAR_PATTERNS:
        for path in sorted(target_path.parent.glob(pattern)):
            if path.resolve() in seen:
                continue
            seen.add(path.resolve())
            try:
                side = facts_of(path)
            except DraftlightError as exc:
                passed_over.append(f"{path.name}: {exc}")
                continue
            kind, why_not = fits(target, side)
            if not side.kind.reads_target:  # a file named as a drafter beside the target must read it
                kind, why_not = side.architecture, f"is a {side.architecture} model, not a drafter this target can use"
            if why_not:
                passed_over.append(f"{path.name} {why_not}")
                continue
            return Discovery(str(path), f"Found {path.name} beside the target: {kind}, as wide as {target.called}.")
    for model in catalog.CATALOG.values():
        path = catalog.models_dir() / model.filename
        if not path.is_file() or path.resolve() in seen:
            continue
        try:
            model_facts = facts_of(path)
        except DraftlightError:
            continue
        if model_facts.architecture == target.architecture and model_facts.size < target.size:
            return Discovery(str(path), f"{model.title}, a smaller {target.architecture} model, drafts for it.")
    said = (
        f"No drafter found for {target.called}: it carries no MTP heads, no mtp-, dflash- or eagle3- file beside "
        "it fits, and no smaller model of its family is on this machine."
    )
    if passed_over:
        said += " Passed over: " + "; ".join(passed_over) + "."
    return Discovery(None, said)


def discover_mlx(target_path: Path, home: Path | None = None, env=None, folders=()) -> Discovery:
    """`auto` for an MLX target folder: its own MTP heads; an MLX drafter folder beside it or on this
    machine that fits (DFlash, DSpark, EAGLE-3, an assistant, an MTP head); a smaller model of its family that
    shares its vocabulary. GGUF files beside it are passed over: the runtimes differ."""
    target = checked_folder(target_path)
    facts = mlx_facts(target)
    name = facts.name
    passed_over: list[str] = []
    if target.mtp_layers and target.mtp_weights:
        heads = f"{target.mtp_layers} multi-token-prediction head{'s' if target.mtp_layers > 1 else ''}"
        return Discovery(kinds.MTP.name, f"{name} carries {heads}: it drafts for itself.")
    if target.mtp_layers:
        passed_over.append(f"{name} declares an MTP head, but its weights leave it out (as most MLX conversions do)")
    for path in sorted(target_path.parent.glob("*.gguf")):
        passed_over.append(mlx_compat.runtimes_differ(target_path, path, MLX_RUNTIME, LLAMA_RUNTIME))
    found = mlx_compat.candidates(target, folders, home, env)
    facts_by: dict[Path, ModelFacts] = {f.path: mlx_facts(f) for f in found}
    drafters = [f for f in found if facts_by[f.path].kind.reads_target]
    drafters.sort(key=lambda f: not made_for(facts, facts_by[f.path]))  # made for this target first, else in order
    models = [f for f in found if not f.drafter and f.architecture == target.architecture and f.size < target.size]
    for side in [*drafters, *sorted(models, key=lambda f: -f.size)]:
        unloadable = mlx_compat.refusal(side.path)  # what the loader would refuse, auto passes over in its words
        if unloadable:
            passed_over.append(unloadable.rstrip("."))
            continue
        what, why_not = fits(facts, facts_by[side.path])
        refused = [r.sentence for r in mlx_compat.vocabulary_rules(target, side) if not r.holds]
        side_name = facts_by[side.path].name
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
    """The name of the kind of drafter `spec` names for this target, from its facts alone (a GGUF header,
    an MLX folder's config: engine.models.facts). A drafter for another runtime than the target's is
    refused in a sentence."""
    keyword = kinds.kind_named(str(spec))
    if keyword is not None and keyword.keyword:
        return keyword.name
    ours, theirs = runtime_owning(target_path), runtime_owning(spec)
    if ours is not None and theirs is not None and ours is not theirs:
        raise IncompatibleDrafter(mlx_compat.runtimes_differ(target_path, spec, ours, theirs) + ".")
    side = facts_of(spec)
    if (
        side.kind is kinds.MTP
        and side.made_for_family
        and facts_of(target_path).architecture not in side.made_for_family
    ):
        return kinds.MODEL.name  # heads of another family: the loader's kind check says so in its sentence
    return side.kind.name
