"""llama.cpp as a runtime: the runtime as a value (runtime: RUNTIME), a loaded GGUF model (RuntimeModel) and its contexts (RuntimeContext).

The backend and its log (backend), run options and the accelerations they resolve to (options),
a model (model), a context (context); the device's greedy sampler (devicegreedy), a draft
model's rows kept on the device (keptrows), batch observers (observers), MTP heads and
drafters that read the target's layers (heads); what llama.cpp would refuse or abort on,
checked first (loadcheck, probe, limits).
"""

from engine.runtime.llama.backend import default_threads, runtime_version, set_verbose, system_info
from engine.runtime.llama.context import Context
from engine.runtime.llama.model import Model
from engine.runtime.llama.options import RuntimeOptions
from engine.runtime.llama.runtime import RUNTIME

__all__ = [
    "RUNTIME",
    "Context",
    "Model",
    "RuntimeOptions",
    "default_threads",
    "runtime_version",
    "set_verbose",
    "system_info",
]
