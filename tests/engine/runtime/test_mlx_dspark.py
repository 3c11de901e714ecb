"""DSpark (DFlash with a Markov head) on the MLX runtime, against mlx-vlm 0.7.10's own DSpark generation.

A tiny DSpark drafter (mlx-vlm's DSparkDraftModel, random weights: mlx_targets.write_dspark) is written
as its own MLX folder beside a tiny Qwen 3.5 target (mlx_targets.py); engine.drafting.kinds loads it
for the target's MlxContext. The oracle is mlx-vlm's `_dflash_rounds`, the loop it runs DSpark with,
on its own Qwen 3.5 over the same weights. Fast.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

mx = pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")
pytest.importorskip("mlx_vlm")

from gemma4_targets import TARGET as GEMMA4  # noqa: E402
from gemma4_targets import oracle_gemma4, write_gemma4  # noqa: E402
from mlx.utils import tree_flatten  # noqa: E402
from mlx_targets import (  # noqa: E402
    DFLASH_MASK,
    N_TOKENS,
    A,
    B,
    P,
    R,
    dflash_oracle,
    load_target,
    plain,
    provenance,
    reply,
    write_dspark,
    write_target,
)
from mlx_vlm.speculative.drafters.gemma4_dspark import Gemma4DsparkConfig, Gemma4DSparkDraftModel  # noqa: E402

from engine.drafting import kinds  # noqa: E402
from engine.drafting.mlx.dflash import MlxDflashDrafter  # noqa: E402
from engine.errors import IncompatibleDrafter  # noqa: E402
from engine.runtime.mlx import MlxContext, MlxModel, MlxOptions  # noqa: E402

LAYERS = 3
MASK = DFLASH_MASK  # write_dspark's; the known-by-construction variant's target writes it after itself


def load(ctx: MlxContext, folder: Path, depth: int) -> MlxDflashDrafter:
    drafter = kinds.load(kinds.DSPARK, ctx, folder, ctx.model.options, max_depth=depth)
    assert isinstance(drafter, MlxDflashDrafter) and drafter.kind == kinds.DSPARK.name
    return drafter


@pytest.mark.parametrize("anchor", [True, False])
@pytest.mark.parametrize("seed", [41, 42])
@pytest.mark.parametrize("depth", [2, 3])
def test_dspark_drafts_and_tokens_are_mlx_vlms_own(tmp_path: Path, anchor: bool, seed: int, depth: int):
    """Round by round our drafts and accepted counts are mlx-vlm's while ours drafted at full depth, and
    the tokens are plain greedy decoding's."""
    target_folder = write_target(tmp_path / "qwen35", seed, "random", layers=LAYERS)
    folder = write_dspark(tmp_path / "dspark", seed + 100, anchor=anchor)
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


@pytest.mark.parametrize("anchor", [True, False])
def test_asked_past_its_block_dspark_drafts_what_mlx_vlm_drafts_at_the_folders_own_block(tmp_path: Path, anchor: bool):
    """Asked for 4, a DSpark folder whose block holds 3 drafts (its config's block_size 3: mlx-vlm's
    proposal_length) drafts 3 a round, as mlx-vlm drafts it at the folder's own block and llama.cpp
    clamps it: round by round the same drafts and accepted counts, and plain decoding's tokens."""
    target_folder = write_target(tmp_path / "qwen35", 41, "random", layers=LAYERS)
    folder = write_dspark(tmp_path / "dspark", 141, anchor=anchor)
    target = load_target(target_folder)
    ours, rounds = reply(target, 4, lambda ctx: load(ctx, folder, 4))
    theirs, their_drafts, their_accepted = dflash_oracle(target_folder, folder, None, N_TOKENS + 6)
    assert [e.token_id for e in ours] == theirs[:N_TOKENS] == plain(target, N_TOKENS)
    assert max(r.drafted for r in rounds) == max(len(d) for d in their_drafts) == 3
    full = [r for r in rounds[1:] if r.drafted == 3]
    assert len(full) >= 4 and rounds[1 : 1 + len(full)] == full
    assert [list(r.draft_tokens) for r in full] == their_drafts[: len(full)]
    assert [r.accepted for r in full] == their_accepted[: len(full)]


def test_the_markov_head_changes_the_drafts(tmp_path: Path):
    """The same drafter with its Markov head silenced drafts otherwise: the head's word is in the rows."""
    target = load_target(write_target(tmp_path / "qwen35", 41, "random", layers=LAYERS))
    loud = write_dspark(tmp_path / "loud", 141)
    quiet = tmp_path / "quiet"
    quiet.mkdir()
    (quiet / "config.json").write_text((loud / "config.json").read_text())
    saved = mx.load(str(loud / "model.safetensors"))
    saved["markov_head.markov_w2.weight"] = mx.zeros_like(saved["markov_head.markov_w2.weight"])
    mx.save_safetensors(str(quiet / "model.safetensors"), saved, metadata={"format": "mlx"})
    drafts = {}
    for name, folder in (("loud", loud), ("quiet", quiet)):
        _, rounds = reply(target, 3, lambda ctx, folder=folder: load(ctx, folder, 3))
        drafts[name] = [list(r.draft_tokens) for r in rounds[1:]]
    assert drafts["loud"] != drafts["quiet"]


@pytest.mark.parametrize("anchor", [True, False])
@pytest.mark.parametrize("depth", [2, 3])
def test_a_dspark_drafter_that_answers_the_targets_own_token_has_every_draft_kept(
    tmp_path: Path, anchor: bool, depth: int
):
    """The target writes MASK after MASK (a copy target, next token a permutation with MASK fixed), and
    the prompt ends with MASK; the silent drafter's slots, MASK's embedding each (the last token is
    MASK too), answer with the target's head over it: MASK. Every draft is kept, then the bonus."""
    target_folder = write_target(tmp_path / "qwen35", 51, "copy", layers=LAYERS, permuted=True, fixed=MASK)
    folder = write_dspark(tmp_path / "dspark", 151, anchor=anchor, silent=True)
    target = load_target(target_folder)
    ours, rounds = reply(target, depth, lambda ctx: load(ctx, folder, depth))
    theirs, their_drafts, their_accepted = dflash_oracle(target_folder, folder, depth, N_TOKENS + 2 * depth)
    assert [e.token_id for e in ours] == theirs[:N_TOKENS] == [MASK] * N_TOKENS
    full = [r for r in rounds[1:] if r.depth == depth and r.drafted == depth]
    assert [list(r.draft_tokens) for r in full] == their_drafts[: len(full)] == [[MASK] * depth] * len(full)
    assert their_accepted[: len(full)] == [depth] * len(full)
    assert [e.kind for e in ours[: 1 + len(full) * (depth + 1)]] == [P, *([A] * depth + [B]) * len(full)]
    assert R not in [e.kind for e in ours]


def test_a_dspark_drafter_for_another_target_is_refused_in_a_sentence(tmp_path: Path):
    target = load_target(write_target(tmp_path / "qwen35", 41, "random", layers=LAYERS))
    ctx = target.new_context(max_rows=4)
    with pytest.raises(IncompatibleDrafter, match=r"trained on a target of 4 layers, and .* has 3"):
        load(ctx, write_dspark(tmp_path / "deeper", 141, target_layers=4), 3)
    with pytest.raises(IncompatibleDrafter, match=r"Markov head knows 101 tokens, and .* has 97"):
        load(ctx, write_dspark(tmp_path / "wider", 141, vocab=101), 3)
    with pytest.raises(IncompatibleDrafter, match="not a DFlash drafter's folder"):
        load(ctx, tmp_path / "nowhere", 3)


def write_gemma4_dspark(folder: Path, seed: int, target: Path, silent: bool = False, k_eq_v: bool = False) -> Path:
    """Gemma 4's DSpark drafter (mlx-vlm's Gemma4DSparkDraftModel: Gemma 4 layers, embeddings and a head of
    its own) for the Gemma 4 target in `target`. `silent`: its layers and Markov head add nothing, and its
    embeddings and head are the target's, so each slot answers with the target's head over MASK.
    `k_eq_v`: one projection for keys and values (the published checkpoints' layout)."""
    cfg = {
        **{k: v for k, v in GEMMA4.items() if k not in ("num_kv_shared_layers", "hidden_size_per_layer_input")},
        "architectures": ["Gemma4DSparkModel"],
        "model_type": "gemma4",
        "num_hidden_layers": 1,
        "layer_types": ["full_attention"],
        "tie_word_embeddings": False,
        "attention_k_eq_v": k_eq_v,
        "dflash_config": {
            "mask_token_id": MASK,
            "target_layer_ids": [0, 2],
            "num_target_layers": GEMMA4["num_hidden_layers"],
            "block_size": 3,
            "markov_rank": 8,
            "block_size_policy": "fixed",
        },
    }
    mx.random.seed(seed)
    drafter = Gemma4DSparkDraftModel(Gemma4DsparkConfig.from_dict(cfg))
    weights = dict(tree_flatten(drafter.parameters()))
    weights["markov_head.markov_w2.weight"] *= 8
    if silent:
        quiet = ("o_proj.weight", "down_proj.weight", "markov_w2.weight")
        weights = {k: mx.zeros_like(v) if k.endswith(quiet) else v for k, v in weights.items()}
        embed = mx.load(str(target / "model.safetensors"))["model.embed_tokens.weight"]
        weights["embed_tokens.weight"] = weights["lm_head.weight"] = embed
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})
    return folder


@pytest.mark.parametrize("silent", [False, True])
@pytest.mark.parametrize("depth", [2, 3])
def test_gemma4_dspark_drafts_and_tokens_are_mlx_vlms_own(tmp_path: Path, silent: bool, depth: int):
    """Gemma 4's DSpark on a Gemma 4 target (gemma4_targets.py), against mlx-vlm's own Gemma 4 and round
    loop: drafts, accepted counts, tokens and provenance. Silent, over a copy target that writes MASK
    after MASK, every draft is kept."""
    target_folder = write_gemma4(tmp_path / "gemma4", 71, copy=silent)
    folder = write_gemma4_dspark(tmp_path / "dspark", 171, target_folder, silent=silent)
    target = MlxModel.load(target_folder, MlxOptions())
    ours, rounds = reply(target, depth, lambda ctx: load(ctx, folder, depth))
    theirs, their_drafts, their_accepted = dflash_oracle(
        target_folder, folder, depth, N_TOKENS + 2 * depth, oracle=oracle_gemma4
    )
    assert [e.token_id for e in ours] == theirs[:N_TOKENS] == plain(target, N_TOKENS)
    full = [r for r in rounds[1:] if r.depth == depth and r.drafted == depth]
    assert len(full) >= 4
    assert [list(r.draft_tokens) for r in rounds[1 : 1 + len(full)]] == their_drafts[: len(full)]
    assert [r.accepted for r in rounds[1 : 1 + len(full)]] == their_accepted[: len(full)]
    expected = provenance(their_accepted[: len(full)], their_drafts[: len(full)])
    assert [e.kind for e in ours[: len(expected)]] == expected
    if silent:
        assert theirs[:N_TOKENS] == [MASK] * N_TOKENS
        assert expected == [P, *([A] * depth + [B]) * len(full)]


def test_a_gemma4_dspark_with_one_projection_for_keys_and_values_is_refused_in_a_sentence(tmp_path: Path):
    """mlx-vlm 0.7.10's DFlash context pass asks every layer for a value projection, which such a layer lacks."""
    target_folder = write_gemma4(tmp_path / "gemma4", 71)
    ctx = MlxModel.load(target_folder, MlxOptions()).new_context(max_rows=4)
    folder = write_gemma4_dspark(tmp_path / "dspark", 171, target_folder, k_eq_v=True)
    with pytest.raises(IncompatibleDrafter, match="one projection for its keys and values"):
        load(ctx, folder, 3)
