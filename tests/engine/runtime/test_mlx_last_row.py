"""A decode that reads only its last row runs the model's head on that row alone (BatchTaps.forward's
`last`): a prompt's chunk and a draft step of two tokens skip the head's matmul over the rows nobody
reads, with the same row as the model's own code, bit for bit; a verify keeps every row; a model
whose logits are more than its head over its stack decodes whole."""

from __future__ import annotations

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")

import mlx.nn as nn  # noqa: E402
from mlx_lm.models import qwen2  # noqa: E402
from test_mlx import BATCH_TOLERANCE, PROMPT, VOCAB, qwen2_args, reply, tokens  # noqa: E402

from engine.events import TokenKind  # noqa: E402
from engine.runtime.mlx import MlxModel, MlxOptions  # noqa: E402

A, B, P = TokenKind.ACCEPTED, TokenKind.BONUS, TokenKind.PLAIN
COMPILED = [True, False]


def same_rows(ours: np.ndarray, own: np.ndarray) -> None:
    """Equal to the bit on MLX's CPU backend (a row's dot products do not depend on the batch's other
    rows there); another backend's one-row matmul may sum in another order: close, the same argmax."""
    if mx.default_device() == mx.cpu:
        np.testing.assert_array_equal(ours, own)
    else:
        np.testing.assert_allclose(ours, own, rtol=0, atol=BATCH_TOLERANCE)
        assert list(ours.argmax(axis=-1)) == list(own.argmax(axis=-1))


def counted(module: qwen2.Model) -> list[int]:
    """The row counts the model's head (its tied embedding as a linear layer) is called with, from now on;
    a compiled decode's head is seen when it is traced, with the shape it is traced for."""
    rows: list[int] = []
    embedding = module.model.embed_tokens
    base = type(embedding)

    class Counted(base):  # type: ignore[misc, valid-type]
        def as_linear(self, x: mx.array) -> mx.array:
            rows.append(int(x.shape[1]))
            return base.as_linear(self, x)

    embedding.__class__ = Counted
    return rows


def model(seed: int, compiled: bool, name: str = "target", cls: type = qwen2.Model) -> tuple[MlxModel, list[int]]:
    mx.random.seed(seed)
    module = cls(qwen2_args())
    mx.eval(module.parameters())
    loaded = MlxModel(module, VOCAB, name, options=MlxOptions(compiled_decode=compiled))
    return loaded, counted(module)


def own_logits(module: nn.Module, batches: list[list[int]]) -> list[np.ndarray]:
    """Each batch's logits from the model's own code, decoded one after another on one cache."""
    from mlx_lm.models.cache import make_prompt_cache

    cache = make_prompt_cache(module)
    return [np.array(module(mx.array(b)[None], cache=cache)[0]) for b in batches]


@pytest.mark.parametrize("compiled", COMPILED, ids=["compiled", "uncompiled"])
def test_a_decode_of_its_last_row_runs_the_head_on_that_row_alone(compiled):
    target, head_rows = model(0, compiled)
    batches = [PROMPT, [5, 6], [7, 8, 9], [10], [11, 12]]
    own = own_logits(target.module, batches)
    ctx = target.new_context(max_rows=4)
    head_rows.clear()  # the model's own code above ran its head on every row
    first = ctx.decode(PROMPT, all_logits=False)
    second = ctx.decode([5, 6], all_logits=False)  # a draft step's catch-up: two tokens, the last row read
    assert head_rows == [1, 1]  # each decode's last row (the model's check ran when the context was made)
    same_rows(first, own[0][-1:])
    same_rows(second, own[1][-1:])
    head_rows.clear()
    verify = ctx.decode([7, 8, 9], all_logits=True)  # a verify reads every row
    same_rows(verify, own[2])
    same_rows(ctx.decode([10], all_logits=False), own[3][-1:])
    same_rows(ctx.decode([11, 12], all_logits=False), own[4][-1:])
    assert head_rows[0] == 3 and set(head_rows[1:]) <= {1}
    assert ctx.tokens == [*PROMPT, 5, 6, 7, 8, 9, 10, 11, 12]
    if compiled:
        assert ctx.observers.compiled.calls >= 3  # the short decodes ran compiled, the head inside the trace


@pytest.mark.parametrize("compiled", COMPILED, ids=["compiled", "uncompiled"])
def test_a_drafter_drafting_for_itself_runs_its_head_on_one_row_a_step(compiled):
    """Every draft accepted: each round's draft begins with the last draft and the bonus, two tokens,
    whose first row nobody reads; the target's verify still reads depth + 1 rows."""
    target, target_rows = model(0, compiled)
    drafter, drafter_rows = model(0, compiled, "drafter")
    plain = [t.token_id for t in tokens(reply(target, None, 0))]
    target_rows.clear()
    events = reply(target, drafter, 3, n_tokens=17)
    assert [t.token_id for t in tokens(events)] == plain[:17]
    assert [t.kind for t in tokens(events)] == [P, *([A, A, A, B] * 4)]
    assert drafter_rows and set(drafter_rows) == {1}
    assert 4 in target_rows


class Scaled(qwen2.Model):
    """A model whose logits are its head's, doubled: not its head over its stack."""

    def __call__(self, inputs: mx.array, cache: object = None) -> mx.array:
        return 2 * super().__call__(inputs, cache=cache)


@pytest.mark.parametrize("compiled", COMPILED, ids=["compiled", "uncompiled"])
def test_a_model_whose_logits_are_more_than_its_head_decodes_whole(compiled):
    target, head_rows = model(0, compiled, cls=Scaled)
    batches = [PROMPT, [5, 6]]
    own = own_logits(target.module, batches)
    ctx = target.new_context(max_rows=4)
    head_rows.clear()
    same_rows(ctx.decode(PROMPT, all_logits=False), own[0][-1:])
    same_rows(ctx.decode([5, 6], all_logits=False), own[1][-1:])
    assert not ctx.observers.head_apart
    assert len(PROMPT) in head_rows  # the whole prompt's rows, as its own code runs them


@pytest.mark.parametrize("compiled", COMPILED, ids=["compiled", "uncompiled"])
def test_a_decode_whose_batches_are_observed_keeps_every_rows_hidden_state(compiled):
    """An observer reading hidden states (an MTP head, EAGLE-3) still gets every token's, while the
    head runs on the last row alone; a verify of the same length after it reads every row (its own trace)."""
    target, head_rows = model(0, compiled)
    ctx = target.new_context(max_rows=4)
    seen: list[tuple[list[int], int, tuple[int, ...] | None]] = []
    ctx.observe_batches(lambda toks, start, rows: seen.append((toks, start, None if rows is None else rows.shape)))
    own = own_logits(target.module, [PROMPT, [5, 6], [7, 8]])
    head_rows.clear()
    same_rows(ctx.decode(PROMPT, all_logits=False), own[0][-1:])
    same_rows(ctx.decode([5, 6], all_logits=False), own[1][-1:])
    same_rows(ctx.decode([7, 8], all_logits=True), own[2])
    assert seen == [(PROMPT, 0, (len(PROMPT), 64)), ([5, 6], 10, (2, 64)), ([7, 8], 12, (2, 64))]
    assert head_rows == [1, 1, 2]
    assert ctx.observers.compiled.calls == (2 if compiled else 0)  # a prompt's first chunk runs uncompiled
