"""What each runtime makes of a drafter's files: one entry per runtime value, no runtime names compared.

Whether a drafter file or folder can draft beside a target on that runtime at all (llama.cpp reads
GGUF files; MLX reads its folders and converts a whole GGUF model, not heads or a DFlash file), the
kind a folder's config names before anything loads (the kinds that read the target load beside it),
and the kind a loaded model turns out to be.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.drafting import kinds
from engine.errors import IncompatibleDrafter
from engine.models.compat import Verdict
from engine.models.facts import facts_of, mlx_facts, read_mlx
from engine.runtime.llama import RUNTIME as LLAMA_RUNTIME
from engine.runtime.llama import Model
from engine.runtime.mlx import RUNTIME as MLX_RUNTIME
from engine.runtime.protocol import TextModel
from engine.runtime.runtimes import Runtime


@dataclass(frozen=True)
class DrafterFiles:
    """One runtime's reading of drafter files (see the module's docstring)."""

    refusal: Callable[[Path, str], str]  # (path, target's name) -> why it cannot draft here, or ""
    kind_before_load: Callable[[Path], kinds.DrafterKind | None]  # a folder's kind that reads the target
    kind_of_loaded: Callable[[TextModel, TextModel], kinds.DrafterKind]  # (drafter, target)
    # (target's path, drafter's path) -> the pair's verdict from their files, where they are read before loading
    verdict_before_load: Callable[[Path | None, Path], Verdict | None]


def _llama_refusal(path: Path, target_name: str) -> str:
    if not MLX_RUNTIME.owns(path):
        return ""
    return (
        f"{path.name} is an MLX model folder and {target_name} runs on llama.cpp: pick a GGUF drafter, "
        "or load the pair with --runtime mlx."
    )


def _llama_kind_of_loaded(drafter: TextModel, target: TextModel) -> kinds.DrafterKind:
    assert isinstance(drafter, Model)  # llama.cpp loads its own Model
    kind = kinds.kind_of_file(drafter.info, target.architecture)
    if kind is kinds.MODEL and kinds.heads_alone(drafter.info):
        raise IncompatibleDrafter(
            f"{drafter.path.name} holds multi-token-prediction heads for a {drafter.architecture} model, and "
            f"{target.name} is {target.architecture}: it was trained for another target."
        )
    return kind


def _mlx_refusal(path: Path, target_name: str) -> str:
    if not LLAMA_RUNTIME.owns(path):
        return ""
    kind = facts_of(path).kind
    if kind is kinds.MODEL:
        return ""  # a whole model converts as a target does
    return (
        f"{path.name} is a {kind.label} file for llama.cpp, and {target_name} runs on "
        "MLX: pick the MLX build of that drafter, or load the pair with --runtime llama."
    )


def _mlx_kind_before_load(path: Path) -> kinds.DrafterKind | None:
    if not MLX_RUNTIME.owns(path):
        return None
    folder = read_mlx(path)  # a draft model where it cannot be read: the loader says why
    kind = mlx_facts(folder).kind if folder is not None else kinds.MODEL
    return kind if kind.reads_target else None


def _mlx_verdict_before_load(target: Path | None, path: Path) -> Verdict | None:
    """Two MLX folders' verdict from their files (the vocabulary rules over what each folder states), so a
    pair the pairing doctor refuses is refused before either loads; None for a GGUF model still to convert,
    or a folder the loader refuses (it says why in its own sentence)."""
    if target is None or not (MLX_RUNTIME.owns(target) and MLX_RUNTIME.owns(path)):
        return None
    from engine.models.mlx_compat import check_folders, refusal

    if any(read_mlx(p) is None or refusal(p) for p in (target, path)):
        return None
    return check_folders(target, path)


DRAFTER_FILES: dict[Runtime, DrafterFiles] = {
    # llama.cpp's rules read the loaded vocabularies, as common_speculative_are_compatible does.
    LLAMA_RUNTIME: DrafterFiles(_llama_refusal, lambda _path: None, _llama_kind_of_loaded, lambda _t, _d: None),
    # On MLX a loaded drafter is a draft model: the kinds that read the target are folders, known before loading.
    MLX_RUNTIME: DrafterFiles(
        _mlx_refusal, _mlx_kind_before_load, lambda _drafter, _target: kinds.MODEL, _mlx_verdict_before_load
    ),
}
