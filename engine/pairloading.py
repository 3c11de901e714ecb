"""Loading a pair: the target on its runtime, the drafter a spec names (a kind, 'auto', a catalog
name, a path) checked against it, and why a pair runs plain here, from its saved profile."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from engine.drafting import Drafter, kinds
from engine.drafting.kinds import AUTO_SPEC, KEYWORDS
from engine.errors import DraftlightError, IncompatibleDrafter
from engine.measure.costmodel import BoxProfile, speculation_pays, why_plain
from engine.measure.profile import load_profile
from engine.models import catalog
from engine.models.compat import Verdict
from engine.models.discover import discover
from engine.models.drafterfiles import DRAFTER_FILES
from engine.models.facts import ModelFacts, facts_of, gguf_facts
from engine.models.rules import fits, made_for_rule
from engine.models.vocabulary import check
from engine.runtime import RuntimeOptions
from engine.runtime.gguf import GGUFInfo
from engine.runtime.loading import chosen_runtime, load_model, runtime_of
from engine.runtime.protocol import RuntimeContext, TextModel
from engine.runtime.runtimes import Runtime


def saved_profile_for(target: Path, drafter: str | Path | None, options: RuntimeOptions) -> BoxProfile | None:
    """The saved profile of the target with a draft model named by `drafter` (default, a catalog
    name or a .gguf path), without loading either; None for anything else or nothing saved."""
    spec = catalog.DEFAULT_DRAFTER if str(drafter) == "default" else drafter
    if spec is None or str(spec) in (*KEYWORDS, AUTO_SPEC):
        return None
    try:
        path = catalog.resolve(spec, None, download=False)
    except DraftlightError:
        return None
    return load_profile(target, path, options)


def plain_reason_for(target: Path, drafter: str | Path | None, options: RuntimeOptions) -> str:
    """Why the pair runs plain here, in a sentence, if its saved profile says no depth could pay; else ""."""
    profile = saved_profile_for(target, drafter, options)
    return why_plain(profile) if profile is not None and not speculation_pays(profile) else ""


def load_drafter(
    target: TextModel,
    spec: str | Path | None,
    options: RuntimeOptions,
    progress: catalog.Progress | None = None,
    download: bool = True,
    target_ctx: RuntimeContext | None = None,
) -> tuple[Drafter | None, Verdict | None]:
    """A kind's name ('none', 'ngram', 'mtp'), 'auto', 'default', a catalog name or a path; raises
    IncompatibleDrafter. A file's kind comes from its header (engine.drafting.kinds); 'auto' finds a
    drafter (engine.models.discover) and the verdict says what it found and why. A drafter runs on
    the target's runtime: on MLX a GGUF drafter is converted, as the target was."""
    if spec is None:
        return None, None
    if str(spec) == AUTO_SPEC:
        if target.path is None:
            raise IncompatibleDrafter(f"{target.name} was not loaded from a file: 'auto' has no folder to look in.")
        found = discover(target.path)
        if found.spec is None:
            return None, Verdict(False, (), found.said)
        drafter, verdict = load_drafter(target, found.spec, options, progress, download, target_ctx)
        return drafter, replace(verdict or Verdict(True), found=found.said)
    keyword = kinds.kind_named(str(spec))
    if keyword is not None and keyword.keyword:
        if keyword.reads_target and target_ctx is None:
            raise ValueError(f"{keyword.words} draft on the target's context: pass target_ctx")
        return kinds.load(keyword, target_ctx, None, target.options), None
    runtime = runtime_of(target)
    if str(spec) == "default" and not runtime.loads_default_drafter(_converted(target)):
        return None, None  # the default draft model is a GGUF file: an MLX folder's target gets none unless named
    path = catalog.resolve(catalog.DEFAULT_DRAFTER if str(spec) == "default" else spec, progress, download)
    files = DRAFTER_FILES[runtime]
    refused = files.refusal(path, target.name)
    if refused:
        raise IncompatibleDrafter(refused)
    folder_kind = files.kind_before_load(path)
    if folder_kind is not None:
        return _load_folder_drafter(target, path, folder_kind, target_ctx)
    refused = made_for_another(target, path)  # from the headers, before the loader reads a tensor
    if refused:
        raise IncompatibleDrafter(Verdict(False, (refused,)).explain())
    before = files.verdict_before_load(target.path, path)  # two MLX folders: the doctor's rules, from their files
    if before is not None and not before.compatible:
        raise IncompatibleDrafter(before.explain())
    model = load_model(path, runtime, options, converter(progress))
    try:
        verdict = before if before is not None else check(target, model)
        if not verdict.compatible:
            raise IncompatibleDrafter(verdict.explain())
        kind = files.kind_of_loaded(model, target)
        if kind.reads_target and target_ctx is None:
            raise IncompatibleDrafter(f"{model.name} reads the target's layers: load it beside a loaded target.")
        verdict = replace(verdict, made_for=made_for(target, model, kind))  # GGUF metadata names its base
        return kinds.load(kind, target_ctx, model, model.options), verdict
    except BaseException:
        model.close()
        raise


def made_for_another(target: TextModel, path: Path) -> str:
    """Why a GGUF drafter that reads the target's insides cannot read this one (its width, the layers it
    reads, an assistant's family and cache, EAGLE-3's vocabulary map), from the two headers, as the clause
    the pairing doctor's rule fails with (engine.models.rules.fits): `pair` and a load refuse it in one
    sentence, before llama.cpp's loader sees the file; "" where it fits. Heads of another family are left
    to the kind check (engine.models.drafterfiles), which says so."""
    target_info = getattr(target, "info", None)
    if not isinstance(target_info, GGUFInfo):
        return ""
    try:
        side = facts_of(path)
    except DraftlightError:
        return ""  # not a file this reads: the loader says why
    ours = gguf_facts(target_info)
    if not side.kind.reads_target or (side.kind is kinds.MTP and ours.architecture not in side.made_for_family):
        return ""
    why_not = fits(ours, side)[1]
    return f"it {why_not}" if why_not else ""


def made_for(target: TextModel, drafter: TextModel, kind: kinds.DrafterKind) -> str:
    """Where a drafter that reads the target's insides names another target in its metadata (its base,
    general.base_model.*), that in a sentence, said before the first reply; else "". The pairing
    doctor's rule (engine.models.rules.made_for_rule), so the two say the same."""
    facts = _gguf_facts(target, drafter)
    if not kind.reads_target or facts is None:
        return ""
    rule = made_for_rule(*facts)
    return f"{rule.sentence} Its drafts may be kept less often." if rule is not None and not rule.holds else ""


def _gguf_facts(target: TextModel, drafter: TextModel) -> tuple[ModelFacts, ModelFacts] | None:
    """The two models' facts from the GGUF headers llama.cpp loaded them from; None where either has none."""
    target_info, drafter_info = getattr(target, "info", None), getattr(drafter, "info", None)
    if not (isinstance(target_info, GGUFInfo) and isinstance(drafter_info, GGUFInfo)):
        return None
    return gguf_facts(target_info), gguf_facts(drafter_info)


def load_target(
    path: Path, runtime: str | Runtime, options: RuntimeOptions, progress: catalog.Progress | None = None
) -> TextModel:
    """A target at `path` on `runtime` ("llama", "mlx", "auto": its format decides); on MLX a GGUF
    file is converted once into the cache, each step said through `progress`."""
    return load_model(path, chosen_runtime(path, runtime), options, converter(progress))


def converter(progress: catalog.Progress | None) -> Callable[[Path], Path]:
    """A GGUF file to its MLX folder, converted once into the cache; each step said as the progress's label."""
    from engine.models.mlx_conversions import mlx_folder_for

    def log(message: str) -> None:
        if progress is not None:
            progress(1, 1, message)

    return lambda path: mlx_folder_for(path, log=log)


def _converted(target: TextModel) -> bool:
    """Whether an MLX target is a GGUF model converted into the cache (the default pair on MLX)."""
    from engine.models.mlx_conversions import conversions_dir

    return target.path is not None and Path(target.path).resolve().is_relative_to(conversions_dir().resolve())


def _load_folder_drafter(
    target: TextModel, path: Path, kind: kinds.DrafterKind, target_ctx: RuntimeContext | None
) -> tuple[Drafter | None, Verdict]:
    """An MLX drafter folder of a kind that reads the target (DFlash, DSpark, EAGLE-3, an assistant),
    checked against the target's folder, then loaded on its context by the kinds table."""
    from engine.models import mlx_compat

    verdict = mlx_compat.check_folders(target.path, path) if target.path is not None else Verdict(True)
    if not verdict.compatible:
        raise IncompatibleDrafter(verdict.explain())
    if target_ctx is None:
        raise IncompatibleDrafter(f"{path.name} reads the target's layers: load it beside a loaded target.")
    return kinds.load(kind, target_ctx, path, target.options), verdict
