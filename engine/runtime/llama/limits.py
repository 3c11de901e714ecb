"""What a context may ask of llama.cpp, checked before llama.cpp is asked.

llama.cpp asserts (and so aborts the whole process) on some sizes, and allocates the whole
KV cache before it can fail; both are refused here with a sentence instead.
"""

from __future__ import annotations

import os

from engine.errors import RuntimeFailure

CTX_PADDING = 256  # llama.cpp rounds a context up to a multiple of this
KV_BYTES_PER_ELEMENT = {"q8_0": 34 / 32, "f16": 2.0}  # Q8_0: 32 values in 34 bytes


def padded_ctx(n_ctx: int) -> int:
    """The context llama.cpp will make for `n_ctx`, asked for outright.

    llama.cpp pads the context to a multiple of 256 but keeps the batch at the size asked
    for, so a context of 300 took prompt batches of 300 rows at most while the engine sent
    512 (an assert, exit 134). Asking for the padded size keeps the batch at 256 rows or more.
    """
    return -(-n_ctx // CTX_PADDING) * CTX_PADDING if n_ctx > 0 else 0


def kv_cache_bytes(metadata: dict, architecture: str, n_ctx: int, kv_type: str) -> int | None:
    """An estimate of the KV cache's size from the model's header; None where the header lacks a size."""
    key = f"{architecture}."
    n_layer = metadata.get(key + "block_count")
    n_head = metadata.get(key + "attention.head_count")
    n_embd = metadata.get(key + "embedding_length")
    if not (isinstance(n_layer, int) and isinstance(n_head, int) and isinstance(n_embd, int)):
        return None
    if min(n_layer, n_head, n_embd) <= 0:
        return None
    n_head_kv = metadata.get(key + "attention.head_count_kv")
    n_head_kv = n_head_kv if isinstance(n_head_kv, int) and n_head_kv > 0 else n_head
    k_len = metadata.get(key + "attention.key_length") or n_embd // n_head
    v_len = metadata.get(key + "attention.value_length") or n_embd // n_head
    return int(n_ctx * n_layer * n_head_kv * (k_len + v_len) * KV_BYTES_PER_ELEMENT.get(kv_type, 2.0))


def available_memory() -> int | None:
    """Bytes of memory free for a new allocation now, where the system says; else None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def context_size(n_ctx: int, n_ctx_train: int) -> int:
    """The context to make for `n_ctx` asked: no larger than the model was trained for (past that
    it reads positions it never learned, and --ctx 100000000 allocated 5 GB before failing)."""
    if n_ctx < 0:
        raise RuntimeFailure(f"A context of {n_ctx:,} tokens is not a size: choose a positive number of tokens.")
    return min(n_ctx, n_ctx_train) if n_ctx_train > 0 and n_ctx else n_ctx or n_ctx_train


def check_memory(name: str, n_ctx: int, kv_bytes: int | None, on_gpu: bool) -> None:
    """Refuse a context whose KV cache cannot fit in the memory free now, before llama.cpp allocates it."""
    free = None if on_gpu else available_memory()  # a GPU's memory is its own: llama.cpp says there
    if kv_bytes is not None and free is not None and kv_bytes > free:
        raise RuntimeFailure(
            f"A context of {n_ctx:,} tokens needs about {kv_bytes / 1e9:.1f} GB for {name}'s KV cache and this "
            f"machine has {free / 1e9:.1f} GB free: choose a smaller context."
        )
