"""What a context may ask of llama.cpp: padded sizes, the trained context, the KV cache's memory."""

from __future__ import annotations

import pytest

from engine.errors import RuntimeFailure
from engine.runtime.llama import limits
from engine.runtime.llama.limits import check_memory, context_size, kv_cache_bytes, padded_ctx

QWEN_1_5B = {  # the default target's header
    "qwen2.block_count": 28,
    "qwen2.attention.head_count": 12,
    "qwen2.attention.head_count_kv": 2,
    "qwen2.embedding_length": 1536,
}


def test_a_context_is_asked_for_at_the_size_llama_cpp_pads_it_to():
    assert [padded_ctx(n) for n in (1, 64, 256, 257, 300, 512, 700, 0)] == [256, 256, 256, 512, 512, 512, 768, 0]


def test_a_context_past_the_trained_one_is_the_trained_one():
    assert context_size(100_000_000, 32_768) == 32_768
    assert context_size(300, 8_192) == 300
    assert context_size(0, 8_192) == 8_192  # 0: the model's own
    assert context_size(4_096, 0) == 4_096  # a header without a trained context
    with pytest.raises(RuntimeFailure, match="A context of -3 tokens is not a size"):
        context_size(-3, 8_192)


def test_the_kv_cache_estimate_follows_the_header():
    # 28 layers x 2 KV heads x (128 + 128) values per token, Q8_0 at 34 bytes per 32 values
    assert kv_cache_bytes(QWEN_1_5B, "qwen2", 32_768, "q8_0") == 32_768 * 28 * 2 * 256 * 34 // 32
    assert kv_cache_bytes(QWEN_1_5B, "qwen2", 1_000, "f16") == 1_000 * 28 * 2 * 256 * 2
    assert kv_cache_bytes({}, "qwen2", 1_000, "f16") is None


def test_a_kv_cache_past_free_memory_is_refused_before_it_is_allocated(monkeypatch):
    monkeypatch.setattr(limits, "available_memory", lambda: 2_000_000_000)
    need = kv_cache_bytes(QWEN_1_5B, "qwen2", 1 << 20, "f16")
    with pytest.raises(RuntimeFailure) as caught:
        check_memory("Qwen2.5 Coder 1.5B", 1 << 20, need, on_gpu=False)
    assert str(caught.value) == (
        "A context of 1,048,576 tokens needs about 30.1 GB for Qwen2.5 Coder 1.5B's KV cache and this machine "
        "has 2.0 GB free: choose a smaller context."
    )
    check_memory("Qwen2.5 Coder 1.5B", 4_096, kv_cache_bytes(QWEN_1_5B, "qwen2", 4_096, "f16"), on_gpu=False)
