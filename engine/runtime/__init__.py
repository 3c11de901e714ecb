"""The llama.cpp binding: load a model, decode a batch, read logits, rewind; GGUF reading."""

from engine.runtime.contexts import common_prefix, stoppable
from engine.runtime.llama import Context
from engine.runtime.model import Model, RuntimeOptions, default_threads, runtime_version, set_verbose, system_info

__all__ = [
    "Context",
    "Model",
    "RuntimeOptions",
    "common_prefix",
    "default_threads",
    "runtime_version",
    "set_verbose",
    "stoppable",
    "system_info",
]
