"""A runtime as a value: llama.cpp (engine.runtime.llama.RUNTIME) and MLX (engine.runtime.mlx.RUNTIME).

Each is one object that says which paths it owns, loads a model on its options, and answers the
questions code above engine/runtime/ would otherwise answer by comparing runtime names: whether it
has llama.cpp's exact and fast modes, its KV cache's type, whether the default draft model (a GGUF
file) loads on it as it stands. It is chosen once (engine.runtime.loading.chosen_runtime: by the
format of the files, or `--runtime`) and carried: on the engine (Engine.runtime), in a pair report
by its `name`. A layer test keeps runtime names out of comparisons outside engine/runtime/.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from engine.runtime.formats import Format, model_format

if TYPE_CHECKING:
    from engine.runtime.llama.options import RuntimeOptions
    from engine.runtime.protocol import RunOptions, TextModel


class Runtime(ABC):
    """One runtime: its name, the format of the files it owns, how it loads them and runs them."""

    name: ClassVar[str]  # as `--runtime` names it: "llama", "mlx"
    label: ClassVar[str]  # as a sentence names it: "llama.cpp", "MLX"
    format: ClassVar[Format]  # the files it reads as they stand
    files: ClassVar[str]  # one of them, as a sentence names it: "a GGUF file", "an MLX folder"
    # llama.cpp's choices: "exact" (batch-invariant) or "fast" batches, the KV cache's type, and a plain
    # pass on the fastest settings (repacked weights). MLX has one way to run a batch.
    has_modes: ClassVar[bool]
    # It loads other formats converted (GGUF files into MLX folders): a box profile is keyed by the
    # files it loads and its own options, known once the models are loaded.
    converts: ClassVar[bool]
    working_memory: ClassVar[str]  # what it needs beside weights and caches, in a clause

    def owns(self, path: str | Path) -> bool:
        """Whether `path` is in this runtime's format (a GGUF file, an MLX folder)."""
        return model_format(path) == self.format

    def loads_default_drafter(self, converted_target: bool) -> bool:
        """Whether the catalog's default draft model (a GGUF file) drafts on this runtime: on llama.cpp
        always, on MLX only beside a target converted from a GGUF file (the two convert alike)."""
        return True

    @abstractmethod
    def run_options(self, options: RuntimeOptions) -> RunOptions:
        """The options this runtime runs on, from what was asked for (context size, prompt batch)."""

    @abstractmethod
    def load(self, path: Path, options: RuntimeOptions, converted: Callable[[Path], Path] | None = None) -> TextModel:
        """The model at `path` on this runtime; a sentence (ModelFileError) where it cannot load.
        `converted` turns a GGUF file into an MLX folder, for a runtime that needs one."""

    def kv_type(self, options: RuntimeOptions) -> str:
        """The KV cache's element type these options give, as llama.cpp's -ctk names it."""
        return options.kv_type

    def mode(self, options: RunOptions) -> str:
        """How exact a batch is ("exact", "fast") where the runtime offers a choice, else ""."""
        return options.mode if self.has_modes else ""

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<runtime {self.name}>"
