"""MLX as a runtime: mlx-lm's model classes behind the runtime protocol (engine.runtime.protocol).

Run options and the accelerations they resolve to (options: MlxOptions), a model (model:
MlxModel) and its contexts (context: MlxContext). The optional
`mlx` extra installs it; nothing else in the engine imports it yet.
"""

from engine.runtime.mlx.context import MlxContext
from engine.runtime.mlx.model import MlxModel
from engine.runtime.mlx.options import MlxOptions

__all__ = ["MlxContext", "MlxModel", "MlxOptions"]
