"""The MLX runtime's hidden states and its MTP drafter, against mlx-vlm 0.7.10's own speculative decoding.

Our side: a tiny Qwen 3.5 folder with `mtp.*` weights (mlx_targets.py) loaded by MlxModel.load,
and the drafter engine.drafting.kinds loads for its MlxContext. The oracle: mlx-vlm's own Qwen 3.5
class on the same weights and its `_mtp_rounds`, greedy. Fast: MLX's CPU backend.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")
pytest.importorskip("mlx_vlm")

from mlx_lm.models import cohere, gemma2, qwen2  # noqa: E402
from mlx_targets import (  # noqa: E402
    N_TOKENS,
    PROMPT,
    VOCAB,
    WIDTH,
    A,
    B,
    P,
    R,
    load_target,
    oracle_target,
    plain,
    provenance,
    recording,
    reply,
    write_target,
)
from mlx_vlm.speculative.mtp import _mtp_rounds  # noqa: E402

from engine.drafting import kinds  # noqa: E402
from engine.drafting.mlx.mtp import MlxMtpDrafter, load_heads  # noqa: E402
from engine.errors import IncompatibleDrafter, RuntimeFailure  # noqa: E402
from engine.runtime.mlx import MlxContext, MlxModel  # noqa: E402


def load_mtp(ctx: MlxContext, depth: int) -> MlxMtpDrafter:
    drafter = kinds.load(kinds.MTP, ctx, None, ctx.model.options, max_depth=depth)
    assert isinstance(drafter, MlxMtpDrafter) and drafter.kind == kinds.MTP.name
    return drafter


def oracle(folder: Path, depth: int, n_tokens: int) -> tuple[list[int], list[list[int]], list[int]]:
    """mlx-vlm's greedy MTP generation: its tokens, each round's drafts, each round's accepted count."""
    lm, cache = oracle_target(folder)
    head = load_heads(folder)  # an instance of its own, beside the one our drafter loads
    drafts = recording(head)
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


@pytest.mark.parametrize("head", ["random", "copy", "noisy"])
@pytest.mark.parametrize("depth", [2, 3])
def test_mtp_drafts_and_tokens_are_mlx_vlms_own(tmp_path: Path, head: str, depth: int):
    """Round by round our drafts are mlx-vlm's, and the tokens are plain greedy decoding's. Our last
    rounds draft fewer (room for the bonus); the oracle writes past them, and rounds are compared
    while ours drafted at full depth."""
    folder = write_target(tmp_path / "qwen35", 7, head)
    target = load_target(folder)
    ours, rounds = reply(target, depth, lambda ctx: load_mtp(ctx, depth))
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
    with pytest.raises(IncompatibleDrafter, match="runs no MTP heads from a file of their own"):
        kinds.load(kinds.MTP, ctx, folder, target.options)


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
    """Cohere scales its logits after the head: its last layer is not what its logits are made of."""
    mx.random.seed(0)
    args = cohere.ModelArgs("cohere", WIDTH, 2, 128, 4, 2, vocab_size=VOCAB, logit_scale=0.5)
    ctx = MlxModel(cohere.Model(args), VOCAB, "cohere").new_context(max_rows=3)
    with pytest.raises(RuntimeFailure, match="more than its head over its last layer"):
        ctx.observe_batches(lambda *_: None)


def test_a_softcapped_models_hidden_states_give_its_own_logits():
    """Gemma 2 softcaps its logits after the head: the hidden-state decode applies the same cap."""
    mx.random.seed(0)
    args = gemma2.ModelArgs("gemma2", WIDTH, 2, 128, 4, 16, 1e-6, VOCAB, 2, final_logit_softcapping=5.0)
    module = gemma2.Model(args)
    ctx = MlxModel(module, VOCAB, "gemma2").new_context(max_rows=len(PROMPT))
    stop = ctx.observe_batches(lambda *_: None)
    rows = ctx.decode(PROMPT, all_logits=True)
    stop()
    assert float(np.abs(rows).max()) <= 5.0
    np.testing.assert_allclose(rows, np.array(module(mx.array([PROMPT]))[0]), atol=1e-5)


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
