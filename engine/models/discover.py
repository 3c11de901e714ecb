"""`--drafter auto`: find what can draft for a target, and say in words what was found and why.

One discovery over the facts of each file or folder (engine.models.facts) and the one rule of what a
drafter needs of its target (engine.models.rules): the target's own multi-token-prediction heads, else
the first candidate that fits. Where candidates are found is each format's part: for a GGUF file, a
drafter file beside it (mtp-*, dflash-*, eagle3-*, an assistant), then a smaller model of its family
among the catalog's files on this machine (the vocabulary check runs when the drafter loads); for an MLX
folder, the MLX drafter folders beside it or on this machine, then smaller models of its family, each
checked as its loader would and its tokenizer against the target's. What does not fit is named with
the reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from engine.drafting import kinds
from engine.errors import DraftlightError, IncompatibleDrafter
from engine.models import catalog, mlx_compat
from engine.models.facts import ModelFacts, checked_folder, facts_of, mlx_facts
from engine.models.rules import fits, made_for
from engine.models.vocabulary import folder_vocabulary, vocabulary_rules
from engine.runtime.llama import RUNTIME as LLAMA_RUNTIME
from engine.runtime.loading import runtime_owning
from engine.runtime.mlx import RUNTIME as MLX_RUNTIME

SIDECAR_PATTERNS = ("mtp-*.gguf", "dflash-*.gguf", "eagle3-*.gguf", "*assistant*.gguf")


@dataclass(frozen=True)
class Discovery:
    """What `auto` chose: a drafter spec (the MTP kind's name, or a path), or None; and the sentence saying why."""

    spec: str | None
    said: str


@dataclass(frozen=True)
class Candidate:
    """A file or folder that might draft for the target, as its format finds it."""

    facts: ModelFacts
    title: str  # how a sentence names it: a file name, a catalog title, a folder's name
    where: str = ""  # where it was found, as the sentence adds it: " beside the target"
    refused: str = ""  # why it cannot draft for this target before the rules are asked (its loader's check), or ""
    differs: str = ""  # where the rules hold, why it still cannot (a vocabulary of its own), or ""


@dataclass(frozen=True)
class Search:
    """One format's part of `auto`: the target's name in a sentence, what may draft for it in the order to
    try (read as it is tried: the first that fits ends the search), what was passed over on the way, and what
    the sentence says where nothing fits."""

    title: str
    candidates: Iterator[Candidate]
    passed_over: list[str]
    nothing_fits: str


def discover(
    target_path: str | Path,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
    folders: Iterable[str | Path] = (),
) -> Discovery:
    """The drafter `auto` picks for the target at target_path, a GGUF file or an MLX folder: its own MTP heads,
    else the first candidate its format finds that fits by the one rule (engine.models.rules)."""
    target_path = Path(target_path)
    target = facts_of(target_path)
    mlx = MLX_RUNTIME.owns(target_path)
    title = target.name if mlx else target.called
    if target.mtp_heads:
        heads = f"{target.mtp_heads} multi-token-prediction head{'s' if target.mtp_heads > 1 else ''}"
        return Discovery(kinds.MTP.name, f"{title} carries {heads}: it drafts for itself.")
    search = _mlx_search(target, home, env, folders) if mlx else _gguf_search(target)
    passed_over = search.passed_over
    for candidate in search.candidates:
        side = candidate.facts
        what, why_not = fits(target, side)
        refused = candidate.refused or (f"{candidate.title} {why_not}" if why_not else candidate.differs)
        if refused:
            passed_over.append(refused)
            continue
        if side.kind.reads_target:
            return Discovery(
                str(side.path), f"Found {candidate.title}{candidate.where}: {what}, as wide as {search.title}."
            )
        return Discovery(str(side.path), f"{candidate.title}, a smaller {target.architecture} model, drafts for it.")
    said = f"No drafter found for {search.title}: it carries no MTP heads, {search.nothing_fits}."
    if passed_over:
        said += " Passed over: " + "; ".join(passed_over) + "."
    return Discovery(None, said)


def _smaller_of_family(target: ModelFacts, side: ModelFacts) -> bool:
    return not side.kind.reads_target and side.architecture == target.architecture and side.size < target.size


def _gguf_search(target: ModelFacts) -> Search:
    """A GGUF target's candidates: a drafter file beside it, by name (mtp-*, dflash-*, eagle3-*, an assistant);
    then a smaller model of its family among the catalog's files on this machine."""
    passed_over: list[str] = []

    def found() -> Iterator[Candidate]:
        seen: set[Path] = {target.path.resolve()}
        for pattern in SIDECAR_PATTERNS:
            for path in sorted(target.path.parent.glob(pattern)):
                if path.resolve() in seen:
                    continue
                seen.add(path.resolve())
                try:
                    side = facts_of(path)
                except DraftlightError as exc:
                    passed_over.append(f"{path.name}: {exc}")
                    continue
                not_drafter = f"{path.name} is a {side.architecture} model, not a drafter this target can use"
                refused = "" if side.kind.reads_target else not_drafter
                yield Candidate(side, path.name, " beside the target", refused)
        for model in catalog.CATALOG.values():
            path = catalog.models_dir() / model.filename
            if not path.is_file() or path.resolve() in seen:
                continue
            try:
                side = facts_of(path)
            except DraftlightError:
                continue
            if _smaller_of_family(target, side):
                yield Candidate(side, model.title)

    nothing = "no mtp-, dflash- or eagle3- file beside it fits, and no smaller model of its family is on this machine"
    return Search(target.called, found(), passed_over, nothing)


def _mlx_search(
    target: ModelFacts, home: Path | None, env: Mapping[str, str] | None, folders: Iterable[str | Path]
) -> Search:
    """An MLX target's candidates: the MLX drafter folders beside it or on this machine (those made for it
    first), then the smaller models of its family, largest first; each one the MLX loaders would take and
    whose vocabulary passes the rules against the target's (engine.models.vocabulary). GGUF files beside
    it are passed over: the runtimes differ."""
    folder = checked_folder(target.path)
    passed_over: list[str] = []
    if folder.mtp_layers:
        passed_over.append(
            f"{target.name} declares an MTP head, but its weights leave it out (as most MLX conversions do)"
        )
    for path in sorted(target.path.parent.glob("*.gguf")):
        passed_over.append(mlx_compat.runtimes_differ(target.path, path, MLX_RUNTIME, LLAMA_RUNTIME))
    found = mlx_compat.candidates(folder, folders, home, env)
    facts_by: dict[Path, ModelFacts] = {f.path: mlx_facts(f) for f in found}
    drafters = [f for f in found if facts_by[f.path].kind.reads_target]
    drafters.sort(key=lambda f: not made_for(target, facts_by[f.path]))  # made for this target first, else in order
    models = [f for f in found if not f.drafter and _smaller_of_family(target, facts_by[f.path])]

    def candidates() -> Iterator[Candidate]:
        mine = folder_vocabulary(folder)
        for side in [*drafters, *sorted(models, key=lambda f: -f.size)]:
            side_facts = facts_by[side.path]
            refused = mlx_compat.refusal(side.path).rstrip(".")  # what the loader would refuse, in its words
            rules = () if refused else vocabulary_rules(mine, folder_vocabulary(side))
            vocabulary = [r.sentence for r in rules if not r.holds]
            differs = f"{side_facts.name}: {vocabulary[0].rstrip('.')}" if vocabulary else ""
            yield Candidate(side_facts, side_facts.name, refused=refused, differs=differs)

    nothing = "and no MLX drafter or smaller model of its family on this machine fits"
    return Search(target.name, candidates(), passed_over, nothing)


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
