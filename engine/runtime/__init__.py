"""Runtimes: what the round needs from a backend (protocol), and llama.cpp as one (llama).

`RuntimeContext` and `RuntimeModel` are what the round, the drafters and the measurement code
speak to; `Context`, `Model` and `RuntimeOptions` are llama.cpp's, the runtime a program loads.
"""

from engine.runtime.contexts import common_prefix
from engine.runtime.llama import (
    Context,
    Model,
    RuntimeOptions,
    default_threads,
    runtime_version,
    set_verbose,
    system_info,
)
from engine.runtime.protocol import Acceleration, RuntimeContext, RuntimeModel

__all__ = [
    "Acceleration",
    "Context",
    "Model",
    "RuntimeContext",
    "RuntimeModel",
    "RuntimeOptions",
    "common_prefix",
    "default_threads",
    "runtime_version",
    "set_verbose",
    "system_info",
]
