"""Tiny random-weight Gemma 4 GGUF files: a target and its shared-memory MTP drafter ("assistant").

`gemma4(path)` writes a five-layer `gemma4` model 128 wide (layers 0-3 sliding-window
attention, layer 4 full attention, per-layer embeddings, final logit softcapping), the
shapes llama.cpp's own tests/test-llama-archs.cpp gives the architecture; `gemma4_assistant(path)`
a two-layer `gemma4-assistant` for it (llama.cpp's shared-memory MTP: no KV cache of its own,
its sliding layer reads the target's layer 3 keys and values and its full layer the target's
layer 4; it reads the target's token embeddings and the target's final hidden state). Both
use llama.cpp's "test" tokenizer of 128 tokens. Weights are seeded, so a file is the same
on every machine.

With `known` = (f, g) both are known by construction: every layer is zero, so the stream
carries the token's (scaled) one-hot embedding untouched, the target's next token after x
is f[x] and the assistant drafts g[x] after x (it reads only the token half of its input).
An assistant with reads="hidden" reads only the hidden-state half instead, so what it drafts
depends on which hidden row it is fed (see gemma4_assistant).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import synthetic
from synthetic import N_VOCAB, _choose, _finish, _ones, _random, _zeros

N_EMBD = 128  # the target's width
N_FF = 192
N_HEAD = 2
HEAD_DIM = 64  # full and sliding layers alike
N_LAYER = 5  # layers 0-3 sliding, 4 full: the assistant shares the last of each kind
N_EMBD_PER_LAYER = 64  # per-layer embedding width
N_SWA = 8  # sliding window, small enough that a 24-token run slides
SOFTCAP = 30.0
SWA_PATTERN = [True, True, True, True, False]

A_EMBD = 192  # the assistant's width: llama.cpp refuses one equal to the target's; > N_VOCAB for one-hots
A_FF = 256
A_LAYER = 2
A_SWA_PATTERN = [True, False]  # layer 0 reads the target's layer 3 (sliding), layer 1 its layer 4 (full)


def known_tables(seed: int = 3, wrong_every: int = 4) -> tuple[list[int], list[int]]:
    """(f, g) for the known pair: f one cycle through every token (a permutation, as reads="hidden" needs,
    and no short loop to get stuck in); g equal to f except where x % wrong_every == 0."""
    order = [int(v) for v in np.random.default_rng(seed).permutation(N_VOCAB)]
    f = [0] * N_VOCAB
    for i, x in enumerate(order):
        f[x] = order[(i + 1) % N_VOCAB]
    g = [f[x] if x % wrong_every else (f[x] + 1) % N_VOCAB for x in range(N_VOCAB)]
    return f, g


def _rope_freqs() -> np.ndarray:
    """Full layers' "proportional" RoPE, as the converter writes it: a quarter of the pairs rotate, the rest do not."""
    n_rot = HEAD_DIM // 8  # partial_rotary_factor 0.25 over head_dim/2 pairs
    return np.array([1.0] * n_rot + [1e30] * (HEAD_DIM // 2 - n_rot), dtype=np.float32)


def _writer(path: Path, arch: str, name: str, n_embd: int, n_ff: int, blocks: int):
    """synthetic's writer with Gemma 4's attention keys (read from this module, so a test may change them)."""
    w = synthetic._writer(path, arch, name, n_ff, blocks, n_embd=n_embd, norm_eps=1e-6)
    w.add_uint32(f"{arch}.attention.head_count", N_HEAD)
    w.add_uint32(f"{arch}.attention.head_count_kv", N_HEAD)  # the assistant's must match: it reads the target's cache
    w.add_uint32(f"{arch}.attention.key_length", HEAD_DIM)
    w.add_uint32(f"{arch}.attention.value_length", HEAD_DIM)
    w.add_uint32(f"{arch}.attention.key_length_swa", HEAD_DIM)
    w.add_uint32(f"{arch}.attention.value_length_swa", HEAD_DIM)
    w.add_uint32(f"{arch}.attention.sliding_window", N_SWA)
    w.add_uint32(f"{arch}.attention.shared_kv_layers", 0)
    w.add_float32(f"{arch}.rope.freq_base", 1000000.0)
    w.add_float32(f"{arch}.rope.freq_base_swa", 10000.0)
    return w


def gemma4(path: Path, seed: int = 11, stdev: float = 0.1, known: tuple[list[int], list[int]] | None = None) -> Path:
    """A Gemma 4 target: sliding layers 0-3, full layer 4, per-layer embeddings, logits softcapped at 30.

    With `known` = (f, g) its next token after x is f[x], whatever came before: the embedding
    is one-hot (scaled by sqrt(128) on the way in, undone by the final RMS norm), every layer
    writes zero into the stream (attention and FFN outputs zero, and RMS norm of zero is zero;
    the per-layer embedding's projection zero), and the output rows pick f[x]. Softcapping is
    monotone, so the argmax survives it.
    """
    arch = "gemma4"
    weight, ones = _random(seed, stdev), _ones
    if known is not None:
        weight = _zeros
    w = _writer(path, arch, "draftlight test gemma4", N_EMBD, N_FF, N_LAYER)
    w.add_array(f"{arch}.attention.sliding_window_pattern", SWA_PATTERN)
    w.add_uint32(f"{arch}.embedding_length_per_layer_input", N_EMBD_PER_LAYER)
    w.add_float32(f"{arch}.final_logit_softcapping", SOFTCAP)

    tok_embd = weight(N_EMBD, N_VOCAB) if known is None else np.eye(N_VOCAB, N_EMBD, dtype=np.float32)
    w.add_tensor("token_embd.weight", tok_embd)
    w.add_tensor("output_norm.weight", ones(N_EMBD))
    w.add_tensor("output.weight", weight(N_EMBD, N_VOCAB) if known is None else _choose(known[0], N_EMBD))
    w.add_tensor("rope_freqs.weight", _rope_freqs())
    w.add_tensor("per_layer_token_embd.weight", weight(N_EMBD_PER_LAYER * N_LAYER, N_VOCAB))
    w.add_tensor("per_layer_model_proj.weight", weight(N_EMBD, N_EMBD_PER_LAYER * N_LAYER))
    w.add_tensor("per_layer_proj_norm.weight", ones(N_EMBD_PER_LAYER))
    for layer in range(N_LAYER):
        b = f"blk.{layer}."
        w.add_tensor(b + "attn_norm.weight", ones(N_EMBD))
        w.add_tensor(b + "attn_q.weight", weight(N_EMBD, N_HEAD * HEAD_DIM))
        w.add_tensor(b + "attn_k.weight", weight(N_EMBD, N_HEAD * HEAD_DIM))
        w.add_tensor(b + "attn_v.weight", weight(N_EMBD, N_HEAD * HEAD_DIM))
        w.add_tensor(b + "attn_output.weight", weight(N_HEAD * HEAD_DIM, N_EMBD))
        w.add_tensor(b + "attn_q_norm.weight", ones(HEAD_DIM))
        w.add_tensor(b + "attn_k_norm.weight", ones(HEAD_DIM))
        w.add_tensor(b + "post_attention_norm.weight", ones(N_EMBD))
        w.add_tensor(b + "ffn_norm.weight", ones(N_EMBD))
        w.add_tensor(b + "ffn_gate.weight", weight(N_EMBD, N_FF))
        w.add_tensor(b + "ffn_up.weight", weight(N_EMBD, N_FF))
        w.add_tensor(b + "ffn_down.weight", weight(N_FF, N_EMBD))
        w.add_tensor(b + "post_ffw_norm.weight", ones(N_EMBD))
        w.add_tensor(b + "inp_gate.weight", weight(N_EMBD, N_EMBD_PER_LAYER))
        w.add_tensor(b + "proj.weight", weight(N_EMBD_PER_LAYER, N_EMBD))
        w.add_tensor(b + "post_norm.weight", ones(N_EMBD))
        w.add_tensor(b + "layer_output_scale.weight", np.array([1.0 if known else 0.5 + 0.1 * layer], np.float32))
    _finish(w)
    return path


def gemma4_assistant(
    path: Path,
    seed: int = 13,
    stdev: float = 0.1,
    known: tuple[list[int], list[int]] | None = None,
    reads: str = "token",
) -> Path:
    """A Gemma 4 assistant (MTP drafter) for `gemma4`: two query-only layers over the target's cache.

    Its input is the target's token embedding (times sqrt(128)) beside the target's final
    hidden state, through `nextn.pre_projection`; its output layer is its own token_embd;
    `nextn.post_projection` gives the hidden state it feeds itself on the next step.

    With `known` = (f, g) it drafts g[x] after the token x: the pre-projection passes the
    token half (one-hot) and ignores the hidden state, the layers write zero (out scale 1),
    and its embedding rows pick g[x].

    With `known` and reads="hidden" it ignores the token and reads the hidden state: a
    target's hidden state is its token's one-hot x', taken to mean "the target said f[x']
    next", so it drafts g[f[x']], and hands itself the one-hot f^-1[g[y]] after drafting from y
    (f must be a permutation), so that its next step drafts g[g[y]]. llama.cpp feeds the first
    step the target's row of the token *before* id_last (row `accepted` of the verify batch),
    and id_last is f of that token after every verify, so the drafts equal the token-reading
    assistant's, except in round 0, where id_last is the prompt's own: only a driver feeding the
    right rows gets them.
    """
    arch = "gemma4-assistant"
    weight, ones = _random(seed, stdev), _ones
    if known is not None:
        weight = _zeros
    w = _writer(path, arch, "draftlight test gemma4 assistant", A_EMBD, A_FF, A_LAYER)
    w.add_uint32(f"{arch}.embedding_length_out", N_EMBD)  # the target's width: its hidden state and embeddings
    w.add_uint32(f"{arch}.nextn_predict_layers", A_LAYER)  # every block is a head
    w.add_array(f"{arch}.attention.sliding_window_pattern", A_SWA_PATTERN)

    w.add_tensor("token_embd.weight", weight(A_EMBD, N_VOCAB) if known is None else _choose(known[1], A_EMBD))
    w.add_tensor("output_norm.weight", ones(A_EMBD))
    w.add_tensor("rope_freqs.weight", _rope_freqs())
    pre, post = weight(2 * N_EMBD, A_EMBD), weight(A_EMBD, N_EMBD)  # numpy [A_EMBD, 2*N_EMBD], [N_EMBD, A_EMBD]
    if known is not None and reads == "token":  # the token half through, the hidden-state half ignored
        pre[:N_EMBD, :N_EMBD] = np.eye(N_EMBD, dtype=np.float32)
    elif known is not None:  # the hidden-state half, moved on by f; its own next state f^-1[g[y]]
        f, g = known
        assert sorted(f) == list(range(N_VOCAB)), "reads='hidden' needs f to be a permutation"
        f_inv = {y: x for x, y in enumerate(f)}
        for x in range(N_VOCAB):
            pre[f[x], N_EMBD + x] = 1.0
            post[f_inv[g[x]], x] = 1.0
    elif reads != "token":
        raise ValueError("reads='hidden' is for a known assistant")
    w.add_tensor("nextn.pre_projection.weight", pre)
    w.add_tensor("nextn.post_projection.weight", post)
    for layer in range(A_LAYER):
        b = f"blk.{layer}."
        w.add_tensor(b + "attn_norm.weight", ones(A_EMBD))
        w.add_tensor(b + "attn_q.weight", weight(A_EMBD, N_HEAD * HEAD_DIM))
        w.add_tensor(b + "attn_output.weight", weight(N_HEAD * HEAD_DIM, A_EMBD))
        w.add_tensor(b + "attn_q_norm.weight", ones(HEAD_DIM))
        w.add_tensor(b + "post_attention_norm.weight", ones(A_EMBD))
        w.add_tensor(b + "layer_output_scale.weight", np.array([1.0], np.float32))
        w.add_tensor(b + "ffn_norm.weight", ones(A_EMBD))
        w.add_tensor(b + "ffn_gate.weight", weight(A_EMBD, A_FF))
        w.add_tensor(b + "ffn_up.weight", weight(A_EMBD, A_FF))
        w.add_tensor(b + "ffn_down.weight", weight(A_FF, A_EMBD))
        w.add_tensor(b + "post_ffw_norm.weight", ones(A_EMBD))
    _finish(w)
    return path
