"""A random-weight f16 llama model for the exactness probe: 1024 wide, 6 layers, llama.cpp's 128-token test tokenizer.

  make_random_model.py OUT.gguf

Random weights give no ties, so a model drafting for itself has every draft accepted exactly
where a verify batch computes each row as a single-row pass does (benchmarks/gpu/measure.py exact).
Written with numpy alone (a GGUF v3 writer of the few kinds of keys needed), so it runs on a GPU
machine without gguf-py.
"""

from __future__ import annotations

import struct
import sys

import numpy as np

WIDTH, LAYERS, FF, HEADS, KV_HEADS, VOCAB = 1024, 6, 2816, 16, 4, 128
GGML_TYPES = {np.dtype(np.float32): 0, np.dtype(np.float16): 1}


def main() -> int:
    rng = np.random.default_rng(7)

    def weight(*ne: int, scale: float = 1.0) -> np.ndarray:
        fan_in = ne[0]
        return (rng.standard_normal(tuple(reversed(ne))) * scale / np.sqrt(fan_in)).astype(np.float16)

    w = Writer(sys.argv[1], "llama")
    w.add_name("draftlight random exactness probe")
    w.add_uint32("llama.vocab_size", VOCAB)
    w.add_uint32("llama.context_length", 4096)
    w.add_uint32("llama.embedding_length", WIDTH)
    w.add_uint32("llama.block_count", LAYERS)
    w.add_uint32("llama.feed_forward_length", FF)
    w.add_uint32("llama.attention.head_count", HEADS)
    w.add_uint32("llama.attention.head_count_kv", KV_HEADS)
    w.add_uint32("llama.rope.dimension_count", WIDTH // HEADS)
    w.add_float32("llama.rope.freq_base", 10000.0)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    w.add_string("tokenizer.ggml.model", "test")
    w.add_array("tokenizer.ggml.tokens", [f"tok_{i}" for i in range(VOCAB)])
    w.add_array("tokenizer.ggml.token_type", [1] * VOCAB)
    w.add_array("tokenizer.ggml.scores", [0.0] * VOCAB)
    w.add_bool("tokenizer.ggml.add_bos_token", False)
    w.add_bool("tokenizer.ggml.add_eos_token", False)
    w.add_tensor("token_embd.weight", weight(WIDTH, VOCAB, scale=np.sqrt(WIDTH)))
    w.add_tensor("output_norm.weight", np.ones(WIDTH, dtype=np.float32))
    w.add_tensor("output.weight", weight(WIDTH, VOCAB, scale=4.0))
    head = WIDTH // HEADS
    for i in range(LAYERS):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", np.ones(WIDTH, dtype=np.float32))
        w.add_tensor(b + "attn_q.weight", weight(WIDTH, WIDTH))
        w.add_tensor(b + "attn_k.weight", weight(WIDTH, KV_HEADS * head))
        w.add_tensor(b + "attn_v.weight", weight(WIDTH, KV_HEADS * head))
        w.add_tensor(b + "attn_output.weight", weight(WIDTH, WIDTH))
        w.add_tensor(b + "ffn_norm.weight", np.ones(WIDTH, dtype=np.float32))
        w.add_tensor(b + "ffn_gate.weight", weight(WIDTH, FF))
        w.add_tensor(b + "ffn_up.weight", weight(WIDTH, FF))
        w.add_tensor(b + "ffn_down.weight", weight(FF, WIDTH))
    w.close()
    return 0


class Writer:
    """GGUF v3: header, keys, tensor table, data aligned to 32 bytes; f32 and f16 tensors."""

    def __init__(self, path: str, arch: str) -> None:
        self.path, self.keys, self.tensors = path, [], []
        self.add_string("general.architecture", arch)

    @staticmethod
    def _str(text: str) -> bytes:
        raw = text.encode()
        return struct.pack("<Q", len(raw)) + raw

    def _key(self, key: str, kind: int, payload: bytes) -> None:
        self.keys.append(self._str(key) + struct.pack("<I", kind) + payload)

    def add_name(self, name: str) -> None:
        self.add_string("general.name", name)

    def add_string(self, key: str, value: str) -> None:
        self._key(key, 8, self._str(value))

    def add_uint32(self, key: str, value: int) -> None:
        self._key(key, 4, struct.pack("<I", value))

    def add_float32(self, key: str, value: float) -> None:
        self._key(key, 6, struct.pack("<f", value))

    def add_bool(self, key: str, value: bool) -> None:
        self._key(key, 7, struct.pack("<?", value))

    def add_array(self, key: str, values: list) -> None:
        if isinstance(values[0], str):
            body = struct.pack("<IQ", 8, len(values)) + b"".join(self._str(v) for v in values)
        elif isinstance(values[0], float):
            body = struct.pack("<IQ", 6, len(values)) + struct.pack(f"<{len(values)}f", *values)
        else:
            body = struct.pack("<IQ", 5, len(values)) + struct.pack(f"<{len(values)}i", *values)
        self._key(key, 9, body)

    def add_tensor(self, name: str, data: np.ndarray) -> None:
        self.tensors.append((name, np.ascontiguousarray(data)))

    def close(self) -> None:
        pad = lambda n: (n + 31) // 32 * 32  # noqa: E731
        table, offset = [], 0
        for name, data in self.tensors:
            dims = list(reversed(data.shape))
            table.append(
                self._str(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, GGML_TYPES[data.dtype], offset)
            )
            offset = pad(offset + data.nbytes)
        with open(self.path, "wb") as f:
            f.write(b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), len(self.keys)))
            f.write(b"".join(self.keys) + b"".join(table))
            f.write(b"\0" * (pad(f.tell()) - f.tell()))
            for _, data in self.tensors:
                f.write(data.tobytes())
                f.write(b"\0" * (pad(data.nbytes) - data.nbytes))


if __name__ == "__main__":
    sys.exit(main())
