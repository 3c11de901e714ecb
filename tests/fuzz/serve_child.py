"""A real `draftlight serve` for the hostile-client suite: a child process that loads a tiny
model and answers through `engine.serve.server.serve`, as the command line does, with the
deadlines a test chooses (the defaults are minutes of waiting a test should not spend).

    python -m tests.fuzz.serve_child MODEL PORT QUEUE HEAD_S BODY_S STALLED_S [TOKEN]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from tests.engine.synthetic import N_VOCAB

N_EMBD, N_FF, N_HEAD, BLOCKS = 64, 96, 2, 2
CONTEXT = 1 << 15  # long enough that a reply holds the seat for seconds (ignore_eos, many tokens)
TEMPLATE = "{% for m in messages %}{{ m['content'] }}{% endfor %}"


def long_llama(path: Path, seed: int = 5) -> Path:
    """tests/fuzz/tiny_gguf.py's model with a context of CONTEXT tokens (that one has 256)."""
    import gguf

    rng = np.random.default_rng(seed)

    def weight(*ne: int) -> np.ndarray:
        return (rng.standard_normal(tuple(reversed(ne))) * 0.1).astype(np.float32)

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("draftlight hostile-client llama")
    for key, value in (("vocab_size", N_VOCAB), ("context_length", CONTEXT), ("embedding_length", N_EMBD),
                       ("block_count", BLOCKS), ("feed_forward_length", N_FF), ("attention.head_count", N_HEAD),
                       ("attention.head_count_kv", N_HEAD)):  # fmt: skip
        w.add_uint32(f"llama.{key}", value)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    w.add_string("tokenizer.ggml.model", "test")
    w.add_array("tokenizer.ggml.tokens", [f"tok_{i}" for i in range(N_VOCAB)])
    w.add_array("tokenizer.ggml.token_type", [1] * N_VOCAB)
    w.add_array("tokenizer.ggml.scores", [0.0] * N_VOCAB)
    w.add_bool("tokenizer.ggml.add_bos_token", False)
    w.add_bool("tokenizer.ggml.add_eos_token", False)
    w.add_string("tokenizer.chat_template", TEMPLATE)
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


def main(argv: list[str]) -> None:
    from engine.runtime.llama.options import RuntimeOptions
    from engine.serve.app import ServeConfig
    from engine.serve.guard import Deadlines
    from engine.serve.server import serve
    from engine.session import Engine

    model, port, queue, head_s, body_s, stalled_s, *token = argv
    engine = Engine.load(model, "none", RuntimeOptions(n_ctx=CONTEXT, n_threads=1))
    deadlines = Deadlines(head_s=float(head_s), body_s=float(body_s), keep_alive_s=1, stalled_reader_s=float(stalled_s))
    config = ServeConfig(token[0] if token else None, 8192, CONTEXT // 2, int(queue), 0, deadlines=deadlines)
    serve(engine, "127.0.0.1", int(port), config)


if __name__ == "__main__":
    main(sys.argv[1:])
