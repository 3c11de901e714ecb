"""MLX as a runtime: mlx-lm's model classes behind the runtime protocol (engine.runtime.protocol).

The runtime as a value (runtime: RUNTIME), run options and the accelerations they resolve to
(options: MlxOptions), a model (model: MlxModel) and its contexts (context: MlxContext). The
optional `mlx` extra installs MLX: RUNTIME and MlxOptions import without it, the model and its
contexts import it when first named.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.runtime.mlx.options import MlxOptions
from engine.runtime.mlx.runtime import RUNTIME

if TYPE_CHECKING:
    from engine.runtime.mlx.context import MlxContext
    from engine.runtime.mlx.model import MlxModel

__all__ = ["RUNTIME", "MlxContext", "MlxModel", "MlxOptions"]


def __getattr__(name: str) -> Any:
    # MLX is imported by the first module that needs a model or a context, not by choosing the runtime.
    if name == "MlxContext":
        from engine.runtime.mlx.context import MlxContext

        return MlxContext
    if name == "MlxModel":
        from engine.runtime.mlx.model import MlxModel

        return MlxModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
