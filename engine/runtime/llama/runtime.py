"""llama.cpp as a runtime value (engine.runtime.runtimes.Runtime): GGUF files, loaded as they stand."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from engine.runtime.formats import LLAMA, RUNTIME_NAMES, Format
from engine.runtime.llama.model import Model
from engine.runtime.llama.options import RuntimeOptions
from engine.runtime.protocol import RunOptions, TextModel
from engine.runtime.runtimes import Runtime


class LlamaRuntime(Runtime):
    name: ClassVar[str] = LLAMA
    label: ClassVar[str] = RUNTIME_NAMES[LLAMA]
    format: ClassVar[Format] = "gguf"
    files: ClassVar[str] = "a GGUF file"
    has_modes: ClassVar[bool] = True
    converts: ClassVar[bool] = False
    working_memory: ClassVar[str] = "llama.cpp adds its working buffers (tens of MB on a CPU)"

    def run_options(self, options: RuntimeOptions) -> RunOptions:
        return options

    def load(self, path: Path, options: RuntimeOptions, converted: Callable[[Path], Path] | None = None) -> TextModel:
        return Model(path, options)


RUNTIME = LlamaRuntime()
