"""Tiny random-weight GGUF models written at test time: architectures no download offers here.

`hybrid_qwen35(path)` writes a two-layer qwen35 model (layer 0 a gated delta-net recurrent
layer, layer 1 attention), optionally with an MTP head; `mamba(path)` a two-layer pure
state-space model, an architecture whose state llama.cpp cannot roll back; `dflash(path)`
a one-layer DFlash drafter for the qwen35 model, reading its layers 0 and 1. Both are 256 wide, with llama.cpp's
"test" tokenizer of 128 tokens: the shapes and keys llama.cpp's own
tests/test-llama-archs.cpp gives them. Weights are seeded, so a file is the same on every
machine. Never committed: tests write them into a temporary folder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

N_VOCAB = 128
N_EMBD = 256
N_FF = 384
N_HEAD = 2
HEAD_DIM = 128
SSM_INNER = 256
SSM_STATE = 128
SSM_GROUPS = 2
SSM_RANK = 2  # dt rank: one per value head
CONV_KERNEL = 4


def _random(seed: int, stdev: float):
    rng = np.random.default_rng(seed)

    def weight(*ne: int) -> np.ndarray:
        """A random tensor of ggml shape ne (numpy's shape is the reverse)."""
        return (rng.standard_normal(tuple(reversed(ne))) * stdev).astype(np.float32)

    return weight


def _ones(n: int) -> np.ndarray:
    return np.ones(n, dtype=np.float32)


def _zeros(*ne: int) -> np.ndarray:
    return np.zeros(tuple(reversed(ne)), dtype=np.float32)


def _choose(table: list[int], width: int = N_EMBD) -> np.ndarray:
    """An output layer that picks table[x] after the one-hot token x: [n_vocab, width] (ggml {width, n_vocab})."""
    out = np.zeros((N_VOCAB, width), dtype=np.float32)
    for x, y in enumerate(table):
        out[y, x] = 1.0
    return out


def _writer(path: Path, arch: str, name: str, n_ff: int, blocks: int = 2, n_embd: int = N_EMBD, norm_eps: float = 1e-5):
    """A writer with the keys every model here shares: sizes and the test tokenizer."""
    import gguf

    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(name)
    w.add_uint32(f"{arch}.vocab_size", N_VOCAB)
    w.add_uint32(f"{arch}.context_length", 256)
    w.add_uint32(f"{arch}.embedding_length", n_embd)
    w.add_uint32(f"{arch}.block_count", blocks)
    w.add_uint32(f"{arch}.feed_forward_length", n_ff)
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", norm_eps)
    w.add_string("tokenizer.ggml.model", "test")
    w.add_array("tokenizer.ggml.tokens", [f"tok_{i}" for i in range(N_VOCAB)])
    w.add_array("tokenizer.ggml.token_type", [1] * N_VOCAB)
    w.add_array("tokenizer.ggml.scores", [0.0] * N_VOCAB)
    w.add_bool("tokenizer.ggml.add_bos_token", False)
    w.add_bool("tokenizer.ggml.add_eos_token", False)
    return w


def _finish(w) -> None:
    from engine.runtime.llama.probe import trust

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    # Written here to llama.cpp's own test shapes: no child-process load probe needed (it has
    # its own tests, tests/engine/runtime/test_gguf_limits.py; a probe per file costs seconds
    # on a loaded box).
    trust(w.path)


def mamba(path: Path, seed: int = 7, stdev: float = 0.1) -> Path:
    """A pure state-space model: its state has no snapshots, so it cannot undo a rejected draft."""
    arch, inner = "mamba", 2 * N_EMBD
    weight = _random(seed, stdev)
    w = _writer(path, arch, "draftlight test mamba", N_FF)
    w.add_uint32(f"{arch}.attention.head_count", N_HEAD)
    w.add_uint32(f"{arch}.ssm.inner_size", inner)
    w.add_uint32(f"{arch}.ssm.conv_kernel", CONV_KERNEL)
    w.add_uint32(f"{arch}.ssm.state_size", SSM_STATE)
    w.add_uint32(f"{arch}.ssm.time_step_rank", SSM_RANK)
    w.add_tensor("token_embd.weight", weight(N_EMBD, N_VOCAB))
    w.add_tensor("output_norm.weight", _ones(N_EMBD))
    w.add_tensor("output.weight", weight(N_EMBD, N_VOCAB))
    for layer in (0, 1):
        b = f"blk.{layer}."
        w.add_tensor(b + "attn_norm.weight", _ones(N_EMBD))
        w.add_tensor(b + "ssm_in.weight", weight(N_EMBD, 2 * inner))
        w.add_tensor(b + "ssm_x.weight", weight(inner, SSM_RANK + 2 * SSM_STATE))
        w.add_tensor(b + "ssm_dt.weight", weight(SSM_RANK, inner))
        w.add_tensor(b + "ssm_dt.bias", weight(inner))
        w.add_tensor(b + "ssm_out.weight", weight(inner, N_EMBD))
        w.add_tensor(b + "ssm_conv1d.weight", weight(CONV_KERNEL, inner))
        w.add_tensor(b + "ssm_conv1d.bias", weight(inner))
        w.add_tensor(b + "ssm_a", -np.abs(weight(SSM_STATE, inner)) - 0.1)
        w.add_tensor(b + "ssm_d", _ones(inner))
    _finish(w)
    return path


def hybrid_qwen35(
    path: Path,
    seed: int = 42,
    stdev: float = 0.1,
    nextn: bool = False,
    heads_only: bool = False,
    known: tuple[list[int], list[int]] | None = None,
) -> Path:
    """A qwen35 model whose layer 0 is recurrent (needs state snapshots to roll back) and layer 1 attention.

    With `nextn`, a third block is its multi-token-prediction head, as Qwen 3.5 ships one: an
    attention block after `nextn.eh_proj`, which mixes the token's embedding with the trunk's
    hidden state before it (llama.cpp's qwen35 MTP graph). With `heads_only` (and `nextn`) the
    file holds that head alone, with the embeddings and output: a sidecar of the same model,
    its weights equal to the full file's.

    With `known` = (f, g), the choices are known by construction: every layer is zero, so
    the stream carries the token's embedding (one-hot) untouched, and the target's next
    token after x is f[x]; the head reads only the token (eh_proj passes the embedding
    half) and its own output layer drafts g[x] after x. The head is right where g[x] == f[x].
    """
    arch = "qwen35"
    weight, ones = _random(seed, stdev), _ones
    if known is not None:
        weight = _zeros
    w = _writer(path, arch, "draftlight test hybrid" + (" with MTP" if nextn else ""), N_FF, 3 if nextn else 2)
    write = w.add_tensor

    class Writer:  # every tensor is drawn in the same order; a sidecar keeps only the head's
        @staticmethod
        def add_tensor(name: str, data: np.ndarray) -> None:
            if not heads_only or not name.startswith(("blk.0.", "blk.1.")):
                write(name, data)

    tensors = Writer()
    if nextn:  # the head is the last block
        w.add_uint32(f"{arch}.nextn_predict_layers", 1)
    w.add_uint32(f"{arch}.attention.head_count", N_HEAD)
    w.add_uint32(f"{arch}.attention.head_count_kv", N_HEAD)
    w.add_uint32(f"{arch}.attention.key_length", HEAD_DIM)
    w.add_uint32(f"{arch}.attention.value_length", HEAD_DIM)
    w.add_array(f"{arch}.attention.recurrent_layers", [1, 0, 0] if nextn else [1, 0])
    w.add_uint32(f"{arch}.full_attention_interval", 2)
    w.add_uint32(f"{arch}.rope.dimension_count", HEAD_DIM)
    w.add_array(f"{arch}.rope.dimension_sections", [32, 32, 32, 32])
    w.add_float32(f"{arch}.rope.freq_base", 10000.0)
    w.add_uint32(f"{arch}.ssm.inner_size", SSM_INNER)
    w.add_uint32(f"{arch}.ssm.conv_kernel", CONV_KERNEL)
    w.add_uint32(f"{arch}.ssm.state_size", SSM_STATE)
    w.add_uint32(f"{arch}.ssm.time_step_rank", SSM_RANK)
    w.add_uint32(f"{arch}.ssm.group_count", SSM_GROUPS)

    tensors.add_tensor(
        "token_embd.weight", weight(N_EMBD, N_VOCAB) if known is None else np.eye(N_VOCAB, N_EMBD, dtype=np.float32)
    )
    tensors.add_tensor("output_norm.weight", ones(N_EMBD))
    tensors.add_tensor("output.weight", weight(N_EMBD, N_VOCAB) if known is None else _choose(known[0]))
    # layer 0: gated delta-net (recurrent)
    qkv = 2 * SSM_GROUPS * SSM_STATE + SSM_INNER  # queries and keys (one head per group), then values
    tensors.add_tensor("blk.0.attn_norm.weight", ones(N_EMBD))
    tensors.add_tensor("blk.0.post_attention_norm.weight", ones(N_EMBD))
    tensors.add_tensor("blk.0.ssm_norm.weight", ones(SSM_STATE))
    tensors.add_tensor("blk.0.attn_qkv.weight", weight(N_EMBD, qkv))
    tensors.add_tensor("blk.0.attn_gate.weight", weight(N_EMBD, SSM_INNER))
    tensors.add_tensor("blk.0.ssm_dt.bias", weight(SSM_RANK))
    tensors.add_tensor("blk.0.ssm_out.weight", weight(SSM_INNER, N_EMBD))
    tensors.add_tensor("blk.0.ssm_conv1d.weight", weight(CONV_KERNEL, qkv))
    tensors.add_tensor("blk.0.ssm_a", -np.abs(weight(SSM_RANK)) - 0.1)  # decay: negative, as trained models have it
    tensors.add_tensor("blk.0.ssm_alpha.weight", weight(N_EMBD, SSM_RANK))
    tensors.add_tensor("blk.0.ssm_beta.weight", weight(N_EMBD, SSM_RANK))
    # layer 1 (and the MTP head's block): attention
    attention = (1, 2) if nextn else (1,)
    for layer in attention:
        b = f"blk.{layer}."
        tensors.add_tensor(b + "attn_norm.weight", ones(N_EMBD))
        tensors.add_tensor(b + "post_attention_norm.weight", ones(N_EMBD))
        tensors.add_tensor(b + "attn_q_norm.weight", ones(HEAD_DIM))
        tensors.add_tensor(b + "attn_k_norm.weight", ones(HEAD_DIM))
        tensors.add_tensor(b + "attn_q.weight", weight(N_EMBD, 2 * N_HEAD * HEAD_DIM))  # queries and their gate
        tensors.add_tensor(b + "attn_k.weight", weight(N_EMBD, N_HEAD * HEAD_DIM))
        tensors.add_tensor(b + "attn_v.weight", weight(N_EMBD, N_HEAD * HEAD_DIM))
        tensors.add_tensor(b + "attn_output.weight", weight(N_HEAD * HEAD_DIM, N_EMBD))
    if nextn:
        eh_proj = weight(2 * N_EMBD, N_EMBD)
        if known is not None:  # the embedding half through, the hidden-state half ignored
            eh_proj[:, :N_EMBD] = np.eye(N_EMBD, dtype=np.float32)
            tensors.add_tensor("blk.2.nextn.shared_head_head.weight", _choose(known[1]))
        tensors.add_tensor("blk.2.nextn.eh_proj.weight", eh_proj)
        tensors.add_tensor("blk.2.nextn.enorm.weight", ones(N_EMBD))
        tensors.add_tensor("blk.2.nextn.hnorm.weight", ones(N_EMBD))
    for layer in (0, *attention):
        tensors.add_tensor(f"blk.{layer}.ffn_gate.weight", weight(N_EMBD, N_FF))
        tensors.add_tensor(f"blk.{layer}.ffn_up.weight", weight(N_EMBD, N_FF))
        tensors.add_tensor(f"blk.{layer}.ffn_down.weight", weight(N_FF, N_EMBD))
    _finish(w)
    return path


def dflash(
    path: Path,
    seed: int = 5,
    stdev: float = 0.5,
    vocab: tuple[int, ...] = (),
    known: list[int] | None = None,
    target_layers: tuple[int, ...] = (0, 1),
) -> Path:
    """A DFlash drafter for hybrid_qwen35: a block of 4 (3 drafts), mask token 127, no embeddings of its own.

    With `vocab` it may only ever draft those target tokens (a `d2t` map and an output layer
    of its own), which makes some drafts land on a random target.

    With `known` (a table, for the known target of hybrid_qwen35(known=...)): every weight is
    zero but its output layer, which writes known[x] after the one-hot x. Nothing mixes
    positions, so each mask row keeps the mask token's embedding: every draft is known[127].
    """
    arch, head_dim = "dflash", N_EMBD // N_HEAD
    weight = _random(seed, stdev) if known is None else _zeros
    w = _writer(path, arch, "draftlight test dflash", N_FF, blocks=1)
    w.add_uint32(f"{arch}.attention.head_count", N_HEAD)
    w.add_uint32(f"{arch}.attention.head_count_kv", N_HEAD)
    w.add_float32(f"{arch}.rope.freq_base", 10000.0)
    w.add_array(f"{arch}.target_layers", list(target_layers))
    w.add_uint32(f"{arch}.block_size", 4)
    w.add_uint32("tokenizer.ggml.mask_token_id", N_VOCAB - 1)
    w.add_tensor("fc.weight", weight(2 * N_EMBD, N_EMBD))
    w.add_tensor("enc.output_norm.weight", 1 + weight(N_EMBD))
    w.add_tensor("output_norm.weight", 1 + weight(N_EMBD))
    w.add_tensor("blk.0.attn_norm.weight", 1 + weight(N_EMBD))
    w.add_tensor("blk.0.attn_q.weight", weight(N_EMBD, N_HEAD * head_dim))
    w.add_tensor("blk.0.attn_k.weight", weight(N_EMBD, N_HEAD * head_dim))
    w.add_tensor("blk.0.attn_v.weight", weight(N_EMBD, N_HEAD * head_dim))
    w.add_tensor("blk.0.attn_output.weight", weight(N_HEAD * head_dim, N_EMBD))
    w.add_tensor("blk.0.attn_q_norm.weight", 1 + weight(head_dim))
    w.add_tensor("blk.0.attn_k_norm.weight", 1 + weight(head_dim))
    w.add_tensor("blk.0.ffn_norm.weight", 1 + weight(N_EMBD))
    w.add_tensor("blk.0.ffn_gate.weight", weight(N_EMBD, N_FF))
    w.add_tensor("blk.0.ffn_up.weight", weight(N_EMBD, N_FF))
    w.add_tensor("blk.0.ffn_down.weight", weight(N_FF, N_EMBD))
    if vocab:
        w.add_tensor("d2t", np.array(vocab, dtype=np.int64))
        w.add_tensor("output.weight", weight(N_EMBD, len(vocab)))
    elif known is not None:
        w.add_tensor("output.weight", _choose(known))
    _finish(w)
    return path


def eagle3(
    path: Path,
    seed: int = 5,
    stdev: float = 0.5,
    vocab: tuple[int, ...] = (),
    known: list[int] | None = None,
    target_layers: tuple[int, ...] = (0, 1, 2),
) -> Path:
    """An EAGLE-3 drafter for hybrid_qwen35: reads its layers 0 and 1 and its final state; no embeddings of its own.

    With `vocab` it may only ever draft those target tokens (a `d2t` map and an output layer).

    With `known` (a table, for the known target of hybrid_qwen35(known=...)): every weight is
    zero but `fc`, which passes layer 0's input (the one-hot x of the last token kept), and
    an output layer writing known[x] after it. With nothing else, the state stays one-hot x
    from step to step: every draft of a round is known[x].
    """
    arch = "eagle3"
    weight = _random(seed, stdev) if known is None else _zeros
    w = _writer(path, arch, "draftlight test eagle3", N_FF, blocks=1)
    w.add_uint32(f"{arch}.attention.head_count", N_HEAD)
    w.add_uint32(f"{arch}.attention.head_count_kv", N_HEAD)
    w.add_float32(f"{arch}.rope.freq_base", 10000.0)
    w.add_array(f"{arch}.target_layers", list(target_layers))  # 2: past the target's last layer, its final state
    w.add_uint32(f"{arch}.target_hidden_size", N_EMBD)
    fc = weight(3 * N_EMBD, N_EMBD)
    if known is not None:
        fc[:, :N_EMBD] = np.eye(N_EMBD, dtype=np.float32)
    w.add_tensor("fc.weight", fc)
    w.add_tensor("blk.0.attn_norm.weight", 1 + weight(N_EMBD))
    w.add_tensor("blk.0.attn_norm_2.weight", 1 + weight(N_EMBD))
    for name in ("attn_q", "attn_k", "attn_v"):  # over the token's embedding and g, side by side
        w.add_tensor(f"blk.0.{name}.weight", weight(2 * N_EMBD, N_EMBD))
    w.add_tensor("blk.0.attn_output.weight", weight(N_EMBD, N_EMBD))
    w.add_tensor("blk.0.ffn_norm.weight", 1 + weight(N_EMBD))
    w.add_tensor("blk.0.ffn_gate.weight", weight(N_EMBD, N_FF))
    w.add_tensor("blk.0.ffn_up.weight", weight(N_EMBD, N_FF))
    w.add_tensor("blk.0.ffn_down.weight", weight(N_FF, N_EMBD))
    w.add_tensor("output_norm.weight", 1 + weight(N_EMBD))
    if vocab:
        w.add_tensor("d2t", np.array(vocab, dtype=np.int64))
        w.add_tensor("output.weight", weight(N_EMBD, len(vocab)))
    elif known is not None:
        w.add_tensor("output.weight", _choose(known))
    _finish(w)
    return path


def vocabulary_gguf(
    path: Path, tokens: list[str], eos: int = 2, bos: int = 1, add_bos: bool = False, add_eos: bool = True
) -> Path:
    """A SentencePiece vocabulary and no weights, for llama.cpp's vocabulary-only load: `tokens` in id order
    (`<unk>` unknown, every other `<...>` a control token), its special ids and whether they are added."""
    import gguf

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(path.stem)
    for key, value in (
        ("context_length", 256),
        ("embedding_length", 64),
        ("block_count", 1),
        ("feed_forward_length", 64),
    ):
        w.add_uint32(f"llama.{key}", value)
    w.add_uint32("llama.attention.head_count", 1)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    w.add_string("tokenizer.ggml.model", "llama")
    w.add_array("tokenizer.ggml.tokens", tokens)
    w.add_array("tokenizer.ggml.token_type", [2 if t == "<unk>" else 3 if t.startswith("<") else 1 for t in tokens])
    w.add_array("tokenizer.ggml.scores", [0.0] * len(tokens))
    w.add_uint32("tokenizer.ggml.bos_token_id", bos)
    w.add_uint32("tokenizer.ggml.eos_token_id", eos)
    w.add_bool("tokenizer.ggml.add_bos_token", add_bos)
    w.add_bool("tokenizer.ggml.add_eos_token", add_eos)
    _finish(w)
    return path
