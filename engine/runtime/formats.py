"""Which runtime a model's files are for: a GGUF file is llama.cpp's, an MLX folder is MLX's.

The one place the format of a path is decided (the command line's `--runtime auto`, the engine's
loader, discovery's listing); headers alone, nothing loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

Format = Literal["gguf", "mlx"]
GGUF_MAGIC = b"GGUF"
LLAMA, MLX = "llama", "mlx"  # the runtimes, as `--runtime` names them
RUNTIMES = (LLAMA, MLX)
RUNTIME_OF: dict[Format, str] = {"gguf": LLAMA, "mlx": MLX}
RUNTIME_NAMES = {LLAMA: "llama.cpp", MLX: "MLX"}  # as a sentence names them: "on MLX"


def runtime_name(runtime: object) -> str:
    """The runtime (its name, or the value: engine.runtime.runtimes) as a sentence names it: "llama.cpp", "MLX"."""
    return RUNTIME_NAMES.get(str(runtime), str(runtime))


def is_mlx_folder(path: Path) -> bool:
    """A folder with a config.json and safetensors weights (mlx-community's layout, mlx_lm.convert's)."""
    try:
        return path.is_dir() and (path / "config.json").is_file() and any(path.glob("*.safetensors"))
    except OSError:
        return False


def model_format(path: str | Path) -> Format | None:
    """ "gguf" for a file that starts with GGUF's magic, "mlx" for an MLX folder, else None."""
    p = Path(path).expanduser()
    if is_mlx_folder(p):
        return "mlx"
    try:
        if p.is_file():
            with p.open("rb") as f:
                return "gguf" if f.read(4) == GGUF_MAGIC else None
    except OSError:
        return None
    return None


def runtime_for(path: str | Path) -> str | None:
    """The runtime that loads `path`: "llama" for a GGUF file, "mlx" for an MLX folder, None for neither."""
    fmt = model_format(path)
    return RUNTIME_OF[fmt] if fmt is not None else None
