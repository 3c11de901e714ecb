"""Tiny GGUF files for chained MTP heads (step35), DFlash2 and DSpark, in the style of synthetic.py.

`step35_mtp(path, heads=3)`: a two-layer step35 model (layer 0 full attention, layer 1 sliding window)
with `heads` NextN blocks after it, which llama.cpp runs as a chain (one head per draft step,
llama_set_nextn_layer_offset). step35 is the only architecture in the pinned source whose MTP
graph takes n_layer_nextn > 1 and whose loader requires every head (src/models/step35.cpp);
qwen35/qwen35moe/qwen3next/glm4moe/deepseek*/cohere2moe/bailingmoe3 assert n_layer_nextn == 1.
Sizes are test-llama-archs' for step35 (two heads, ff 384, window 32) except the width: 128, heads of 64, as
q8_0 caches refuse test-llama-archs' 160 (heads of 80: "block size 32 does not divide n_embd_head_k=80").

`dflash2(path)` / `dspark(path)`: drafters for synthetic.hybrid_qwen35 (256 wide, reads its layers 0 and 1).

Each has `known=`: weights zero, embeddings one-hot, so the drafts are known by construction
(see the docstrings). Weights are seeded f32.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from synthetic import N_EMBD, N_FF, N_HEAD, N_VOCAB, _choose, _finish, _ones, _random, _writer, _zeros

STEP35_EMBD = 128  # test-llama-archs uses 160 (heads of 80), but q8_0 K/V caches need a head size divisible by 32
STEP35_HEAD = 2
STEP35_SWA = 32  # n_ctx / 8


def step35_mtp(
    path: Path,
    heads: int = 3,
    seed: int = 35,
    stdev: float = 0.1,
    known: tuple[list[int], list[list[int]]] | None = None,
    n_embd: int = STEP35_EMBD,
    noise: float = 0.0,
) -> Path:
    """A step35 target with `heads` chained MTP heads (blocks 2 .. 2+heads-1), all full attention.

    With `known` = (f, [g_0, .., g_{heads-1}]): every layer is zero, the token embedding is one-hot,
    so the target picks f[x] after x; head j reads only its token (eh_proj passes the embedding
    half, ignores the hidden half) and its own shared_head_head picks g_j[x]. llama.cpp's chain
    therefore drafts d_0 = g_0[x], d_1 = g_1[d_0], d_2 = g_2[d_1] after id_last x. With `noise` > 0 the
    zero weights get N(0, noise) instead: the choices stay (for small noise) but hidden states, KV and
    the h rows the chain passes along all count in the logits, so drafts' probabilities check the wiring.
    """
    arch, head_dim = "step35", n_embd // STEP35_HEAD
    weight = _random(seed, stdev) if known is None else (_random(seed, noise) if noise > 0 else _zeros)
    n_layer = 2
    w = _writer(path, arch, f"draftlight test step35 with {heads} MTP heads", N_FF, n_layer + heads, n_embd=n_embd)
    w.add_uint32(f"{arch}.nextn_predict_layers", heads)
    w.add_uint32(f"{arch}.attention.head_count", STEP35_HEAD)
    w.add_uint32(f"{arch}.attention.head_count_kv", STEP35_HEAD)
    w.add_uint32(f"{arch}.attention.sliding_window", STEP35_SWA)
    # trunk: layer 0 full, layer 1 sliding (test-llama-archs' il % 2); the heads full attention
    w.add_array(f"{arch}.attention.sliding_window_pattern", [False, True] + [False] * heads)
    w.add_float32(f"{arch}.rope.freq_base", 10000.0)
    w.add_uint32(f"{arch}.expert_feed_forward_length", N_FF)  # required key, unused: no experts (dense FFN)

    eye = np.eye(N_VOCAB, n_embd, dtype=np.float32)
    w.add_tensor("token_embd.weight", weight(n_embd, N_VOCAB) if known is None else eye)
    w.add_tensor("output_norm.weight", _ones(n_embd))
    w.add_tensor("output.weight", weight(n_embd, N_VOCAB) if known is None else _choose(known[0], n_embd))
    for il in range(n_layer + heads):
        b = f"blk.{il}."
        w.add_tensor(b + "attn_norm.weight", _ones(n_embd))
        w.add_tensor(b + "attn_q_norm.weight", _ones(head_dim))
        w.add_tensor(b + "attn_k_norm.weight", _ones(head_dim))
        w.add_tensor(b + "attn_q.weight", weight(n_embd, STEP35_HEAD * head_dim))
        w.add_tensor(b + "attn_k.weight", weight(n_embd, STEP35_HEAD * head_dim))
        w.add_tensor(b + "attn_v.weight", weight(n_embd, STEP35_HEAD * head_dim))
        w.add_tensor(b + "attn_output.weight", weight(STEP35_HEAD * head_dim, n_embd))
        w.add_tensor(b + "attn_gate.weight", weight(n_embd, STEP35_HEAD))  # head-wise sigmoid gate
        w.add_tensor(b + "ffn_norm.weight", _ones(n_embd))
        w.add_tensor(b + "ffn_gate.weight", weight(n_embd, N_FF))
        w.add_tensor(b + "ffn_up.weight", weight(n_embd, N_FF))
        w.add_tensor(b + "ffn_down.weight", weight(N_FF, n_embd))
        if il >= n_layer:
            eh_proj = weight(2 * n_embd, n_embd)
            if known is not None:  # the (normed) token embedding half through, the hidden half ignored
                eh_proj[:, :n_embd] += np.eye(n_embd, dtype=np.float32)
                w.add_tensor(b + "nextn.shared_head_head.weight", _choose(known[1][il - n_layer], n_embd))
            w.add_tensor(b + "nextn.eh_proj.weight", eh_proj)
            w.add_tensor(b + "nextn.enorm.weight", _ones(n_embd))
            w.add_tensor(b + "nextn.hnorm.weight", _ones(n_embd))
            w.add_tensor(b + "nextn.shared_head_norm.weight", _ones(n_embd))
    _finish(w)
    return path


def _dflash_common(w, arch: str, block: int, weight, known: bool) -> None:
    head_dim = N_EMBD // N_HEAD
    w.add_uint32(f"{arch}.attention.head_count", N_HEAD)
    w.add_uint32(f"{arch}.attention.head_count_kv", N_HEAD)
    w.add_float32(f"{arch}.rope.freq_base", 10000.0)
    w.add_array(f"{arch}.target_layers", [0, 1])
    w.add_uint32(f"{arch}.block_size", block)
    w.add_uint32("tokenizer.ggml.mask_token_id", N_VOCAB - 1)
    norm = (lambda n: _ones(n)) if known else (lambda n: 1 + weight(n))
    w.add_tensor("fc.weight", weight(2 * N_EMBD, N_EMBD))
    w.add_tensor("enc.output_norm.weight", norm(N_EMBD))
    w.add_tensor("output_norm.weight", norm(N_EMBD))
    w.add_tensor("blk.0.attn_norm.weight", norm(N_EMBD))
    w.add_tensor("blk.0.attn_q.weight", weight(N_EMBD, N_HEAD * head_dim))
    w.add_tensor("blk.0.attn_k.weight", weight(N_EMBD, N_HEAD * head_dim))
    w.add_tensor("blk.0.attn_v.weight", weight(N_EMBD, N_HEAD * head_dim))
    w.add_tensor("blk.0.attn_output.weight", weight(N_HEAD * head_dim, N_EMBD))
    w.add_tensor("blk.0.attn_q_norm.weight", norm(head_dim))
    w.add_tensor("blk.0.attn_k_norm.weight", norm(head_dim))
    w.add_tensor("blk.0.ffn_norm.weight", norm(N_EMBD))
    w.add_tensor("blk.0.ffn_gate.weight", weight(N_EMBD, N_FF))
    w.add_tensor("blk.0.ffn_up.weight", weight(N_EMBD, N_FF))
    w.add_tensor("blk.0.ffn_down.weight", weight(N_FF, N_EMBD))


def dflash2(
    path: Path,
    seed: int = 6,
    stdev: float = 0.5,
    top_k: int = 4,
    rank: int = 16,
    kernel: int = 2,
    group: int = 64,
    block: int = 4,
    known: tuple[list[int], list[int]] | None = None,
) -> Path:
    """A DFlash2 drafter (selector lattice, dflash.selector_top_k > 0) for hybrid_qwen35: block of 4, mask 127.

    With `known` = (C, s): C the k candidate tokens, s[t] in range(k) for every token t. Layers are
    zero, so every MASK slot carries the (one-hot, via the target's embeddings) mask token; the
    drafter's own output layer ranks C first (so top-k = C at every slot), the selector gate is 1,
    and selector_predecessor[t] . selector_successor[C[j]] = 100 [j == s[t]]. The lattice walk
    therefore drafts d_1 = C[s[x]], d_2 = C[s[d_1]], ... after id_last x (needs a known target,
    hybrid_qwen35(known=...), whose embeddings are one-hot). s[t] == index(f[t]) makes a draft right.
    """
    arch = "dflash"
    weight = _random(seed, stdev) if known is None else _zeros
    w = _writer(path, arch, "draftlight test dflash2", N_FF, blocks=1)
    _dflash_common(w, arch, block, weight, known is not None)
    w.add_uint32(f"{arch}.conv_kernel_size", kernel)
    w.add_uint32(f"{arch}.conv_group_size", group)
    w.add_uint32(f"{arch}.selector_rank", rank)
    w.add_uint32(f"{arch}.selector_top_k", top_k)
    projected = 2 * kernel * (N_EMBD // group)
    for side in ("attn", "ffn"):
        w.add_tensor(f"blk.0.{side}_conv_base", weight(N_EMBD, kernel, 2))  # no ".weight": llama-arch names it so
        w.add_tensor(f"blk.0.{side}_conv_proj.weight", weight(N_EMBD, projected))
    if known is None:
        w.add_tensor("selector_predecessor.weight", weight(rank, N_VOCAB))
        w.add_tensor("selector_successor.weight", weight(rank, N_VOCAB))
        w.add_tensor("selector_hidden.weight", weight(N_EMBD, rank))
    else:
        cands, succ_of = known
        assert len(cands) == top_k and rank >= top_k and N_VOCAB - 1 not in cands
        mask = N_VOCAB - 1
        scale = float(np.sqrt(N_EMBD))  # rms-normed one-hot: the mask slot's final state is e_mask * 16
        out = np.zeros((N_VOCAB, N_EMBD), dtype=np.float32)  # own lm head: C[j] scores 0.1 * (k - j), the rest 0
        for j, c in enumerate(cands):
            out[c, mask] = 0.1 * (top_k - j) / scale
        w.add_tensor("output.weight", out)
        prev = np.zeros((N_VOCAB, rank), dtype=np.float32)
        for t in range(N_VOCAB):
            prev[t, succ_of[t]] = 10.0
        nxt = np.zeros((N_VOCAB, rank), dtype=np.float32)
        for j, c in enumerate(cands):
            nxt[c, j] = 10.0
        hidden = np.zeros((rank, N_EMBD), dtype=np.float32)
        hidden[:, mask] = 1.0 / scale  # gate = 1 at the mask slots
        w.add_tensor("selector_predecessor.weight", prev)
        w.add_tensor("selector_successor.weight", nxt)
        w.add_tensor("selector_hidden.weight", hidden)
    _finish(w)
    return path


def dspark(
    path: Path,
    seed: int = 8,
    stdev: float = 0.5,
    rank: int = 32,
    block: int = 4,
    confidence: bool = True,
    known: list[int] | None = None,
) -> Path:
    """A DSpark drafter (DFlash + Markov head `markov_w1/w2`, optional confidence head) for hybrid_qwen35.

    Anchor-first layout (dflash.sample_from_anchor absent = true): the block is [id_last, MASK, ..]
    of n_max tokens and every slot drafts, slot i the token after it; the Markov head adds
    markov_w2 . markov_w1[prev] to slot i's logits, prev = id_last for slot 0 and the argmax of
    slot i-1 after that. With `known` = h (a table over the vocabulary): layers zero, no logits of
    its own worth a thing (it shares the target's head), and markov_w2 . markov_w1[t] = 100 e_{h[t]},
    so it drafts h[x], h[h[x]], ... after id_last x.
    """
    arch = "dflash"
    weight = _random(seed, stdev) if known is None else _zeros
    w = _writer(path, arch, "draftlight test dspark", N_FF, blocks=1)
    _dflash_common(w, arch, block, weight, known is not None)
    if known is None:
        w.add_tensor("markov_w1.weight", weight(rank, N_VOCAB))
        w.add_tensor("markov_w2.weight", weight(rank, N_VOCAB))
        if confidence:
            w.add_tensor("conf_proj.weight", weight(N_EMBD + rank, 1))
            w.add_tensor("conf_proj.bias", weight(1))
    else:
        rank = N_VOCAB
        w1 = 10.0 * np.eye(N_VOCAB, rank, dtype=np.float32)  # ggml {rank, n_vocab}: row t = 10 e_t
        w2 = np.zeros((N_VOCAB, rank), dtype=np.float32)  # ggml {rank, n_vocab}: bias[v] = w2[v] . w1[t]
        for t, v in enumerate(known):
            w2[v, t] = 10.0
        w.add_tensor("markov_w1.weight", w1)
        w.add_tensor("markov_w2.weight", w2)
    _finish(w)
    return path


def known_tables(seed: int = 3):
    """f: the target's next-token table (a random permutation without fixed points, mask token excluded);
    and drafter tables that agree with f on chosen tokens."""
    rng = np.random.default_rng(seed)
    f = [*rng.permutation(N_VOCAB - 1).tolist(), 0]  # f[127] = 0; tokens 0..126 permuted
    return f


CYCLE = [5, 9, 17, 33, 40, 64, 100, 126]


def cycle_table(cands: list[int]) -> list[int]:
    """A next-token table that enters the cycle cands[0] -> cands[1] -> .. -> cands[0] after one step."""
    f = [cands[t % len(cands)] for t in range(N_VOCAB)]
    for j, c in enumerate(cands):
        f[c] = cands[(j + 1) % len(cands)]
    return f
