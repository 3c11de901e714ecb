"""The models already on this machine: LM Studio's, Ollama's, the Hugging Face cache's, llama.cpp's own
cache, and folders the user named. Used where they are, never copied.

GGUF files are llama.cpp's; MLX model folders (LM Studio's mlx-community/NAME/, the Hugging Face
cache's snapshots, a folder the user named) are MLX's, told from transformers checkpoints by
engine.models.mlx_folders. A folder is listed once, however many paths lead to it.

Ollama keeps a model as a blob named by its digest; the manifest of each name:tag says which
blob is the model (media type application/vnd.ollama.image.model), and that blob is a GGUF
file. Every file found is checked for GGUF's magic and its header read for the quantization;
one that is not a readable GGUF is left out, never a reason to fail.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from engine.errors import DraftlightError
from engine.models.mlx_folders import folders_under, read_folder
from engine.runtime.gguf import read_gguf

OLLAMA_MODEL = "application/vnd.ollama.image.model"
OLLAMA_DIGEST = re.compile(r"sha256[:-]([0-9a-f]{64})")  # a blob's name: never a path of its own
MAX_MANIFEST = 1 << 16  # Ollama's manifests are a few hundred bytes
SPLIT_PART = re.compile(r"-(\d{5})-of-\d{5}\.gguf$", re.IGNORECASE)  # a model in several files: its first names it
MAX_DEPTH = 6  # folders below a root that are searched


@dataclass(frozen=True)
class LocalModel:
    path: Path
    name: str  # as its source names it: "qwen2.5-coder:1.5b" for Ollama, "org/repo/file.gguf" for the HF cache
    source: str  # "LM Studio", "Ollama", "Hugging Face cache", "llama.cpp cache" or the folder
    size: int
    quantization: str  # "Q4_K_M", ...; an MLX folder's "4-bit", "bf16"; "" where the header does not say
    architecture: str
    runtime: str = "llama"  # "llama" for a GGUF file, "mlx" for an MLX folder (engine.runtime.formats)
    group_size: int | None = None  # an MLX folder's quantization groups
    drafter: str = ""  # a drafter's kind in words ("an EAGLE-3 drafter, 1 layer"), GGUF or MLX; "" for a model

    @property
    def is_folder(self) -> bool:
        """An MLX model folder (MLX's runtime), not a GGUF file (llama.cpp's)."""
        return self.path.is_dir()

    def picked(self) -> str:
        """Its entry in the app's pickers: a drafter says its kind first."""
        return f"{self.drafter}: {self.label()}" if self.drafter else self.label()

    def label(self) -> str:
        words = " ".join(w for w in ("MLX" if self.is_folder else "", self.quantization) if w)
        quant = f" {words}" if words else ""
        return f"{self.name}{quant}, {self.size / 1e9:.2f} GB ({self.source})"


def local_models(
    folders: Iterable[str | Path] = (), home: Path | None = None, env: Mapping[str, str] | None = None
) -> list[LocalModel]:
    """Every GGUF model in the usual places and in `folders`, each file once, sorted by name."""
    home = Path.home() if home is None else home
    env = os.environ if env is None else env
    found: dict[Path, LocalModel] = {}
    candidates: list[tuple[Path, str, str]] = []
    lm_studio = (home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models")
    for root in lm_studio:
        candidates += [(p, str(p.relative_to(root)), "LM Studio") for p in _ggufs(root)]
    candidates += list(_ollama(Path(env.get("OLLAMA_MODELS") or home / ".ollama" / "models")))
    hub = Path(env.get("HF_HUB_CACHE") or Path(env.get("HF_HOME") or home / ".cache" / "huggingface") / "hub")
    candidates += [(p, _hf_name(p, hub), "Hugging Face cache") for p in _ggufs(hub)]
    cache = "Library/Caches/llama.cpp" if sys.platform == "darwin" else ".cache/llama.cpp"
    llama_cache = Path(env.get("LLAMA_CACHE") or home / cache)
    candidates += [(p, p.name, "llama.cpp cache") for p in _ggufs(llama_cache)]
    roots = [Path(folder).expanduser() for folder in folders]
    for root in roots:
        candidates += [(p, str(p.relative_to(root)), str(root)) for p in _ggufs(root)]
    for path, name, source in candidates:
        try:
            real = path.resolve()
        except OSError:
            continue
        if real in found:
            continue
        model = _describe(real, name, source)
        if model is not None:
            found[real] = model
    places = [(r, "LM Studio") for r in lm_studio] + [(hub, "Hugging Face cache")] + [(r, str(r)) for r in roots]
    for model in _mlx_models(places, hub):
        found.setdefault(model.path, model)
    return sorted(found.values(), key=lambda m: (m.name.lower(), m.source))


def _mlx_models(roots: list[tuple[Path, str]], hub: Path) -> Iterator[LocalModel]:
    """The MLX folders under each (root, source), each once: by real folder, and by the weights it
    holds (two snapshots of one repository that share their blobs are one model)."""
    from engine.models.facts import kind_words, mlx_facts  # facts names a model as this module's listing does

    seen_folders: set[Path] = set()
    seen_weights: set[frozenset[Path]] = set()
    for root, source in roots:
        for folder in folders_under(root, MAX_DEPTH):
            try:
                real = folder.resolve()
            except (OSError, RuntimeError):
                continue
            if real in seen_folders:
                continue
            seen_folders.add(real)
            mlx = read_folder(folder, root)
            if mlx is None or frozenset(mlx.weights) in seen_weights:
                continue
            seen_weights.add(frozenset(mlx.weights))
            name = (
                _hf_name(folder, hub) if root == hub else str(folder.relative_to(root)) if folder != root else root.name
            )
            q = mlx.quantization
            facts = mlx_facts(mlx)
            words = kind_words(facts) if facts.kind.reads_target else ""
            yield LocalModel(
                real, name, source, mlx.size, mlx.words(), mlx.architecture, "mlx", q.group_size if q else None, words
            )


def _ggufs(root: Path) -> Iterator[Path]:
    """The .gguf files under root (not vision projectors), a few folders deep; nothing if root is absent.
    Only what lies inside root is read: a link that leads out of it (to a file or a folder) is skipped,
    so a folder's contents cannot send the listing elsewhere. Add the folder a link leads to instead."""
    try:
        real_root = root.resolve()
        if not real_root.is_dir():
            return
    except (OSError, RuntimeError):
        return
    stack, seen = [(root, 0)], {real_root}
    while stack:
        folder, depth = stack.pop()
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            continue
        for entry in entries:
            try:
                real = entry.resolve()
                if not real.is_relative_to(real_root):
                    continue
                is_dir = entry.is_dir()
            except (OSError, RuntimeError):
                continue
            if is_dir:
                if depth < MAX_DEPTH and real not in seen:
                    seen.add(real)
                    stack.append((entry, depth + 1))
            elif entry.suffix.lower() == ".gguf" and entry.is_file():
                part = SPLIT_PART.search(entry.name)
                if not entry.name.lower().startswith("mmproj") and (part is None or part[1] == "00001"):
                    yield entry


def _ollama(models: Path) -> Iterator[tuple[Path, str, str]]:
    """(blob, name:tag, "Ollama") for every manifest that names a model blob. A manifest is
    untrusted: it is read only inside manifests/, and its digest names a blob in blobs/ or nothing
    (both inside the models folder, links resolved)."""
    manifests = models / "manifests"
    if not manifests.is_dir():
        return
    try:
        home, manifests_real, blobs_real = models.resolve(), manifests.resolve(), (models / "blobs").resolve()
    except OSError:
        return
    if not (manifests_real.is_relative_to(home) and blobs_real.is_relative_to(home)):
        return  # manifests/ or blobs/ a link out of the models folder
    for manifest in sorted(p for p in manifests.rglob("*") if p.is_file()):
        try:
            if not manifest.resolve().is_relative_to(manifests_real) or manifest.stat().st_size > MAX_MANIFEST:
                continue
            layers = json.loads(manifest.read_text(encoding="utf-8")).get("layers", [])
            digest = next(layer["digest"] for layer in layers if layer.get("mediaType") == OLLAMA_MODEL)
            named = OLLAMA_DIGEST.fullmatch(digest) if isinstance(digest, str) else None
            blob = models / "blobs" / f"sha256-{named[1]}" if named else None
            if blob is None or blob.resolve().parent != blobs_real or not blob.is_file():
                continue
        except (OSError, ValueError, AttributeError, TypeError, KeyError, StopIteration, RecursionError):
            continue
        parts = manifest.relative_to(manifests).parts  # host / namespace / model / tag
        if len(parts) < 3:
            continue
        namespace, model, tag = parts[-3], parts[-2], parts[-1]
        name = f"{model}:{tag}" if namespace == "library" else f"{namespace}/{model}:{tag}"
        yield blob, name, "Ollama"


def _hf_name(path: Path, hub: Path) -> str:
    """models--org--repo/snapshots/REV/file.gguf -> org/repo/file.gguf; an MLX snapshot folder -> org/repo"""
    parts = path.relative_to(hub).parts
    if len(parts) >= 3 and parts[0].startswith("models--") and parts[1] == "snapshots":
        return "/".join([parts[0][len("models--") :].replace("--", "/"), *parts[3:]])
    return path.name


def _describe(path: Path, name: str, source: str) -> LocalModel | None:
    try:
        with path.open("rb") as f:
            if f.read(4) != b"GGUF":
                return None
        info = read_gguf(path)
    except (OSError, DraftlightError):
        return None  # not a model llama.cpp could load: not worth offering
    except Exception:  # a hostile header must not cost the listing
        return None
    from engine.models.facts import gguf_facts, kind_words  # facts names a model as this module's listing does

    facts = gguf_facts(info)
    words = kind_words(facts) if facts.kind.reads_target else ""
    return LocalModel(path, name, source, path.stat().st_size, facts.quantization, info.architecture, drafter=words)
