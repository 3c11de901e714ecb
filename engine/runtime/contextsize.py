"""The context made where none was asked for (n_ctx 0): sized from the model's trained length
and this machine's memory, for both runtimes."""

from __future__ import annotations

AUTO_CTX_CAP = 32_768  # past this a KV cache costs memory few conversations use
MEMORY_SHARE = 4  # an automatic context's KV cache takes at most a quarter of the memory free
CTX_STEP = 256  # llama.cpp pads a context to a multiple of this


def auto_context(n_ctx_train: int, kv_bytes_per_token: int | None = None, free_bytes: int | None = None) -> int:
    """The model's trained length, at most AUTO_CTX_CAP, and no more tokens than a quarter of the
    free memory holds in KV cache (where both are known); a multiple of 256, 256 at least."""
    n_ctx = min(n_ctx_train, AUTO_CTX_CAP) if n_ctx_train > 0 else AUTO_CTX_CAP
    if kv_bytes_per_token and free_bytes:
        n_ctx = min(n_ctx, free_bytes // MEMORY_SHARE // kv_bytes_per_token)
    return max(CTX_STEP, n_ctx // CTX_STEP * CTX_STEP)
