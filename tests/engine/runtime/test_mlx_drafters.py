"""Drafters that read an MLX target's hidden states, against mlx-vlm 0.7.10's own speculative decoding.

A tiny Qwen 3.5 with an MTP head is written as an MLX folder here (random weights; every layer
full attention, so its KV cache trims). Our side: MlxModel.load (mlx-lm's model class, which drops
the head) and the drafter that engine.drafting.kinds loads for an MlxContext. The oracle: mlx-vlm's
own Qwen 3.5 class on the same weights and its `_mtp_rounds`, greedy. Fast: MLX's CPU backend.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")
pytest.importorskip("mlx_vlm")

from mlx.utils import tree_flatten  # noqa: E402
from mlx_lm.models import gemma2, qwen2  # noqa: E402
from mlx_lm.models import qwen3_5 as lm_qwen3_5  # noqa: E402
from mlx_vlm.models.qwen3_5.config import ModelConfig, TextConfig  # noqa: E402
from mlx_vlm.models.qwen3_5.language import LanguageModel  # noqa: E402
from mlx_vlm.speculative.drafters.qwen3_5_mtp import ModelConfig as HeadConfig  # noqa: E402
from mlx_vlm.speculative.drafters.qwen3_5_mtp import Qwen3_5MTPDraftModel  # noqa: E402
from mlx_vlm.speculative.mtp import _mtp_rounds  # noqa: E402

from engine.depth import FixedDepth  # noqa: E402
from engine.drafting import kinds  # noqa: E402
from engine.errors import IncompatibleDrafter, RuntimeFailure  # noqa: E402
from engine.events import RoundEvent, TokenEvent, TokenKind  # noqa: E402
from engine.rounds import GenerationConfig, Prefill  # noqa: E402
from engine.runtime.mlx import MlxModel, MlxOptions  # noqa: E402
from engine.runtime.mlx.drafters.mtp import MlxMtpDrafter, load_heads  # noqa: E402
from engine.speculative import generate  # noqa: E402

VOCAB = 97
WIDTH = 64
PROMPT = [3, 14, 15, 92, 65, 35, 89, 79, 32, 38]
N_TOKENS = 24
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


def write_target(folder: Path, seed: int, head: str) -> Path:
    """A Qwen 3.5 MLX folder with an MTP head: `head` "random", "copy" (the target's layers add
    nothing, so its next token is a function of the token alone, and the head, reading only the
    token, guesses it: every draft kept), or "noisy" (the copy, its hidden-state half random)."""
    mx.random.seed(seed)
    module = lm_qwen3_5.Model(lm_qwen3_5.ModelArgs.from_dict(CONFIG))
    mtp = Qwen3_5MTPDraftModel(HeadConfig.from_dict({"model_type": "qwen3_5_mtp", "text_config": TEXT_CONFIG}))
    weights = dict(tree_flatten(module.parameters()))
    heads = dict(tree_flatten(mtp.parameters()))
    if head != "random":
        for name in list(weights):
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                weights[name] = mx.zeros_like(weights[name])
        for name in list(heads):
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                heads[name] = mx.zeros_like(heads[name])
        noise = 0.25 * mx.random.normal((WIDTH, WIDTH)) / WIDTH**0.5 if head == "noisy" else mx.zeros((WIDTH, WIDTH))
        heads["fc.weight"] = mx.concatenate([mx.eye(WIDTH), noise], axis=1)
    weights.update({f"mtp.{k}": v for k, v in heads.items()})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(CONFIG))
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})
    return folder


def load_target(folder: Path) -> MlxModel:
    model = MlxModel.load(folder, MlxOptions())
    # mlx-lm 0.32.2 builds a mask for a recurrent layer that an all-attention Qwen 3.5 lacks.
    model.module.language_model.model.ssm_idx = None
    return model


class _AllAttention(list):
    """mlx-vlm's prompt cache for an all-attention Qwen 3.5: it asks for its (absent) recurrent layer's cache."""

    def __getitem__(self, i):  # type: ignore[override]
        return None if i is None else super().__getitem__(i)


def oracle(folder: Path, depth: int, n_tokens: int) -> tuple[list[int], list[list[int]], list[int]]:
    """mlx-vlm's greedy MTP generation: its tokens, each round's drafts, each round's accepted count."""
    text = TextConfig.from_dict(TEXT_CONFIG)
    lm = LanguageModel(text, ModelConfig.from_dict({**CONFIG, "vision_config": {}, "vocab_size": VOCAB}))
    saved = mx.load(str(folder / "model.safetensors"))
    lm.load_weights([(k.removeprefix("language_model."), v) for k, v in saved.items() if not k.startswith("mtp.")])
    lm.model.ssm_idx = None
    head = load_heads(folder)  # an instance of its own, beside the one our drafter loads
    drafts: list[list[int]] = []
    draft_block = head.draft_block

    def recorded(*args, **kwargs):
        out = draft_block(*args, **kwargs)
        drafts.append(out.reshape(-1).tolist())
        return out

    head.draft_block = recorded
    cache = _AllAttention(lm.make_cache())
    prompt = mx.array([PROMPT], dtype=mx.int32)
    out = lm(prompt, cache=cache, return_hidden=True, return_shared_kv=True)
    bonus = int(mx.argmax(out.logits[0, -1]).item())
    rounds = _mtp_rounds(
        lm,
        head,
        cache,
        out.hidden_states[-1],
        out.shared_kv_states,
        prompt_tokens=prompt,
        first_bonus=bonus,
        max_tokens=n_tokens,
        sampler=lambda x: mx.argmax(x, axis=-1),
        draft_block_size=depth + 1,
        token_dtype=mx.int32,
        greedy_sampling=True,
    )
    written = [bonus, *(t for t, _ in rounds)]
    return written, drafts, list(head.accept_lens)


def reply(target: MlxModel, depth: int, n_tokens: int = N_TOKENS) -> tuple[list[TokenEvent], list[RoundEvent]]:
    """Our reply: the MTP drafter kinds.py loads for the target's MlxContext, then the round's loop."""
    ctx = target.new_context(max_rows=depth + 1)
    drafter = kinds.load(kinds.MTP, ctx, None, target.options, max_depth=depth)
    assert isinstance(drafter, MlxMtpDrafter) and drafter.kind == kinds.MTP.name
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


@pytest.mark.parametrize("head", ["random", "copy", "noisy"])
@pytest.mark.parametrize("depth", [2, 3])
def test_mtp_drafts_and_tokens_are_mlx_vlms_own(tmp_path: Path, head: str, depth: int):
    """Round by round our drafts are mlx-vlm's, and the tokens are plain greedy decoding's. Our last
    rounds draft fewer (room for the bonus); the oracle writes past them, and rounds are compared
    while ours drafted at full depth."""
    folder = write_target(tmp_path / "qwen35", 7, head)
    target = load_target(folder)
    ours, rounds = reply(target, depth)
    theirs, their_drafts, their_accepted = oracle(folder, depth, N_TOKENS + 2 * depth)
    written = [e.token_id for e in ours]
    assert written == theirs[:N_TOKENS] == plain(target, N_TOKENS)
    full = [r for r in rounds[1:] if r.depth == depth and r.drafted == depth]
    assert len(full) >= 4
    assert [list(r.draft_tokens) for r in rounds[1 : 1 + len(full)]] == their_drafts[: len(full)]
    assert [r.accepted for r in rounds[1 : 1 + len(full)]] == their_accepted[: len(full)]
    expected = provenance(their_accepted[: len(full)], their_drafts[: len(full)])
    assert [e.kind for e in ours[: len(expected)]] == expected
    if head == "copy":  # every draft kept, then the bonus, every round
        assert expected == [P, *([A] * depth + [B]) * len(full)]
    elif head == "noisy":  # some kept, some refused: the walk is tested both ways
        assert A in expected and R in expected


def test_a_target_without_an_mtp_head_is_refused_in_a_sentence(tmp_path: Path):
    folder = write_target(tmp_path / "qwen35", 3, "random")
    saved = mx.load(str(folder / "model.safetensors"))
    mx.save_safetensors(
        str(folder / "model.safetensors"),
        {k: v for k, v in saved.items() if not k.startswith("mtp.")},
        metadata={"format": "mlx"},
    )
    target = load_target(folder)
    ctx = target.new_context(max_rows=3)
    with pytest.raises(IncompatibleDrafter, match="has no MTP head"):
        kinds.load(kinds.MTP, ctx, None, target.options)


def test_hidden_states_are_the_last_layer_normed_for_every_batch(tmp_path: Path):
    """What observe_batches hands over: each batch's tokens, first position and last layer (normed),
    as mlx-vlm's Qwen 3.5 returns them with return_hidden; a paused context tells nobody."""
    target = load_target(write_target(tmp_path / "qwen35", 5, "random"))
    ctx = target.new_context(max_rows=4)
    seen: list[tuple[list[int], int, np.ndarray]] = []
    stop = ctx.observe_batches(lambda t, s, h: seen.append((t, s, h)))
    ctx.prefill(PROMPT)
    ctx.decode([5, 6, 7], all_logits=True)
    with ctx.observers_paused():
        ctx.decode([8], all_logits=False)
    stop()
    ctx.decode([9], all_logits=False)
    assert [(t, s) for t, s, _ in seen] == [(PROMPT, 0), ([5, 6, 7], len(PROMPT))]
    inner = target.module.language_model.model
    whole = inner(mx.array([[*PROMPT, 5, 6, 7]]))[0]
    hidden = np.concatenate([h for _, _, h in seen])
    assert hidden.shape == (len(PROMPT) + 3, WIDTH)
    np.testing.assert_allclose(hidden, np.array(whole), atol=1e-5)


def test_a_model_whose_logits_are_more_than_its_head_is_refused_in_a_sentence():
    """Gemma 2 softcaps its logits after the head: its last layer is not what its logits are made of."""
    mx.random.seed(0)
    args = gemma2.ModelArgs("gemma2", WIDTH, 2, 128, 4, 16, 1e-6, VOCAB, 2, final_logit_softcapping=5.0)
    ctx = MlxModel(gemma2.Model(args), VOCAB, "gemma2").new_context(max_rows=3)
    with pytest.raises(RuntimeFailure, match="more than its head over its last layer"):
        ctx.observe_batches(lambda *_: None)


def test_a_tapped_layer_hands_out_its_output_and_is_untapped_after():
    """A layer a drafter asks for (EAGLE-3's, DFlash's) records what it returns in each batch; once no
    one asks, its class is its own again and the decode is mlx-lm's plain call."""
    mx.random.seed(1)
    args = qwen2.ModelArgs("qwen2", WIDTH, 3, 128, 4, 1e-6, VOCAB, 2, max_position_embeddings=512)
    module = qwen2.Model(args)
    ctx = MlxModel(module, VOCAB, "qwen2").new_context(max_rows=len(PROMPT))
    layer_class = type(module.model.layers[1])
    outputs: list[np.ndarray] = []
    stop = ctx.observe_batches(lambda t, s, h: outputs.append(np.array(ctx.observers.layer_out[1][0])))
    untap = ctx.observers.tap_layers([1])
    rows = ctx.decode(PROMPT, all_logits=True)
    h = module.model.embed_tokens(mx.array([PROMPT]))
    mask = "causal"
    for layer in module.model.layers[:2]:
        h = layer(h, mask, None)
    np.testing.assert_allclose(outputs[0], np.array(h[0]), atol=1e-5)
    np.testing.assert_allclose(rows, np.array(module(mx.array([PROMPT]))[0]), atol=1e-5)
    untap()
    stop()
    assert type(module.model.layers[1]) is layer_class and not ctx.observers.listening
