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
from engine.runtime.formats import LLAMA, MLX, RUNTIMES, runtime_for
from engine.runtime.llama import RUNTIME as LLAMA_RUNTIME
from engine.runtime.llama import RuntimeOptions
from engine.runtime.mlx.runtime import RUNTIME as MLX_RUNTIME
from engine.runtime.protocol import RunOptions, TextModel
from engine.runtime.runtimes import Runtime

AUTO = "auto"
CHOICES = (AUTO, *RUNTIMES)  # what `--runtime` takes


def runtime_named(name: str) -> Runtime:
    """The runtime `--runtime` names ("llama", "mlx"); ValueError for another name."""
    for runtime in (LLAMA_RUNTIME, MLX_RUNTIME):
        if runtime.name == name:
            return runtime
    raise ValueError(f"no runtime called {name!r}")


def runtime_owning(path: str | Path) -> Runtime | None:
    """The runtime whose format `path` is in (a GGUF file's, an MLX folder's), or None for neither."""
    found = runtime_for(path)
    return None if found is None else runtime_named(found)


def chosen_runtime(path: str | Path, runtime: str | Runtime = AUTO) -> Runtime:
    """The runtime that will load `path`: the one asked for, or under "auto" the one its format is for."""
    if isinstance(runtime, Runtime):
        runtime = runtime.name
    if runtime not in CHOICES:
        raise ModelFileError(f"No runtime called {runtime!r}: choose one of {', '.join(CHOICES)}.")
    found = runtime_for(path)
    if runtime == AUTO:
        if found is None:  # each loader says what is wrong with what it was given: a folder, else a file
            return runtime_named(MLX if Path(path).expanduser().is_dir() else LLAMA)
        return runtime_named(found)
    if runtime == LLAMA and found == MLX:
        raise ModelFileError(
            f"{Path(path).name} is an MLX model folder and llama.cpp reads GGUF files: "
            "load it with --runtime mlx (or auto), or pick the model's GGUF file."
        )
    return runtime_named(runtime)


def run_options(runtime: str | Runtime, options: RuntimeOptions) -> RunOptions:
    """The options a runtime runs on, from what was asked for (context size, prompt batch)."""
    return (runtime if isinstance(runtime, Runtime) else runtime_named(runtime)).run_options(options)


def load_model(
    path: str | Path,
    runtime: str | Runtime = AUTO,
    options: RuntimeOptions | None = None,
    converted: Callable[[Path], Path] | None = None,
) -> TextModel:
    """The model at `path` on its runtime (see the module's docstring); a sentence where it cannot load.
    `converted` turns a GGUF file into an MLX folder (engine.models.mlx_conversions.mlx_folder_for)."""
    path = Path(path).expanduser()
    return chosen_runtime(path, runtime).load(path, options or RuntimeOptions(), converted)


def runtime_of(model: TextModel) -> Runtime:
    """The runtime a loaded model runs on."""
    return runtime_named(model.options.runtime)
