"""Hybrid and recurrent targets on the MLX runtime: rejected drafts undone from state snapshots.

mlx-lm's own speculative decoding refuses these models (their caches cannot be trimmed); ours
keeps each recurrent layer's state before a batch and decodes the kept tokens again
(engine.runtime.mlx.snapshots). Fast: tiny random-weight models built here from mlx-lm's own
classes, a qwen3_5 (gated delta-net layers beside attention layers) and a pure mamba, on MLX's
CPU backend, where every comparison below came out bit-identical.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")

from mlx.utils import tree_map  # noqa: E402
from mlx_lm.generate import speculative_generate_step  # noqa: E402
from mlx_lm.models import mamba, qwen2, qwen3_5  # noqa: E402
from mlx_lm.models.cache import KVCache  # noqa: E402

from engine.depth import FixedDepth  # noqa: E402
from engine.drafting import ModelDrafter  # noqa: E402
from engine.errors import RuntimeFailure  # noqa: E402
from engine.events import RoundEvent, TokenEvent, TokenKind  # noqa: E402
from engine.rounds import GenerationConfig, Prefill  # noqa: E402
from engine.runtime.mlx import MlxModel  # noqa: E402
from engine.speculative import generate  # noqa: E402

VOCAB = 97
PROMPT = [3, 14, 15, 92, 65, 35, 89, 79, 32, 38]
N_TOKENS = 24
A, R, B, P = TokenKind.ACCEPTED, TokenKind.REPLACED, TokenKind.BONUS, TokenKind.PLAIN


def build_qwen35(seed: int) -> qwen3_5.Model:
    """Four layers, gated delta-net and attention in turn, random weights the same for the same seed."""
    mx.random.seed(seed)
    config = {
        "model_type": "qwen3_5",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "vocab_size": VOCAB,
        "linear_num_value_heads": 4,
        "linear_num_key_heads": 2,
        "linear_key_head_dim": 16,
        "linear_value_head_dim": 16,
        "linear_conv_kernel_dim": 4,
        "full_attention_interval": 2,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": False,
    }
    module = qwen3_5.Model(qwen3_5.ModelArgs.from_dict(config))
    mx.eval(module.parameters())
    return module


def build_mamba(seed: int) -> mamba.Model:
    mx.random.seed(seed)
    args = mamba.ModelArgs(
        model_type="mamba",
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        state_size=8,
        num_hidden_layers=2,
        conv_kernel=4,
        use_bias=False,
        use_conv_bias=True,
        time_step_rank=4,
        tie_word_embeddings=False,  # tied, a tiny random mamba echoes its input token
    )
    module = mamba.Model(args)
    mx.eval(module.parameters())
    return module


BUILDERS = {"qwen3_5": build_qwen35, "mamba": build_mamba}
# How far a drafter's weights stray from the target's: it agrees often, not always (measured here).
NOISE = {"qwen3_5": 0.002, "mamba": 0.02}


def model(kind: str, seed: int = 0) -> MlxModel:
    return MlxModel(BUILDERS[kind](seed), VOCAB, f"tiny-{kind}", n_ctx_train=512)


def nearby(kind: str) -> MlxModel:
    """The seed-0 model with every weight moved by noise: a drafter that agrees often, not always."""
    module = BUILDERS[kind](0)
    mx.random.seed(1)
    module.update(tree_map(lambda w: w + NOISE[kind] * mx.random.normal(w.shape), module.parameters()))
    mx.eval(module.parameters())
    return MlxModel(module, VOCAB, f"nearby-{kind}", n_ctx_train=512)


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def target(request) -> MlxModel:
    return model(request.param)


def tokens(events: list) -> list[TokenEvent]:
    return [e for e in events if isinstance(e, TokenEvent)]


def reply(target: MlxModel, drafter_model: MlxModel | None, depth: int) -> list:
    """One reply's events: prefill, then the rounds (as tests/engine/runtime/test_mlx.py's `reply`)."""
    ctx = target.new_context(max_rows=5)
    drafter = ModelDrafter(drafter_model, max_depth=4) if drafter_model is not None else None
    first_row, prefilled = ctx.prefill(PROMPT)
    if drafter is not None:
        drafter.prefill(PROMPT)
    cfg = GenerationConfig(max_tokens=N_TOKENS, depth=depth)
    prefill = Prefill(prefilled, 0.0, first_row)
    events = list(generate(ctx, drafter, FixedDepth(depth), list(PROMPT), cfg, prefill=prefill))
    assert ctx.tokens == [*PROMPT, *[t.token_id for t in tokens(events)]][:-1]  # rewound to what was kept
    assert ctx.rewinds_replayed == 0  # every rewind from the latest batch's snapshot
    return events


def expected_kinds(written: list[int], drafter: MlxModel, depth: int) -> list[TokenKind]:
    """Each token's provenance from the plain reply and the drafter's own greedy chain, round by round."""
    kinds, pos = [P], 1
    while pos < len(written):
        k = min(depth, len(written) - pos - 1)
        ctx = drafter.new_context()
        row = ctx.decode([*PROMPT, *written[:pos]], all_logits=False)
        proposed = []
        for _ in range(k):
            proposed.append(int(row[-1].argmax()))
            row = ctx.decode(proposed[-1:], all_logits=False)
        kept = 0
        while kept < k and proposed[kept] == written[pos + kept]:
            kept += 1
        kinds += [A] * kept + ([B] if kept == k and k else [R] if k else [P])
        pos += kept + 1
    return kinds[: len(written)]


def test_a_hybrid_target_says_it_undoes_drafts_from_snapshots(target):
    ctx = target.new_context(max_rows=5)
    assert ctx.has_state and ctx.rollback_depth == 4 and ctx.can_rewind
    if target.name == "tiny-qwen3_5":  # a gated delta-net on the CPU: the batch's own states
        assert ctx.describe_rollback() == (
            f"{target.name} keeps a recurrent state: a rejected draft is undone from the states its "
            "verify batch computed at each position."
        )
    else:
        assert ctx.describe_rollback() == (
            f"{target.name} keeps a recurrent state: a rejected draft is undone from the state kept before "
            "its verify batch, decoding the accepted tokens again."
        )


@pytest.mark.parametrize("kept", [0, 1, 2, 3, 4])
def test_after_a_rewind_the_rows_are_a_fresh_contexts(target, kept):
    """Verify [t, d1..d4], keep `kept` of them, decode u: the rows of a context that never saw the drafts."""
    batch, u = [5, 9, 10, 11, 12], [77, 78]
    drafted, fresh, not_undone = (target.new_context(max_rows=5) for _ in range(3))
    for ctx in (drafted, fresh, not_undone):
        ctx.decode(PROMPT, all_logits=False)
    drafted.decode(batch, all_logits=True)
    not_undone.decode(batch, all_logits=True)
    drafted.rewind(len(PROMPT) + kept)
    assert drafted.tokens == [*PROMPT, *batch[:kept]] and drafted.rewinds_replayed == 0
    # a gated delta-net's own per-step states on this CPU; a mamba's state decoded again
    assert drafted.snapshots.from_steps == (1 if kept and target.name == "tiny-qwen3_5" else 0)
    if kept:
        fresh.decode(batch[:kept], all_logits=False)
    after, expected, stale = (ctx.decode(u, all_logits=True) for ctx in (drafted, fresh, not_undone))
    np.testing.assert_array_equal(after, expected)
    assert np.abs(stale - expected).max() > 1e-3  # the drafts left in the state would show


def test_a_rewind_within_the_batch_twice_and_back_to_its_start(target):
    """The snapshot outlives a rewind: the round may go back to the same batch's start again."""
    ctx, fresh = target.new_context(max_rows=5), target.new_context(max_rows=5)
    ctx.decode(PROMPT, all_logits=False)
    ctx.decode([5, 9, 10, 11], all_logits=True)
    ctx.rewind(len(PROMPT) + 3)
    ctx.rewind(len(PROMPT) + 1)
    ctx.rewind(len(PROMPT))
    assert ctx.rewinds_replayed == 0 and ctx.tokens == PROMPT
    fresh.decode(PROMPT, all_logits=False)
    np.testing.assert_array_equal(ctx.decode([42], all_logits=True), fresh.decode([42], all_logits=True))


def test_a_rewind_further_back_than_the_batch_starts_again_from_the_kept_tokens(target):
    """A follow-up sharing part of the conversation: the cache starts again and decodes what is kept."""
    ctx, fresh = target.new_context(max_rows=5), target.new_context(max_rows=5)
    ctx.decode(PROMPT, all_logits=False)
    ctx.decode([1, 2, 3], all_logits=False)
    keep = len(PROMPT) // 2
    ctx.rewind(keep)
    assert ctx.rewinds_replayed == 1 and ctx.tokens == PROMPT[:keep]
    fresh.decode(PROMPT[:keep], all_logits=False)
    np.testing.assert_array_equal(ctx.decode([42], all_logits=True), fresh.decode([42], all_logits=True))
    assert ctx.sync([*PROMPT[:keep], 42, 7]) == 1 and ctx.tokens == [*PROMPT[:keep], 42, 7]


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_the_target_drafting_for_itself_writes_what_it_writes_alone(target, depth):
    plain = [t.token_id for t in tokens(reply(target, None, 0))]
    same = MlxModel(target.module, VOCAB, "drafter", n_ctx_train=512)
    events = tokens(reply(target, same, depth))
    assert [t.token_id for t in events] == plain
    expected, written = [P], 1  # every draft accepted, then the bonus; the last rounds draft what room is left
    while written < N_TOKENS:
        k = min(depth, N_TOKENS - written - 1)
        expected += [A] * k + [B if k else P]
        written += k + 1
    assert [t.kind for t in events] == expected


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_a_drafter_that_disagrees_changes_nothing_but_the_provenance(target, depth):
    plain = [t.token_id for t in tokens(reply(target, None, 0))]
    other = nearby(target.name.removeprefix("tiny-"))
    events = tokens(reply(target, other, depth))
    assert [t.token_id for t in events] == plain
    kinds = [t.kind for t in events]
    assert kinds == expected_kinds(plain, other, depth)
    assert R in kinds and B in kinds  # rounds rolled back, and rounds kept whole
    if depth > 1:  # a draft kept, the next refused: a rewind to the middle of the batch
        assert any(a is A and b is R for a, b in itertools.pairwise(kinds))


def test_mlx_lms_own_speculative_decoding_refuses_what_ours_runs(target):
    steps = speculative_generate_step(mx.array(PROMPT), target.module, target.module, num_draft_tokens=2)
    with pytest.raises(ValueError, match="requires a trimmable prompt cache"):
        next(steps)


class UntrimmableKVCache(KVCache):
    """A layer cache of a kind the snapshots do not know that cannot trim either."""

    def is_trimmable(self) -> bool:
        return False


def test_a_cache_that_can_neither_trim_nor_snapshot_refuses_in_a_sentence():
    mx.random.seed(0)
    args = qwen2.ModelArgs(
        model_type="qwen2",
        hidden_size=32,
        num_hidden_layers=1,
        intermediate_size=64,
        num_attention_heads=2,
        rms_norm_eps=1e-6,
        vocab_size=VOCAB,
        num_key_value_heads=1,
    )
    module = qwen2.Model(args)
    module.make_cache = lambda: [UntrimmableKVCache()]
    ctx = MlxModel(module, VOCAB, "odd", n_ctx_train=512).new_context(max_rows=3)
    assert ctx.has_state and ctx.rollback_depth == 0 and not ctx.can_rewind
    assert ctx.describe_rollback() == (
        "odd keeps a recurrent state the MLX runtime cannot roll back (its UntrimmableKVCache layers), "
        "so it decodes without speculation."
    )
    ctx.decode(PROMPT, all_logits=False)
    with pytest.raises(RuntimeFailure, match="cannot go back to position 4"):
        ctx.rewind(4)
    ctx.rewind(0)  # back to nothing: a fresh cache, which any layer can start
    assert ctx.tokens == []


def test_a_plain_reply_launches_each_step_ahead_and_a_wrong_guess_is_undone(target):
    """Plain greedy decoding pipelined (engine.runtime.mlx.ahead) writes the one-at-a-time tokens, one
    sync a round; a step launched on a guess the next decode does not take leaves the state and rows
    of a context that never guessed (the state put back from the snapshot taken before it)."""
    events = reply(target, None, 0)
    ctx = target.new_context()
    row, _ = ctx.prefill(PROMPT)
    plain = [int(row.argmax())]
    while len(plain) < N_TOKENS:
        plain.append(int(ctx.decode([plain[-1]], all_logits=False)[-1].argmax()))
    assert [t.token_id for t in tokens(events)] == plain
    assert {e.host_syncs for e in events if isinstance(e, RoundEvent) and not e.from_prefill} == {1}
    guessing, fresh = target.new_context(max_rows=2), target.new_context(max_rows=2)
    for c in (guessing, fresh):
        c.decode(PROMPT, all_logits=False)
    guessing.pipeline_greedy(())
    want = fresh.decode([plain[0]], all_logits=True)
    assert np.array_equal(guessing.decode([plain[0]], all_logits=True), want) and guessing.ahead is not None
    other = (int(want[0].argmax()) + 1) % VOCAB
    np.testing.assert_array_equal(guessing.decode([other], all_logits=True), fresh.decode([other], all_logits=True))
    assert guessing.tokens == fresh.tokens and guessing.rewinds_replayed == 0
