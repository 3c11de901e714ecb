"""llama.cpp's backend: started once a process, its log kept to explain a failure, what it runs on.

Everything in engine.runtime.llama goes through llama-cpp-python's low-level ctypes API.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import threading

import llama_cpp.llama_cpp as llama

_log_lock = threading.Lock()
_log_state: dict = {"verbose": False, "keeping": False, "recent": []}  # recent: (level, text)
_backend_ready = False


# "llama_model_load: error loading model: error loading model architecture: " before the reason
_LOG_PREFIX = re.compile(r"^(?:[a-z_0-9]+: |error loading model[a-z ]*: )+")
# ggml.h's enum ggml_log_level
GGML_LOG_LEVEL_WARN, GGML_LOG_LEVEL_ERROR, GGML_LOG_LEVEL_CONT = 3, 4, 5


@llama.llama_log_callback
def _log_callback(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
    message = text.decode("utf-8", errors="replace")
    if _log_state["verbose"]:
        os.write(2, text)
    recent = _log_state["recent"]
    if level == GGML_LOG_LEVEL_CONT:  # the rest of the line before it: kept if that was
        if _log_state["keeping"] and recent:
            recent[-1] = (recent[-1][0], recent[-1][1] + message.rstrip("\n"))
        return
    # Warnings and errors are kept to explain a failed load: llama.cpp says why at ERROR.
    _log_state["keeping"] = level in (GGML_LOG_LEVEL_WARN, GGML_LOG_LEVEL_ERROR)
    if _log_state["keeping"]:
        recent.append((level, message.strip()))
        del recent[:-20]


def clear_log() -> None:
    """Forget what llama.cpp said so far: llama_reason() then speaks of the next call alone."""
    _log_state["recent"].clear()


def llama_reason() -> str:
    """llama.cpp's own words for its latest failure: its error lines (else its warnings), or ""."""
    recent = _log_state["recent"]
    errors = [text for level, text in recent if level == GGML_LOG_LEVEL_ERROR] or [text for _, text in recent]
    said: list[str] = []
    for line in errors:
        text = _LOG_PREFIX.sub("", line).strip()
        if text and not text.startswith("failed to load model") and text not in said:
            said.append(text)
    return "; ".join(said)[:600]


def set_verbose(verbose: bool) -> None:
    """Show llama.cpp's own logging on stderr (off by default)."""
    _log_state["verbose"] = verbose


def init_backend() -> None:
    global _backend_ready
    with _log_lock:
        if not _backend_ready:
            llama.llama_log_set(_log_callback, ctypes.c_void_p(0))
            llama.llama_backend_init()
            _backend_ready = True


@functools.cache
def offloads_to_gpu() -> bool:
    """Whether this llama.cpp build runs layers on a GPU (Metal, CUDA, ...): fixed for the process."""
    init_backend()
    return bool(llama.llama_supports_gpu_offload())


@functools.cache
def offloads_to_cuda() -> bool:
    """Whether the GPU this llama.cpp build runs layers on is NVIDIA's, through CUDA."""
    return offloads_to_gpu() and "CUDA" in llama.llama_print_system_info().decode(errors="replace")


def default_threads() -> int:
    """Threads for decoding: every core up to 8 (past that, memory bandwidth rules)."""
    return max(1, min(os.cpu_count() or 1, 8))


def runtime_version() -> str:
    """llama-cpp-python's version and llama.cpp's system info, for cache keys and reports."""
    import llama_cpp

    return f"llama-cpp-python {llama_cpp.__version__}"


def system_info() -> str:
    init_backend()
    return llama.llama_print_system_info().decode("utf-8", errors="replace").strip()
