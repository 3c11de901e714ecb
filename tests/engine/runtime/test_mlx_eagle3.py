"""EAGLE-3 on the MLX runtime, against mlx-vlm 0.7.10's own EAGLE-3 generation (`_eagle3_rounds`).

A tiny EAGLE-3 drafter (mlx-vlm's Eagle3DraftModel, random weights: mlx_targets.write_eagle3) is
written as its own MLX folder beside a tiny Qwen 3.5 target (mlx_targets.py); engine.drafting.kinds
loads it for the target's MlxContext. The oracle runs mlx-vlm's own Qwen 3.5 on the same weights. Fast.
"""

from __future__ import annotations

from pathlib import Path

import pytest

mx = pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")
pytest.importorskip("mlx_vlm")

from mlx_targets import (  # noqa: E402
    N_TOKENS,
    PROMPT,
    VOCAB,
    load_target,
    next_tokens,
    oracle_target,
    plain,
    provenance,
    recording,
    reply,
    write_eagle3,
    write_target,
)
from mlx_vlm.speculative.eagle3 import _eagle3_rounds  # noqa: E402

from engine.drafting import kinds  # noqa: E402
from engine.drafting.mlx.eagle3 import MlxEagle3Drafter, load_eagle3  # noqa: E402
from engine.errors import IncompatibleDrafter, RuntimeFailure  # noqa: E402
from engine.runtime.mlx import MlxContext  # noqa: E402

LAYERS = 4  # the target's: EAGLE-3 reads the inputs of its layers 1, 2 and 3
DRAFT_VOCAB = 40  # a drafter vocabulary of its own, mapped into the target's by d2t


def load(ctx: MlxContext, folder: Path, depth: int) -> MlxEagle3Drafter:
    drafter = kinds.load(kinds.EAGLE3, ctx, folder, ctx.model.options, max_depth=depth)
    assert isinstance(drafter, MlxEagle3Drafter) and drafter.kind == kinds.EAGLE3.name
    return drafter


def oracle(target: Path, folder: Path, depth: int, n_tokens: int) -> tuple[list[int], list[list[int]], list[int]]:
    """mlx-vlm's greedy EAGLE-3 generation: its tokens, each round's drafts, each round's accepted count."""
    lm, cache = oracle_target(target)
    drafter = load_eagle3(folder)  # an instance of its own, beside the one our drafter loads
    drafts = recording(drafter)
    prompt = mx.array([PROMPT], dtype=mx.int32)
    out = lm(prompt, cache=cache, capture_layer_ids=list(drafter.config.capture_layer_ids))
    bonus = int(mx.argmax(out.logits[0, -1]).item())
    rounds = _eagle3_rounds(
        lm,
        drafter,
        cache,
        mx.concatenate(out.hidden_states, axis=-1),
        prompt_tokens=prompt,
        first_bonus=bonus,
        max_tokens=n_tokens,
        sampler=lambda x: mx.argmax(x, axis=-1),
        draft_block_size=depth + 1,
        token_dtype=mx.int32,
        greedy_sampling=True,
    )
    written = [bonus, *(t for t, _ in rounds)]
    return written, drafts, list(drafter.accept_lens)


@pytest.mark.parametrize("draft_vocab", [VOCAB, DRAFT_VOCAB])
@pytest.mark.parametrize("depth", [2, 3])
def test_eagle3_drafts_and_tokens_are_mlx_vlms_own(tmp_path: Path, draft_vocab: int, depth: int):
    """Round by round our drafts and accepted counts are mlx-vlm's, while ours drafted at full depth,
    and the tokens are plain greedy decoding's."""
    target_folder = write_target(tmp_path / "qwen35", 11, "random", layers=LAYERS)
    folder = write_eagle3(tmp_path / "eagle3", 12, draft_vocab)
    target = load_target(target_folder)
    ours, rounds = reply(target, depth, lambda ctx: load(ctx, folder, depth))
    theirs, their_drafts, their_accepted = oracle(target_folder, folder, depth, N_TOKENS + 2 * depth)
    assert [e.token_id for e in ours] == theirs[:N_TOKENS] == plain(target, N_TOKENS)
    full = [r for r in rounds[1:] if r.depth == depth and r.drafted == depth]
    assert len(full) >= 4
    assert [list(r.draft_tokens) for r in rounds[1 : 1 + len(full)]] == their_drafts[: len(full)]
    assert [r.accepted for r in rounds[1 : 1 + len(full)]] == their_accepted[: len(full)]
    expected = provenance(their_accepted[: len(full)], their_drafts[: len(full)])
    assert [e.kind for e in ours[: len(expected)]] == expected
    if draft_vocab != VOCAB:  # every draft is one of the tokens the drafter's vocabulary maps to
        hot = set((mx.arange(draft_vocab) + mx.load(str(folder / "model.safetensors"))["d2t"]).tolist())
        assert {t for r in rounds for t in r.draft_tokens} <= hot


@pytest.mark.parametrize("depth", [2, 3])
def test_eagle3_that_guesses_its_first_draft_matches_mlx_vlm_where_its_cache_matters(tmp_path: Path, depth: int):
    """Drafts the target keeps, and others it refuses: after each round mlx-vlm feeds the kept drafts
    again with the target's states, and so do we."""
    target_folder = write_target(tmp_path / "qwen35", 5, "copy", layers=LAYERS, permuted=True)
    after = next_tokens(target_folder)
    embed = mx.load(str(target_folder / "model.safetensors"))["language_model.model.embed_tokens.weight"]
    folder = write_eagle3(tmp_path / "eagle3", 6, guesses=([after[after[t]] for t in range(VOCAB)], embed))
    target = load_target(target_folder)
    ours, rounds = reply(target, depth, lambda ctx: load(ctx, folder, depth))
    theirs, their_drafts, their_accepted = oracle(target_folder, folder, depth, N_TOKENS + 2 * depth)
    assert [e.token_id for e in ours] == theirs[:N_TOKENS] == plain(target, N_TOKENS)
    full = [r for r in rounds[1:] if r.depth == depth and r.drafted == depth]
    assert [list(r.draft_tokens) for r in rounds[1 : 1 + len(full)]] == their_drafts[: len(full)]
    assert [r.accepted for r in rounds[1 : 1 + len(full)]] == their_accepted[: len(full)]
    assert [e.kind for e in ours[: 1 + sum(their_accepted[: len(full)]) + len(full)]] == provenance(
        their_accepted[: len(full)], their_drafts[: len(full)]
    )
    assert min(their_accepted[: len(full)]) >= 1 and max(their_accepted[: len(full)]) < depth


def test_eagle3_untaps_the_targets_layers_when_closed(tmp_path: Path):
    target = load_target(write_target(tmp_path / "qwen35", 11, "random", layers=LAYERS))
    ctx = target.new_context(max_rows=3)
    layers = target.module.language_model.model.layers
    own = [type(layer) for layer in layers]
    drafter = load(ctx, write_eagle3(tmp_path / "eagle3", 12), 2)
    assert [type(layer) is cls for layer, cls in zip(layers, own)] == [False, False, False, True]
    drafter.close()
    assert [type(layer) for layer in layers] == own


def test_an_eagle3_drafter_for_another_target_is_refused_in_a_sentence(tmp_path: Path):
    target = load_target(write_target(tmp_path / "qwen35", 11, "random", layers=2))
    ctx = target.new_context(max_rows=3)
    with pytest.raises(RuntimeFailure, match="has 2 layers"):
        load(ctx, write_eagle3(tmp_path / "eagle3", 12), 2)  # reads the inputs of layers 1-3
    with pytest.raises(IncompatibleDrafter, match="not an EAGLE-3 drafter's folder"):
        load(ctx, tmp_path / "nowhere", 2)
