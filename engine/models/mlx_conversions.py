"""MLX folders of GGUF models, converted once into the user cache (engine.runtime.mlx.convert).

    python -m engine.models.mlx_conversions [NAME_OR_PATH ...] [--mode 4bit|4bit-f32|...]

converts catalog models (by name) or GGUF paths; the default pair without names.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from engine.errors import ModelFileError, ModelNotAvailable
from engine.models import catalog


def conversions_dir() -> Path:
    """Where converted folders live: beside the GGUF models, in the user cache."""
    return catalog.cache_dir() / "mlx"


def mlx_folder_for(gguf: str | Path, mode: str | None = None, log: Callable[[str], None] | None = None) -> Path:
    """The MLX folder of the GGUF at `gguf`, converted on first use (mode: 4-bit by default)."""
    from engine.runtime.mlx.convert import mlx_folder_for as convert_once

    return convert_once(gguf, mode, cache=conversions_dir(), log=log)


def main(argv: list[str] | None = None) -> int:
    """Convert catalog models or GGUF paths to MLX folders; the default pair without names."""
    from engine.runtime.mlx.convert import MODES

    parser = argparse.ArgumentParser(prog="python -m engine.models.mlx_conversions", description=main.__doc__)
    parser.add_argument("models", nargs="*", help="catalog names or .gguf paths (default: the default pair)")
    parser.add_argument("--mode", choices=sorted(MODES), help="default: 4bit on Metal, 4bit-f32 on a CPU")
    args = parser.parse_args(argv)
    for name in args.models or [catalog.DEFAULT_TARGET.key, catalog.DEFAULT_DRAFTER.key]:
        try:
            known = catalog.lookup(name)
            print(mlx_folder_for(catalog.resolve(known, download=False) if known else Path(name), args.mode, print))
        except (ModelFileError, ModelNotAvailable, OSError) as exc:
            print(f"{name}: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
