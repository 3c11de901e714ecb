"""DFlash on the MLX runtime, against mlx-vlm 0.7.10's own DFlash generation (`_dflash_rounds`).

A tiny DFlash drafter (mlx-vlm's DFlashDraftModel, random weights) is written as its own MLX folder
beside a tiny Qwen 3.5 target (mlx_targets.py); engine.drafting.kinds loads it for the target's
MlxContext. The oracle runs mlx-vlm's own Qwen 3.5 on the same weights. Fast.
"""

from __future__ import annotations

from pathlib import Path

import pytest

mx = pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")
pytest.importorskip("mlx_vlm")

from mlx_targets import (  # noqa: E402
    DFLASH_MASK,
    N_TOKENS,
    A,
    B,
    dflash_oracle,
    load_target,
    plain,
    provenance,
    reply,
    write_dflash,
    write_target,
)

from engine.drafting import kinds  # noqa: E402
from engine.drafting.mlx.dflash import MlxDflashDrafter  # noqa: E402
from engine.errors import IncompatibleDrafter, RuntimeFailure  # noqa: E402
from engine.events import TokenKind  # noqa: E402
from engine.runtime.mlx import MlxContext  # noqa: E402

LAYERS = 3
MASK = DFLASH_MASK  # the known-by-construction variant's target writes it after itself


def load(ctx: MlxContext, folder: Path, depth: int) -> MlxDflashDrafter:
    drafter = kinds.load(kinds.DFLASH, ctx, folder, ctx.model.options, max_depth=depth)
    assert isinstance(drafter, MlxDflashDrafter) and drafter.kind == kinds.DFLASH.name
    return drafter


@pytest.mark.parametrize("seed", [21, 22])
@pytest.mark.parametrize("depth", [2, 3])
def test_dflash_drafts_and_tokens_are_mlx_vlms_own(tmp_path: Path, seed: int, depth: int):
    """Round by round our blocks of drafts and accepted counts are mlx-vlm's, while ours drafted at full
    depth, and the tokens are plain greedy decoding's."""
    target_folder = write_target(tmp_path / "qwen35", seed, "random", layers=LAYERS)
    folder = write_dflash(tmp_path / "dflash", seed + 100)
    target = load_target(target_folder)
    ours, rounds = reply(target, depth, lambda ctx: load(ctx, folder, depth))
    theirs, their_drafts, their_accepted = dflash_oracle(target_folder, folder, depth, N_TOKENS + 2 * depth)
    assert [e.token_id for e in ours] == theirs[:N_TOKENS] == plain(target, N_TOKENS)
    full = [r for r in rounds[1:] if r.depth == depth and r.drafted == depth]
    assert len(full) >= 4
    assert [list(r.draft_tokens) for r in rounds[1 : 1 + len(full)]] == their_drafts[: len(full)]
    assert [r.accepted for r in rounds[1 : 1 + len(full)]] == their_accepted[: len(full)]
    expected = provenance(their_accepted[: len(full)], their_drafts[: len(full)])
    assert [e.kind for e in ours[: len(expected)]] == expected


@pytest.mark.parametrize("depth", [2, 3])
def test_a_dflash_drafter_that_answers_the_targets_own_token_has_every_draft_kept(tmp_path: Path, depth: int):
    """The target writes MASK after MASK (a copy target whose next token is a permutation with MASK
    fixed), and the prompt ends with MASK; the drafter's slots, adding nothing to MASK's embedding,
    answer with the target's head over it: MASK. Every draft is kept, then the bonus, as mlx-vlm's."""
    target_folder = write_target(tmp_path / "qwen35", 31, "copy", layers=LAYERS, permuted=True, fixed=MASK)
    folder = write_dflash(tmp_path / "dflash", 131, silent=True)
    target = load_target(target_folder)
    ours, rounds = reply(target, depth, lambda ctx: load(ctx, folder, depth))
    theirs, their_drafts, their_accepted = dflash_oracle(target_folder, folder, depth, N_TOKENS + 2 * depth)
    assert [e.token_id for e in ours] == theirs[:N_TOKENS] == [MASK] * N_TOKENS
    full = [r for r in rounds[1:] if r.depth == depth and r.drafted == depth]
    assert [list(r.draft_tokens) for r in full] == their_drafts[: len(full)] == [[MASK] * depth] * len(full)
    assert their_accepted[: len(full)] == [depth] * len(full)
    assert [e.kind for e in ours[: 1 + len(full) * (depth + 1)]] == [TokenKind.PLAIN, *([A] * depth + [B]) * len(full)]


def test_dflash_draws_no_deeper_than_its_block_and_untaps_when_closed(tmp_path: Path):
    target = load_target(write_target(tmp_path / "qwen35", 21, "random", layers=LAYERS))
    ctx = target.new_context(max_rows=8)
    layers = target.module.language_model.model.layers
    own = [type(layer) for layer in layers]
    drafter = load(ctx, write_dflash(tmp_path / "dflash", 121, block=4), 7)
    assert drafter.max_depth == 3  # a block of 4: the last token and three masks
    assert [type(layer) is cls for layer, cls in zip(layers, own)] == [False, True, False]
    drafter.close()
    assert [type(layer) for layer in layers] == own


def test_a_dflash_drafter_for_another_target_is_refused_in_a_sentence(tmp_path: Path):
    target = load_target(write_target(tmp_path / "qwen35", 21, "random", layers=2))
    ctx = target.new_context(max_rows=3)
    with pytest.raises(RuntimeFailure, match="has 2 layers"):
        load(ctx, write_dflash(tmp_path / "dflash", 121, target_layers=(0, 2)), 2)
    with pytest.raises(IncompatibleDrafter, match="not a DFlash drafter's folder"):
        load(ctx, tmp_path / "nowhere", 2)
