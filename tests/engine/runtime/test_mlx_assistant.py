"""Gemma 4's assistant on the MLX runtime, against mlx-vlm 0.7.10's own assistant generation (`_mtp_rounds`).

A tiny Gemma 4 target and a tiny assistant (mlx-vlm's Gemma4AssistantDraftModel), both gemma4_targets.py's,
are written as MLX folders; engine.drafting.kinds loads the assistant for the target's MlxContext. The
oracle is mlx-vlm's own Gemma 4 on the same weights, its assistant and its round loop, greedy. Fast.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

mx = pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")
pytest.importorskip("mlx_vlm")

from gemma4_targets import WIDTH, oracle_gemma4, write_assistant, write_gemma4  # noqa: E402
from mlx_targets import N_TOKENS, PROMPT, A, B, P, R, plain, provenance, recording, reply  # noqa: E402
from mlx_vlm.speculative.mtp import _buffer_mtp_target_cache, _mtp_rounds  # noqa: E402

from engine.drafting import kinds  # noqa: E402
from engine.drafting.mlx.assistant import MlxAssistantDrafter, load_assistant  # noqa: E402
from engine.errors import IncompatibleDrafter  # noqa: E402
from engine.runtime.mlx import MlxContext, MlxModel, MlxOptions  # noqa: E402


def load(ctx: MlxContext, folder: Path, depth: int) -> MlxAssistantDrafter:
    drafter = kinds.load(kinds.ASSISTANT, ctx, folder, ctx.model.options, max_depth=depth)
    assert isinstance(drafter, MlxAssistantDrafter) and drafter.kind == kinds.ASSISTANT.name
    return drafter


def oracle(
    target: Path, folder: Path, depth: int, n_tokens: int, buffered: bool = False
) -> tuple[list[int], list[list[int]], list[int]]:
    """mlx-vlm's greedy assistant generation: its tokens, each round's drafts, each round's accepted count.
    `buffered`: its sliding windows held in position order with room to roll back, as its own generate
    makes them for a speculative reply (BufferedRotatingKVCache), not in a ring."""
    lm, cache = oracle_gemma4(target)
    assistant = load_assistant(folder)  # an instance of its own, beside the one our drafter loads
    drafts = recording(assistant)
    prompt = mx.array([PROMPT], dtype=mx.int32)
    out = lm(prompt, cache=cache, return_hidden=True, return_shared_kv=True)
    if buffered:
        _buffer_mtp_target_cache(cache, assistant, depth + 1)
    bonus = int(mx.argmax(out.logits[0, -1]).item())
    rounds = _mtp_rounds(
        lm,
        assistant,
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
    return written, drafts, list(assistant.accept_lens)


@pytest.mark.parametrize("pair", ["random", "copy", "guessing"])
@pytest.mark.parametrize("depth", [2, 3])
def test_assistant_drafts_and_tokens_are_mlx_vlms_own(tmp_path: Path, pair: str, depth: int):
    """Round by round our drafts and accepted counts are mlx-vlm's while ours drafted at full depth, and
    the tokens are plain greedy decoding's. The pairs: both random (every draft refused); a copy target
    and the copy assistant (every draft kept); a random target and the copy assistant (some of each)."""
    target_folder = write_gemma4(tmp_path / "gemma4", 61, copy=pair == "copy")
    folder = write_assistant(tmp_path / "assistant", 161, target_folder, "random" if pair == "random" else "copy")
    target = MlxModel.load(target_folder, MlxOptions())
    ours, rounds = reply(target, depth, lambda ctx: load(ctx, folder, depth))
    theirs, their_drafts, their_accepted = oracle(target_folder, folder, depth, N_TOKENS + 2 * depth)
    assert [e.token_id for e in ours] == theirs[:N_TOKENS] == plain(target, N_TOKENS)
    full = [r for r in rounds[1:] if r.depth == depth and r.drafted == depth]
    assert len(full) >= 4
    assert [list(r.draft_tokens) for r in rounds[1 : 1 + len(full)]] == their_drafts[: len(full)]
    assert [r.accepted for r in rounds[1 : 1 + len(full)]] == their_accepted[: len(full)]
    expected = provenance(their_accepted[: len(full)], their_drafts[: len(full)])
    assert [e.kind for e in ours[: len(expected)]] == expected
    if pair == "copy":  # every draft kept, then the bonus, every round
        assert expected == [P, *([A] * depth + [B]) * len(full)]
    elif pair == "random":
        assert expected == [P, *[R] * len(full)]
    else:  # some kept, some refused: the walk is tested both ways
        assert A in expected and R in expected and B in expected


@pytest.mark.parametrize("depth", [2, 3])
def test_an_assistant_with_a_centroid_head_drafts_as_mlx_vlms_own(tmp_path: Path, depth: int):
    """Its greedy drafts come from the eight centroids nearest its state: mlx-vlm's argmax over them,
    ours the argmax of the row its head writes (the other tokens below every chosen one)."""
    target_folder = write_gemma4(tmp_path / "gemma4", 62)
    folder = write_assistant(tmp_path / "assistant", 162, target_folder, centroids=True)
    assert load_assistant(folder).masked_embedding is not None
    target = MlxModel.load(target_folder, MlxOptions())
    ours, rounds = reply(target, depth, lambda ctx: load(ctx, folder, depth))
    theirs, their_drafts, their_accepted = oracle(target_folder, folder, depth, N_TOKENS + 2 * depth)
    assert [e.token_id for e in ours] == theirs[:N_TOKENS] == plain(target, N_TOKENS)
    full = [r for r in rounds[1:] if r.depth == depth and r.drafted == depth]
    assert len(full) >= 4
    assert [list(r.draft_tokens) for r in rounds[1 : 1 + len(full)]] == their_drafts[: len(full)]
    assert [r.accepted for r in rounds[1 : 1 + len(full)]] == their_accepted[: len(full)]


def test_the_assistant_reads_the_memory_of_each_kinds_last_layer_with_a_cache(tmp_path: Path):
    """The target's last two layers share the first two's keys and values: the sliding layer 0's and
    the full layer 1's are what the assistant attends to, the positions the target holds."""
    target = MlxModel.load(write_gemma4(tmp_path / "gemma4", 61), MlxOptions())
    ctx = target.new_context(max_rows=4)
    drafter = load(ctx, write_assistant(tmp_path / "assistant", 161, tmp_path / "gemma4"), 3)
    assert drafter.sources == {"sliding_attention": 0, "full_attention": 1}
    ctx.prefill(PROMPT)
    memory = drafter._memory(len(PROMPT))
    assert {k: (v[0].shape, v[1].shape) for k, v in memory.items()} == {
        "sliding_attention": ((1, 2, len(PROMPT), 16), (1, 2, len(PROMPT), 16)),
        "full_attention": ((1, 2, len(PROMPT), 32), (1, 2, len(PROMPT), 32)),
    }
    drafter.close()


def test_a_bad_or_mismatched_assistant_folder_is_refused_in_a_sentence(tmp_path: Path):
    from mlx_targets import load_target, write_target

    gemma = write_gemma4(tmp_path / "gemma4", 61)
    ctx = MlxModel.load(gemma, MlxOptions()).new_context(max_rows=4)
    with pytest.raises(IncompatibleDrafter, match=r"not a Gemma 4 assistant's folder: it has no config\.json"):
        load(ctx, tmp_path / "nowhere", 3)
    qwen = write_target(tmp_path / "qwen35", 7, "random")  # a Qwen 3.5 folder with its own MTP head
    with pytest.raises(IncompatibleDrafter, match="qwen3_5_mtp model, not a Gemma 4 assistant"):
        load(ctx, qwen, 3)
    with pytest.raises(IncompatibleDrafter, match="reads hidden states 32 wide, and gemma4's are 64 wide"):
        load(ctx, write_assistant(tmp_path / "narrow", 161, gemma, backbone=32), 3)
    with pytest.raises(IncompatibleDrafter, match="the assistant knows 101 tokens, and gemma4 has 97"):
        load(ctx, write_assistant(tmp_path / "wider", 161, gemma, vocab=101), 3)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps({"model_type": "gemma4_assistant", "backbone_hidden_size": WIDTH}))
    with pytest.raises(IncompatibleDrafter, match=r"broken has no model\*\.safetensors"):
        load(ctx, broken, 3)
    qwen_ctx = load_target(qwen).new_context(max_rows=4)
    with pytest.raises(IncompatibleDrafter, match="qwen35 is not a Gemma 4 model: the assistant attends"):
        load(qwen_ctx, write_assistant(tmp_path / "assistant", 161, gemma), 3)
