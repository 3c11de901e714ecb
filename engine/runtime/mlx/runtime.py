"""MLX as a runtime value (engine.runtime.runtimes.Runtime): MLX folders; a GGUF file converted first.

MLX itself is imported only when a model loads, so the value can be chosen and carried without it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from engine.errors import ModelFileError
from engine.runtime.formats import MLX, RUNTIME_NAMES, Format, model_format
from engine.runtime.llama.options import RuntimeOptions
from engine.runtime.mlx.options import MlxOptions
from engine.runtime.protocol import RunOptions, TextModel
from engine.runtime.runtimes import Runtime


class MlxRuntime(Runtime):
    name: ClassVar[str] = MLX
    label: ClassVar[str] = RUNTIME_NAMES[MLX]
    format: ClassVar[Format] = "mlx"
    files: ClassVar[str] = "an MLX folder"
    has_modes: ClassVar[bool] = False
    converts: ClassVar[bool] = True
    working_memory: ClassVar[str] = "MLX adds the arrays each pass computes, freed as it goes"

    def loads_default_drafter(self, converted_target: bool) -> bool:
        return converted_target

    def run_options(self, options: RuntimeOptions) -> RunOptions:
        return _mlx_options(options)

    def load(self, path: Path, options: RuntimeOptions, converted: Callable[[Path], Path] | None = None) -> TextModel:
        if path.is_dir():  # a damaged folder is said before MLX, mlx-lm and transformers take seconds to import
            from engine.runtime.mlx_check import check_folder

            check_folder(path)
        if model_format(path) == "gguf":
            if converted is None:
                raise ModelFileError(
                    f"{path.name} is a GGUF file: convert it to an MLX folder first, or use --runtime llama."
                )
            path = converted(path)
        try:
            from engine.runtime.mlx.model import MlxModel
        except ImportError as e:
            raise ModelFileError(
                f"The MLX runtime is not installed here ({e.name or e}): install Draftlight's `mlx` extra "
                "(pip install -e '.[mlx]'), or load the model with --runtime llama."
            ) from None
        return MlxModel.load(path, _mlx_options(options))

    def kv_type(self, options: RuntimeOptions) -> str:
        return "f16"


def _mlx_options(options: RuntimeOptions) -> MlxOptions:
    """What was asked for (context size, prompt batch), as MLX runs it."""
    return MlxOptions(n_ctx=options.n_ctx, prefill_chunk=options.n_batch)


RUNTIME = MlxRuntime()
