"""Tiny Qwen 3.5 targets written as MLX folders, and mlx-vlm 0.7.10 as the oracle of drafters that read them.

Random weights; every layer full attention, so the target's KV cache trims a rejected draft. Our
side loads the folder with MlxModel.load (mlx-lm's class, which drops any `mtp.*` weights); the
oracle builds mlx-vlm's own Qwen 3.5 class on the same weights. The drafters that read them are
written here too (DFlash, DSpark, EAGLE-3), for their oracle tests and the MLX ruler's alike. Shared by
test_mlx_drafters.py (MTP heads), test_mlx_eagle3.py, test_mlx_dflash.py, test_mlx_dspark.py,
test_mlx_vlm_ruler.py and benchmarks/mlx_ruler.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import mlx.core as mx
from mlx.utils import tree_flatten
from mlx_folders import SPECIAL, write_tokenizer
from mlx_lm.models import qwen3_5 as lm_qwen3_5
from mlx_vlm.models.qwen3_5.config import ModelConfig, TextConfig
from mlx_vlm.models.qwen3_5.language import LanguageModel
from mlx_vlm.speculative.dflash import _dflash_rounds
from mlx_vlm.speculative.drafters import DFlashDraftModel, DSparkDraftModel
from mlx_vlm.speculative.drafters.dspark.config import DSparkConfig
from mlx_vlm.speculative.drafters.eagle3.config import Eagle3Config
from mlx_vlm.speculative.drafters.eagle3.eagle3 import Eagle3DraftModel
from mlx_vlm.speculative.drafters.qwen3_5_mtp import ModelConfig as HeadConfig
from mlx_vlm.speculative.drafters.qwen3_5_mtp import Qwen3_5MTPDraftModel
from mlx_vlm.speculative.drafters.qwen3_dflash import ModelConfig as DFlashConfig

from engine.depth import FixedDepth
from engine.drafting.base import Drafter
from engine.drafting.mlx.dflash import load_dflash
from engine.events import RoundEvent, TokenEvent, TokenKind
from engine.rounds import GenerationConfig, Prefill
from engine.runtime.mlx import MlxContext, MlxModel, MlxOptions
from engine.speculative import generate

VOCAB = 97
TOKENIZER_VOCAB = 300  # mlx_folders' tokenizer: its 256 bytes, its special tokens and a few merges
SILENT = ("o_proj.weight", "down_proj.weight", "out_proj.weight")  # a layer with these zero adds nothing
WIDTH = 64
PROMPT = [3, 14, 15, 92, 65, 35, 89, 79, 32, 38]
N_TOKENS = 24
DFLASH_MASK = PROMPT[-1]  # write_dflash's mask token
A, R, B, P = TokenKind.ACCEPTED, TokenKind.REPLACED, TokenKind.BONUS, TokenKind.PLAIN
TEXT_CONFIG = {
    "model_type": "qwen3_5_text",
    "hidden_size": WIDTH,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": VOCAB,
    "rms_norm_eps": 1e-6,
    # Every layer full attention: no recurrent state, so the target's cache trims a rejected draft.
    "full_attention_interval": 1,
    "linear_num_value_heads": 2,
    "linear_num_key_heads": 2,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "linear_conv_kernel_dim": 4,
    "tie_word_embeddings": False,
    "max_position_embeddings": 512,
    "rope_parameters": {
        "type": "default",
        "rope_theta": 10000.0,
        "partial_rotary_factor": 0.25,
        "mrope_section": [2, 1, 1],
    },
    "mtp_num_hidden_layers": 1,
}
CONFIG = {"model_type": "qwen3_5", "text_config": TEXT_CONFIG, "tie_word_embeddings": False}


def config(layers: int, width: int = WIDTH, vocab: int = VOCAB, interval: int = 1) -> dict:
    """The target's config.json with `layers` decoder layers `width` wide; `interval` > 1 makes every
    interval-th layer attention and the rest gated delta-net (Qwen 3.5's own layout has 4)."""
    text = {**TEXT_CONFIG, "num_hidden_layers": layers, "hidden_size": width, "intermediate_size": 2 * width}
    text |= {"vocab_size": vocab, "full_attention_interval": interval}
    return {**CONFIG, "text_config": text}


def write_target(
    folder: Path,
    seed: int,
    head: str,
    layers: int = 2,
    permuted: bool = False,
    fixed: int | None = None,
    width: int = WIDTH,
    interval: int = 1,
    tokenizer: tuple[str, ...] | None = None,
    vocab: int = TOKENIZER_VOCAB,
) -> Path:
    """A Qwen 3.5 MLX folder with an MTP head: `head` "random", "copy" (the target's layers add
    nothing, so its next token is a function of the token alone, and the head, reading only the
    token, guesses it: every draft kept), or "noisy" (the copy, its hidden-state half random).
    `permuted` (with a copy): the target's head makes that function a permutation (next_tokens),
    with `fixed` followed by itself where given. `tokenizer`: a corpus that mlx_folders' tokenizer of
    `vocab` tokens (the model's vocabulary then) is trained on, the head's rows of its special tokens
    zero (`silenced`); without one the vocabulary is VOCAB and the folder has no tokenizer."""
    vocab = vocab if tokenizer else VOCAB
    cfg = config(layers, width, vocab, interval)
    mx.random.seed(seed)
    module = lm_qwen3_5.Model(lm_qwen3_5.ModelArgs.from_dict(cfg))
    mtp = Qwen3_5MTPDraftModel(HeadConfig.from_dict({"model_type": "qwen3_5_mtp", "text_config": cfg["text_config"]}))
    weights = dict(tree_flatten(module.parameters()))
    heads = dict(tree_flatten(mtp.parameters()))
    if head != "random":
        for name in list(weights):
            if name.endswith(SILENT):
                weights[name] = mx.zeros_like(weights[name])
        for name in list(heads):
            if name.endswith(SILENT):
                heads[name] = mx.zeros_like(heads[name])
        noise = 0.25 * mx.random.normal((width, width)) / width**0.5 if head == "noisy" else mx.zeros((width, width))
        heads["fc.weight"] = mx.concatenate([mx.eye(width), noise], axis=1)
        if permuted:  # lm_head row next[t] is token t's normed embedding: its dot product is the largest
            next_of = mx.random.permutation(VOCAB).tolist()
            if fixed is not None:
                before = next_of.index(fixed)
                next_of[before], next_of[fixed] = next_of[fixed], fixed
            embed = weights["language_model.model.embed_tokens.weight"]
            weights["language_model.lm_head.weight"] = rows_for(embed, mx.array(next_of))
    weights.update({f"mtp.{k}": v for k, v in heads.items()})
    folder.mkdir(parents=True, exist_ok=True)
    if tokenizer:
        write_tokenizer(folder, vocab, tokenizer)
        weights["language_model.lm_head.weight"] = silenced(weights["language_model.lm_head.weight"])
    (folder / "config.json").write_text(json.dumps(cfg))
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})
    return folder


def drafter_layer(width: int, vocab: int) -> dict:
    """The one qwen3 layer a DFlash or DSpark drafter folder's config.json describes."""
    return {
        "model_type": "qwen3",
        "hidden_size": width,
        "intermediate_size": 2 * width,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "vocab_size": vocab,
        "max_position_embeddings": 512,
        "rope_theta": 10000.0,
    }


def write_dflash(
    folder: Path,
    seed: int,
    target_layers: tuple[int, ...] = (0, 2),
    block: int = 4,
    silent: bool = False,
    width: int = WIDTH,
    vocab: int = VOCAB,
) -> Path:
    """A DFlash drafter folder (random weights; the target's embeddings and head are borrowed) for a
    target `width` wide of `vocab` tokens. `silent`: its attention and MLP add nothing, so each mask
    slot (DFLASH_MASK) answers with the target's next token after the mask token."""
    cfg = {
        **drafter_layer(width, vocab),
        "block_size": block,
        "dflash_config": {"mask_token_id": DFLASH_MASK, "target_layer_ids": list(target_layers)},
    }
    mx.random.seed(seed)
    drafter = DFlashDraftModel(DFlashConfig.from_dict(cfg))
    weights = dict(tree_flatten(drafter.parameters()))
    if silent:
        for name in ("layers.0.self_attn.o_proj.weight", "layers.0.mlp.down_proj.weight"):
            weights[name] = mx.zeros_like(weights[name])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})
    return folder


def write_dspark(
    folder: Path,
    seed: int,
    anchor: bool = True,
    silent: bool = False,
    target_layers: int = 3,
    vocab: int = VOCAB,
    width: int = WIDTH,
    reads: tuple[int, ...] = (0, 2),
) -> Path:
    """A DSpark drafter folder (random weights, the target's embeddings and head borrowed), at a fixed
    block of 4 (the last token and three drafts), reading layers `reads` of a target of `target_layers`
    layers `width` wide. `anchor`: the last token's slot drafts too. `silent`: its attention, MLP and
    Markov head add nothing, so each slot answers with the target's head over the embedding it holds
    (DFLASH_MASK, or the last token)."""
    cfg = {
        **drafter_layer(width, vocab),
        "rms_norm_eps": 1e-6,
        "dflash_config": {
            "projector_type": "dspark",
            "mask_token_id": DFLASH_MASK,
            "target_layer_ids": list(reads),
            "num_target_layers": target_layers,
            "block_size": 3,
            "markov_rank": 8,
            "block_size_policy": "fixed",
            "sample_from_anchor": anchor,
        },
    }
    mx.random.seed(seed)
    drafter = DSparkDraftModel(DSparkConfig.from_dict(cfg))
    weights = dict(tree_flatten(drafter.parameters()))
    weights["markov_head.markov_w2.weight"] *= 8  # loud enough to change drafts the base rows would make
    if silent:
        for name in (
            "layers.0.self_attn.o_proj.weight",
            "layers.0.mlp.down_proj.weight",
            "markov_head.markov_w2.weight",
        ):
            weights[name] = mx.zeros_like(weights[name])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})
    return folder


def write_eagle3(
    folder: Path,
    seed: int,
    draft_vocab: int | None = None,
    target_layers: tuple[int, ...] = (1, 2, 3),
    guesses: tuple[list[int], mx.array] | None = None,
    width: int = WIDTH,
    vocab: int = VOCAB,
) -> Path:
    """An EAGLE-3 drafter folder (random weights) for a target `width` wide of `vocab` tokens; with
    `draft_vocab` below `vocab`, its tokens map to a random subset of the target's by d2t. With
    `guesses` (the token two on from each token, for a permuted copy target, and the target's
    embeddings) its fc passes the first layer read through (the target's embedding of the token
    before), its MLP adds nothing, its attention noise, and its head guesses from that embedding: the
    first draft is kept, and the others hang on the drafter's cache."""
    draft_vocab = vocab if draft_vocab is None else draft_vocab
    cfg = {
        "model_type": "eagle3",
        "transformer_layer_config": {
            "model_type": "llama",
            "hidden_size": width,
            "intermediate_size": 2 * width,
            "num_hidden_layers": 1,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "vocab_size": vocab,
            "max_position_embeddings": 512,
        },
        "draft_vocab_size": draft_vocab,
        "target_hidden_size": width,
        "target_layer_ids": list(target_layers),
        "block_size": 4,
    }
    mx.random.seed(seed)
    drafter = Eagle3DraftModel(Eagle3Config.from_dict(cfg))
    weights = dict(tree_flatten(drafter.parameters()))
    if guesses is not None:
        zeros = mx.zeros((width, width))
        weights["fc.weight"] = mx.concatenate([mx.eye(width), zeros, zeros], axis=1)
        weights["layers.0.mlp.down_proj.weight"] = mx.zeros_like(weights["layers.0.mlp.down_proj.weight"])
        weights["layers.0.self_attn.o_proj.weight"] *= 2.0
        weights["lm_head.weight"] = rows_for(guesses[1], mx.array(guesses[0]))
    if draft_vocab != vocab:
        hot = mx.sort(mx.random.permutation(vocab)[:draft_vocab])
        weights["d2t"] = (hot - mx.arange(draft_vocab)).astype(mx.int32)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})
    return folder


def silenced(head: mx.array) -> mx.array:
    """The head with the special tokens' rows zero: their logit is 0 where the largest of a random
    row is above it, so greedy decoding never ends a run of fixed length, in any loop (mlx-vlm's
    greedy rounds take the argmax of the whole vocabulary, and no sampler bans an id there)."""
    keep = mx.arange(head.shape[0]) >= len(SPECIAL)  # write_tokenizer puts the special tokens first
    return head * keep[:, None].astype(head.dtype)


def rows_for(embed: mx.array, next_of: mx.array) -> mx.array:
    """A head whose row next_of[t] is token t's embedding, RMS-normed: over a normed embedding its
    argmax is next_of[t] (every normed row is as long, and the row itself points the same way)."""
    normed = embed / mx.sqrt(mx.mean(embed * embed, axis=-1, keepdims=True))
    return normed[mx.argsort(next_of)]


def next_tokens(folder: Path) -> list[int]:
    """A permuted copy target's next token after each token (write_target)."""
    saved = mx.load(str(folder / "model.safetensors"))
    embed = saved["language_model.model.embed_tokens.weight"]
    normed = embed / mx.sqrt(mx.mean(embed * embed, axis=-1, keepdims=True))
    return mx.argmax(normed @ saved["language_model.lm_head.weight"].T, axis=-1).tolist()


def load_target(folder: Path, options: MlxOptions | None = None) -> MlxModel:
    model = MlxModel.load(folder, options or MlxOptions())
    # mlx-lm 0.32.2 builds a mask for a recurrent layer that an all-attention Qwen 3.5 lacks.
    model.module.language_model.model.ssm_idx = None
    return model


class _AllAttention(list):
    """mlx-vlm's prompt cache for an all-attention Qwen 3.5: it asks for its (absent) recurrent layer's cache."""

    def __getitem__(self, i):  # type: ignore[override]
        return None if i is None else super().__getitem__(i)


def oracle_target(folder: Path) -> tuple[LanguageModel, list]:
    """mlx-vlm's own Qwen 3.5 on the folder's weights, and a prompt cache for it."""
    cfg = json.loads((folder / "config.json").read_text())
    lm = LanguageModel(
        TextConfig.from_dict(cfg["text_config"]),
        ModelConfig.from_dict({**cfg, "vision_config": {}, "vocab_size": cfg["text_config"]["vocab_size"]}),
    )
    saved = mx.load(str(folder / "model.safetensors"))
    lm.load_weights([(k.removeprefix("language_model."), v) for k, v in saved.items() if not k.startswith("mtp.")])
    lm.model.ssm_idx = None
    return lm, _AllAttention(lm.make_cache())


def dflash_oracle(
    target: Path, folder: Path, depth: int | None, n_tokens: int, oracle: Callable[[Path], tuple] | None = None
) -> tuple[list[int], list[list[int]], list[int]]:
    """mlx-vlm's greedy DFlash (or DSpark) generation: its tokens, each round's drafts, each round's
    accepted count; on its own Qwen 3.5 (oracle_target), or the model and cache `oracle` makes. Depth
    None: no block asked for, so mlx-vlm drafts the block the folder's config gives."""
    lm, cache = (oracle or oracle_target)(target)
    drafter = load_dflash(folder)  # an instance of its own, beside the one our drafter loads
    drafts = recording(drafter, "draft_block_greedy")
    prompt = mx.array([PROMPT], dtype=mx.int32)
    out = lm(prompt, cache=cache, capture_layer_ids=list(drafter.config.target_layer_ids))
    bonus = int(mx.argmax(out.logits[0, -1]).item())
    rounds = _dflash_rounds(
        lm,
        drafter,
        cache,
        mx.concatenate(out.hidden_states, axis=-1),
        first_bonus=bonus,
        max_tokens=n_tokens,
        sampler=lambda x: mx.argmax(x, axis=-1),
        draft_block_size=None if depth is None else depth + 1,
        token_dtype=mx.int32,
        greedy_sampling=True,
    )
    written = [bonus, *(t for t, _ in rounds)]
    return written, drafts, list(drafter.accept_lens)


def recording(drafter, method: str = "draft_block") -> list[list[int]]:
    """Each round's drafts, as mlx-vlm's drafter module hands them to its round loop (through `method`)."""
    drafts: list[list[int]] = []
    draft_block = getattr(drafter, method)

    def recorded(*args, **kwargs):
        out = draft_block(*args, **kwargs)
        drafts.append(out.reshape(-1).tolist())
        return out

    setattr(drafter, method, recorded)
    return drafts


def reply(
    target: MlxModel, depth: int, load: Callable[[MlxContext], Drafter], n_tokens: int = N_TOKENS
) -> tuple[list[TokenEvent], list[RoundEvent]]:
    """Our reply: the drafter `load` makes on the target's MlxContext, then the round's loop."""
    ctx = target.new_context(max_rows=depth + 1)
    drafter = load(ctx)
    first_row, prefilled = ctx.prefill(PROMPT)
    drafter.prefill(PROMPT)
    cfg = GenerationConfig(max_tokens=n_tokens, depth=depth)
    events = list(
        generate(ctx, drafter, FixedDepth(depth), list(PROMPT), cfg, prefill=Prefill(prefilled, 0.0, first_row))
    )
    toks = [e for e in events if isinstance(e, TokenEvent)]
    assert ctx.tokens == [*PROMPT, *[t.token_id for t in toks]][:-1]  # rewound to what was kept
    drafter.close()
    return toks, [e for e in events if isinstance(e, RoundEvent)]


def plain(target: MlxModel, n_tokens: int) -> list[int]:
    """Greedy decoding one token at a time on the target alone."""
    ctx = target.new_context()
    row, _ = ctx.prefill(PROMPT)
    out = [int(row.argmax())]
    while len(out) < n_tokens:
        out.append(int(ctx.decode([out[-1]], all_logits=False)[-1].argmax()))
    return out


def provenance(accepted: list[int], drafts: list[list[int]]) -> list[TokenKind]:
    """What the oracle's rounds say each token was: kept drafts, then a correction or the bonus."""
    kinds_ = [P]
    for a, d in zip(accepted, drafts):
        kinds_ += [A] * a + [B if a == len(d) else R]
    return kinds_
