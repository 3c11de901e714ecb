"""MLX pairs from their folders' headers alone: can this folder draft for that target, and `--drafter auto`.

The vocabulary rules are llama.cpp's, the one set both runtimes share (engine.models.vocabulary), over
each folder's vocabulary read from its config.json, tokenizer_config.json and tokenizer.json; a drafter that
reads the target's insides (DFlash, DSpark, EAGLE-3, a Gemma 4 assistant, an MTP head) passes the one
rule of what it needs of its target (engine.models.rules, over engine.models.facts). A GGUF drafter for an
MLX target, or an MLX one for a GGUF target, is refused: the runtimes differ. Nothing here imports mlx.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from engine.errors import ModelFileError
from engine.models.compat import Verdict, verdict_of
from engine.models.facts import mlx_facts, read_mlx
from engine.models.mlx_folders import MlxFolder
from engine.models.rules import made_for_rule
from engine.models.vocabulary import folder_vocabulary, vocabulary_rules
from engine.runtime.mlx_check import check_folder
from engine.runtime.runtimes import Runtime


def refusal(path: str | Path) -> str:
    """Why the MLX loaders would refuse a folder, in the folder check's own sentence (engine.runtime.mlx_check);
    "" where it passes. `--drafter auto`, the listing, the pair verdicts and the loaders run this one check."""
    try:
        check_folder(path)
    except ModelFileError as e:
        return str(e)
    return ""


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
    vocabulary = vocabulary_rules(folder_vocabulary(target), folder_vocabulary(drafter))
    return verdict_of((*vocabulary, *((made_for,) if made_for else ())))


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
