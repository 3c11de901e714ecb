"""One name per model, everywhere a person reads it: the catalog's title for a catalog model,
else the file's (or folder's) name, then its quantization where the name does not say it.
The name a file's metadata gives (general.name) is a detail, never the heading."""

from __future__ import annotations

from pathlib import Path

from engine.errors import DraftlightError
from engine.models import catalog
from engine.runtime.gguf import file_type_name, read_gguf


def _read_quantization(path: Path) -> str:
    if path.suffix.lower() != ".gguf" or not path.is_file():
        return ""
    try:
        return file_type_name(read_gguf(path).metadata)
    except (OSError, DraftlightError):
        return ""


def model_title(path: str | Path | None, quant: str | None = None, fallback: str = "") -> str:
    """The model's one name: "Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)", "my-model (Q8_0)". `quant`
    where the caller has read the header already; else a GGUF file's header is read for it."""
    if path is None:
        return fallback
    path = Path(path)
    known = catalog.lookup(path.name)
    if known is not None:
        return known.title
    name = path.name[: -len(".gguf")] if path.name.lower().endswith(".gguf") else path.name
    quant = _read_quantization(path) if quant is None else quant
    return f"{name} ({quant})" if quant and quant.lower() not in name.lower() else name
