"""Recommended pairs for Macs where the target drafts for itself: with what their users measured.

Each pair names its files on the Hugging Face hub (fetched like any catalog model, by name:
`draftlight models qwen3.6-27b-mtp`) and the speedups its authors or users report on Apple
Silicon, with the link. Those figures are theirs, not ours: nothing here can be downloaded
on the machines this project is built on, and the ruler (`draftlight bench`) is how a user
measures a pair on their own box. Sizes are the hub's file sizes as published catalogs list
them; no checksum is published for these files, so a download is checked by size and by
llama.cpp reading its header.

Small targets gain little or lose: a draft head saves whole target passes only where a
target pass is expensive (large dense models, Q8_0 and wider weights), and on Metal
verifying several rows costs more than on a GPU, so prose (lower acceptance) often loses
while code gains.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.drafting import kinds
from engine.drafting.kinds import DrafterKind
from engine.models.catalog import (
    GEMMA4_31B,
    GEMMA4_31B_ASSISTANT,
    QWEN36_27B_DFLASH,
    QWEN36_27B_MTP,
    QWEN36_35B_A3B_MTP,
    CatalogModel,
)


@dataclass(frozen=True)
class Report:
    """A speedup someone measured: the figure in their words, where, and the link."""

    figure: str
    machine: str
    url: str


@dataclass(frozen=True)
class RecommendedPair:
    key: str
    title: str
    kind: DrafterKind  # MTP (heads in the target's file), the assistant, DFlash
    target: CatalogModel
    drafter: CatalogModel | None  # None: the heads are in the target's own file
    reports: tuple[Report, ...]
    note: str

    @property
    def download_bytes(self) -> int:
        return self.target.size + (self.drafter.size if self.drafter else 0)

    @property
    def drafter_spec(self) -> str:
        """What `--drafter` takes for this pair."""
        return kinds.MTP.name if self.drafter is None else self.drafter.key

    def describe(self) -> str:
        """A few lines for `draftlight models --list`."""
        files = self.target.filename + (f" + {self.drafter.filename}" if self.drafter else " (heads inside)")
        lines = [
            f"{self.title} [{self.kind.name}]: {files}, {self.download_bytes / 1e9:.1f} GB to download; "
            f"needs at least that much memory plus the context's cache.",
            f"  draftlight chat --target {self.target.key} --drafter {self.drafter_spec}",
            f"  {self.note}",
        ]
        lines += [f"  reported: {r.figure} ({r.machine}) {r.url}" for r in self.reports]
        return "\n".join(lines)


PR_MTP = "https://github.com/ggml-org/llama.cpp/pull/22673"
PAIRS: tuple[RecommendedPair, ...] = (
    RecommendedPair(
        key="qwen3.6-27b-mtp",
        title="Qwen3.6-27B, drafting with its own MTP head",
        kind=kinds.MTP,
        target=QWEN36_27B_MTP,
        drafter=None,
        reports=(
            Report(
                "27B Q8_0 10.3 -> 15.1 tok/s (+47%); 27B Q4_0 14.3 -> 14.1 (none)", "M1 Max 64 GB, llama.cpp", PR_MTP
            ),
            Report(
                "Qwen3.8-27B: code +9-10%, prose -22-24%, overall even",
                "M4 24 GB, llama.cpp",
                "https://github.com/sudoingX/qwen38-mtp/pull/40",
            ),
        ),
        note="A dense 27B: the size where a head pays on a Mac, more with Q8_0 weights than Q4; prose may lose.",
    ),
    RecommendedPair(
        key="qwen3.6-35b-a3b-mtp",
        title="Qwen3.6-35B-A3B (mixture of experts), drafting with its own MTP head",
        kind=kinds.MTP,
        target=QWEN36_35B_A3B_MTP,
        drafter=None,
        reports=(
            Report(
                "68.1 -> 77.7 tok/s (1.14x) at 4 drafts, prose (RAG), prompt processing 17% slower",
                "M2 Ultra 192 GB, llama.cpp",
                "https://dev.to/someoddcodeguy/llamacpps-new-mtp-on-macos-4ea0",
            ),
            Report("Q8_0 41.3 -> 39.3 tok/s (none)", "M1 Max 64 GB, llama.cpp", PR_MTP),
        ),
        note="Only 3B parameters are active per token, so a target pass is already cheap: gains are small.",
    ),
    RecommendedPair(
        key="gemma-4-31b-assistant",
        title="Gemma 4 31B with its assistant model",
        kind=kinds.ASSISTANT,
        target=GEMMA4_31B,
        drafter=GEMMA4_31B_ASSISTANT,
        reports=(
            Report(
                "dense model over 2x on average, the 26B-A4B mixture of experts none",
                "DGX Spark, not a Mac: the llama.cpp pull request that added it",
                "https://github.com/ggml-org/llama.cpp/pull/23398",
            ),
            Report(
                "31B with its assistant slower; only 26B-A4B gained (+13%)",
                "M1 Max 64 GB, MLX",
                "https://lilting.ch/en/articles/gemma-4-mtp-drafter-mlx-m1-max-tested",
            ),
        ),
        note="No llama.cpp measurement of this pair on a Mac was found: measure it here with `draftlight bench`.",
    ),
    RecommendedPair(
        key="qwen3.6-27b-dflash",
        title="Qwen3.6-27B with a DFlash drafter",
        kind=kinds.DFLASH,
        target=QWEN36_27B_MTP,
        drafter=QWEN36_27B_DFLASH,
        reports=(
            Report(
                "DFlash2 about +6% (cost per round grows faster than accepted tokens)",
                "M5 Max 128 GB, llama.cpp Metal",
                "https://github.com/ggml-org/llama.cpp/pull/27342",
            ),
            Report(
                "base 23, DFlash 38, MTP head 46 tok/s",
                "an NVIDIA GPU, not a Mac",
                "https://github.com/ggml-org/llama.cpp/pull/22105",
            ),
        ),
        note="On a GPU the same target's MTP head beat DFlash; on a Mac both gain little on this target.",
    ),
)


def lookup_pair(name: str) -> RecommendedPair | None:
    wanted = name.strip().lower()
    return next((p for p in PAIRS if p.key == wanted), None)
