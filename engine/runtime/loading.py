"""Load a model on the runtime its files are for, or on the one asked for.

`--runtime auto` follows the format (engine.runtime.formats): a GGUF file on llama.cpp, an MLX
folder on MLX. Asked for MLX, a GGUF file is converted once to an MLX folder beside the cached
models (engine.models.mlx_conversions); asked for llama.cpp, an MLX folder is refused in a sentence,
since llama.cpp reads GGUF files alone. MLX is imported only when a model needs it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from engine.errors import ModelFileError
from engine.runtime.formats import LLAMA, MLX, RUNTIMES, model_format, runtime_for
from engine.runtime.llama import Model, RuntimeOptions
from engine.runtime.protocol import RunOptions, TextModel

AUTO = "auto"
CHOICES = (AUTO, *RUNTIMES)  # what `--runtime` takes


def chosen_runtime(path: str | Path, runtime: str = AUTO) -> str:
    """The runtime that will load `path`: the one asked for, or under "auto" the one its format is for."""
    if runtime not in CHOICES:
        raise ModelFileError(f"No runtime called {runtime!r}: choose one of {', '.join(CHOICES)}.")
    found = runtime_for(path)
    if runtime == AUTO:
        if found is None:  # each loader says what is wrong with what it was given: a folder, else a file
            return MLX if Path(path).expanduser().is_dir() else LLAMA
        return found
    if runtime == LLAMA and found == MLX:
        raise ModelFileError(
            f"{Path(path).name} is an MLX model folder and llama.cpp reads GGUF files: "
            "load it with --runtime mlx (or auto), or pick the model's GGUF file."
        )
    return runtime


def run_options(runtime: str, options: RuntimeOptions) -> RunOptions:
    """The options a runtime runs on, from what was asked for (context size, prompt batch)."""
    if runtime == MLX:
        from engine.runtime.mlx import MlxOptions

        return MlxOptions(n_ctx=options.n_ctx, prefill_chunk=options.n_batch)
    return options


def load_model(
    path: str | Path,
    runtime: str = AUTO,
    options: RuntimeOptions | None = None,
    converted: Callable[[Path], Path] | None = None,
) -> TextModel:
    """The model at `path` on its runtime (see the module's docstring); a sentence where it cannot load.
    `converted` turns a GGUF file into an MLX folder (engine.models.mlx_conversions.mlx_folder_for)."""
    options = options or RuntimeOptions()
    path = Path(path).expanduser()
    chosen = chosen_runtime(path, runtime)
    if chosen == LLAMA:
        return Model(path, options)
    if path.is_dir():  # a damaged folder is said before MLX, mlx-lm and transformers take seconds to import
        from engine.runtime.mlx_check import check_folder

        check_folder(path)
    mlx = _mlx()
    if model_format(path) == "gguf":
        if converted is None:
            raise ModelFileError(
                f"{path.name} is a GGUF file: convert it to an MLX folder first, or use --runtime llama."
            )
        path = converted(path)
    return mlx.MlxModel.load(path, run_options(MLX, options))


def runtime_of(model: TextModel) -> str:
    """The runtime a loaded model runs on: "llama" or "mlx"."""
    return model.options.runtime


def _mlx():
    try:
        import engine.runtime.mlx as mlx
    except ImportError as e:
        raise ModelFileError(
            f"The MLX runtime is not installed here ({e.name or e}): install Draftlight's `mlx` extra "
            "(pip install -e '.[mlx]'), or load the model with --runtime llama."
        ) from None
    return mlx
