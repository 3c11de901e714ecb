"""A tiny random-weight llama model for the GGUF fuzz suite, written at test time (never committed).

Two layers, 64 wide, llama.cpp's "test" tokenizer of 128 tokens and a one-line chat template:
small enough (about 180 KB) that hundreds of mutated copies cost nothing, and a model
llama.cpp really loads and runs, so a mutation that slips past the header reader reaches
llama.cpp's own loader.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from tests.engine.synthetic import N_VOCAB, _writer  # the test tokenizer's 128 tokens

N_EMBD, N_FF, N_HEAD, BLOCKS = 64, 96, 2, 2
TEMPLATE = "{% for m in messages %}{{ m['content'] }}{% endfor %}"


def tiny_llama(path: Path, seed: int = 5, extra: Callable | None = None) -> Path:
    """Write the model to path; the same bytes on every machine. extra(writer) adds keys."""
    rng = np.random.default_rng(seed)

    def weight(*ne: int) -> np.ndarray:
        return (rng.standard_normal(tuple(reversed(ne))) * 0.1).astype(np.float32)

    w = _writer(path, "llama", "draftlight fuzz llama", N_FF, BLOCKS, N_EMBD)
    w.add_uint32("llama.attention.head_count", N_HEAD)
    w.add_uint32("llama.attention.head_count_kv", N_HEAD)
    w.add_string("tokenizer.chat_template", TEMPLATE)
    if extra is not None:
        extra(w)
    w.add_tensor("token_embd.weight", weight(N_EMBD, N_VOCAB))
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    w.add_tensor("output.weight", weight(N_EMBD, N_VOCAB))
    for layer in range(BLOCKS):
        b = f"blk.{layer}."
        w.add_tensor(b + "attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            w.add_tensor(b + name + ".weight", weight(N_EMBD, N_EMBD))
        w.add_tensor(b + "ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(b + "ffn_gate.weight", weight(N_EMBD, N_FF))
        w.add_tensor(b + "ffn_up.weight", weight(N_EMBD, N_FF))
        w.add_tensor(b + "ffn_down.weight", weight(N_FF, N_EMBD))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
