"""MLX models fetched from the Hugging Face hub by repository id, and the pairs their users run on Macs.

The entries themselves are in the one catalog (engine.models.catalog, format "mlx"); here is how they
are fetched.

A whole repository is one model: `snapshot_download(repo_id, allow_patterns=...)` fetches its
config, tokenizer and safetensors into the Hugging Face cache, and the snapshot folder is used
where it lies. Resolving looks in the cache first (no network); a download is checked by reading
the folder's headers (engine.models.mlx_folders). The figures below are what the runtimes' authors
and users report on Apple Silicon, with the links: theirs, not ours; `draftlight bench` measures a
pair on your own machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.drafting import kinds
from engine.drafting.kinds import DrafterKind
from engine.errors import ModelNotAvailable
from engine.models.catalog import (
    GEMMA4_26B_A4B_4BIT,
    GEMMA4_26B_A4B_ASSISTANT,
    QWEN3_4B_8BIT,
    QWEN3_4B_DSPARK,
    QWEN36_27B_4BIT,
    QWEN36_27B_DFLASH_MLX,
    QWEN36_27B_MTPLX,
    MlxCatalogModel,
    entry,
    hub_allowed,
)
from engine.models.facts import read_mlx
from engine.models.pairs import Report


@dataclass(frozen=True)
class MacPair:
    key: str
    title: str
    kind: DrafterKind
    target: MlxCatalogModel
    drafter: MlxCatalogModel | None  # None: the heads are in the target's own weights
    runtime: str  # the MLX runtime its figures come from
    reports: tuple[Report, ...]
    note: str

    def describe(self) -> str:
        """A few lines for `draftlight models --list`."""
        repos = self.target.hf_repo + (f" + {self.drafter.hf_repo}" if self.drafter else " (heads inside)")
        lines = [f"{self.title} [{self.kind.name}]: {repos}", f"  {self.note}"]
        lines += [f"  reported: {r.figure} ({r.machine}) {r.url}" for r in self.reports]
        return "\n".join(lines)


MAC_PAIRS: tuple[MacPair, ...] = (
    MacPair(
        key="qwen3.6-27b-mtp-mlx",
        title="Qwen3.6-27B, drafting with its own MTP heads (MLX)",
        kind=kinds.MTP,
        target=QWEN36_27B_MTPLX,
        drafter=None,
        runtime="MTPLX, mlx-vlm",
        reports=(
            Report(
                "Qwen3.6-27B 4-bit 28 -> 63 tok/s (2.24x) at temperature 0.6",
                "M5 Max, MTPLX",
                "https://github.com/youssofal/MTPLX",
            ),
            Report(
                "Qwen3.6-27B-4bit 34.96 -> 60.67 tok/s (1.74x), greedy, block 3, a head split from Qwen/Qwen3.6-27B",
                "Apple Silicon, mlx-vlm",
                "https://github.com/Blaizzy/mlx-vlm/pull/1167",
            ),
        ),
        note=(
            "mlx-community's Qwen3.6-27B-4bit leaves the MTP weights out; this build keeps them. mlx-vlm's figure "
            "used the head split from the upstream checkpoint (mlx_vlm.split_qwen3_5_mtp)."
        ),
    ),
    MacPair(
        key="gemma-4-26b-a4b-assistant-mlx",
        title="Gemma 4 26B-A4B with its assistant model (MLX)",
        kind=kinds.ASSISTANT,
        target=GEMMA4_26B_A4B_4BIT,
        drafter=GEMMA4_26B_A4B_ASSISTANT,
        runtime="mlx-vlm (--draft-kind mtp)",
        reports=(
            Report(
                "26B-A4B with its assistant +13%; the 31B with its assistant slower",
                "M1 Max 64 GB, MLX",
                "https://lilting.ch/en/articles/gemma-4-mtp-drafter-mlx-m1-max-tested",
            ),
        ),
        note="The pair mlx-vlm runs as `--draft-kind mtp`; the mixture of experts gained where the dense 31B lost.",
    ),
    MacPair(
        key="qwen3.6-27b-dflash-mlx",
        title="Qwen3.6-27B with a DFlash drafter (MLX)",
        kind=kinds.DFLASH,
        target=QWEN36_27B_4BIT,
        drafter=QWEN36_27B_DFLASH_MLX,
        runtime="dflash-mlx",
        reports=(Report("33.3 -> 98.1 tok/s", "Apple Silicon, dflash-mlx", "https://github.com/bstnxbt/dflash-mlx"),),
        note="Greedy only in dflash-mlx; one user's benchmark found it far behind plain decoding at 32K tokens of context.",
    ),
    MacPair(
        key="qwen3-4b-dspark-mlx",
        title="Qwen3-4B with DeepSeek's DSpark drafter (MLX)",
        kind=kinds.DSPARK,
        target=QWEN3_4B_8BIT,
        drafter=QWEN3_4B_DSPARK,
        runtime="mlx-dspark",
        reports=(
            Report("3.63x mean", "M4 Pro, mlx-dspark", "https://github.com/ARahim3/mlx-dspark"),
            Report(
                "about 1.4x with DSpark (mlx-dspark 0.0.3)",
                "a Mac, mlx-dspark",
                "https://pypi.org/project/mlx-dspark/0.0.3/",
            ),
        ),
        note="A small target: the figures differ widely between mlx-dspark's releases; measure it here.",
    ),
)


def lookup_mlx(name: str) -> MlxCatalogModel | None:
    """An MLX catalog model by key, title or repository id, any case (the one lookup: catalog.entry)."""
    model = entry(name)
    return model if isinstance(model, MlxCatalogModel) else None


def _snapshot(model: MlxCatalogModel, local_only: bool) -> Path:
    from huggingface_hub import snapshot_download

    path = snapshot_download(
        repo_id=model.hf_repo, allow_patterns=list(model.allow_patterns), local_files_only=local_only
    )
    return Path(path)


def cached_mlx(model: MlxCatalogModel) -> Path | None:
    """The model's snapshot already in the Hugging Face cache, whole enough to read; None otherwise (no network)."""
    try:
        path = _snapshot(model, local_only=True)
    except Exception:  # huggingface_hub's "not in the cache" errors vary by release
        return None
    return path if read_mlx(path) is not None else None


def resolve_mlx(model: MlxCatalogModel, download: bool = True) -> Path:
    """The model's folder: the cached snapshot, else a download from the hub where allowed."""
    path = cached_mlx(model)
    if path is not None:
        return path
    tried = ["the Hugging Face cache (not there)"]
    if download and hub_allowed():
        try:
            path = _snapshot(model, local_only=False)
            if read_mlx(path) is not None:
                return path
            tried.append("the Hugging Face hub (the download is not an MLX folder this can read)")
        except Exception as exc:
            tried.append(f"the Hugging Face hub ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})")
    raise ModelNotAvailable(
        f"{model.title} is not available. Tried: " + "; ".join(tried) + ". "
        f"Fetch it with `draftlight models {model.key}` where the hub can be reached, or pass its folder."
    )
