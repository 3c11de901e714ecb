"""What a backend sampler of our own needs of llama.cpp's C side: llama.h's sampler interface as a
ctypes structure, and ggml's functions, typed, from the llama.cpp library in use."""

from __future__ import annotations

import ctypes

import llama_cpp.llama_cpp as llama


class SamplerInterface(ctypes.Structure):
    """llama.h's llama_sampler_i, every member a plain function pointer (NULL where unused)."""

    _fields_ = [
        (name, ctypes.c_void_p)
        for name in (
            "name", "accept", "apply", "reset", "clone", "free", "backend_init", "backend_accept",
            "backend_apply", "backend_set_input", "backend_reset", "copy_state",
        )
    ]  # fmt: skip


def ggml_functions(signatures: tuple[tuple[str, list, object], ...]) -> ctypes.CDLL | None:
    """The llama.cpp library with each of ggml's `signatures` (name, argument types, result type)
    typed (its own ggml: a symbol looked up through it searches the libraries it loaded); None where
    one is missing."""
    lib = llama._lib
    for fn, args, res in signatures:
        f = getattr(lib, fn, None)
        if f is None:
            return None
        f.argtypes, f.restype = args, res
    return lib
