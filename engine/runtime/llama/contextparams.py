"""What a context asks llama.cpp for: its size, within what the model was trained for and the memory
free now; its batch and output rows; and, for a recurrent state, a snapshot per draft row."""

from __future__ import annotations

import llama_cpp.llama_cpp as llama

from engine.runtime.contextsize import auto_context
from engine.runtime.llama.limits import available_memory, check_memory, context_size, kv_cache_bytes, padded_ctx
from engine.runtime.llama.options import KV_TYPES, LoadedModel, RuntimeOptions


def has_state(model: LoadedModel) -> bool:
    """Whether the model keeps a recurrent state beside (or instead of) a KV cache."""
    return bool(llama.llama_model_is_recurrent(model.ptr) or llama.llama_model_is_hybrid(model.ptr))


def context_params(model: LoadedModel, options: RuntimeOptions, max_rows: int) -> llama.llama_context_params:
    """The parameters of a context on `model` that verifies up to `max_rows` rows a batch; refused in
    a sentence where its KV cache cannot fit in the memory free now."""
    metadata, architecture, kv_type = model.info.metadata, model.info.architecture, options.kv_type
    if options.n_ctx == 0:  # none asked for: the trained length, as far as memory allows
        per_token = kv_cache_bytes(metadata, architecture, 1, kv_type)
        n_ctx = auto_context(model.n_ctx_train, per_token, None if options.on_gpu else available_memory())
    else:
        n_ctx = padded_ctx(context_size(options.n_ctx, model.n_ctx_train))
    kv_bytes = kv_cache_bytes(metadata, architecture, n_ctx, kv_type)
    check_memory(model.name, n_ctx, kv_bytes, options.on_gpu)
    params = llama.llama_context_default_params()
    params.n_ctx = n_ctx
    params.n_batch = max(options.n_batch, max_rows)
    params.n_ubatch = params.n_batch
    params.n_seq_max = 1
    # Rows with logits in one batch: 1 + the deepest draft this context will verify.
    params.n_outputs_max = max_rows
    params.n_outputs_max_per_seq = max_rows
    params.n_threads = options.threads
    params.n_threads_batch = options.threads
    params.type_k = params.type_v = KV_TYPES[options.kv_type]
    params.no_perf = True
    if has_state(model):
        # Recurrent state cannot drop a suffix: keep a snapshot per token of the latest
        # batch, so a verify pass can be undone by as many tokens as it drafted. llama.cpp
        # sets this to 0 for architectures without snapshot support.
        params.n_rs_seq = max_rows - 1
    return params
