"""Sliding-window layers past their window (engine.runtime.mlx.window), on a tiny Gemma 4 whose window is 16.

mlx-lm's own model and cache (a ring) are the oracle for the rows, fed one token at a time; mlx-vlm's
assistant rounds on its buffered window for the assistant's drafts. Before WindowCache a speculative
reply past the window stopped ("could trim 0 of 3 positions"). Fast.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")
pytest.importorskip("mlx_vlm")

from gemma4_targets import write_assistant, write_gemma4  # noqa: E402
from mlx_lm.generate import generate_step  # noqa: E402
from mlx_lm.models.cache import RotatingKVCache, make_prompt_cache  # noqa: E402
from mlx_targets import PROMPT, VOCAB, A, R, reply  # noqa: E402
from test_mlx_assistant import load, oracle  # noqa: E402

from engine.drafting import ModelDrafter  # noqa: E402
from engine.runtime.mlx import MlxContext, MlxModel, MlxOptions  # noqa: E402
from engine.runtime.mlx.cuda_attention import reference  # noqa: E402
from engine.runtime.mlx.window import WindowCache  # noqa: E402

WINDOW = 16
ON, OFF = MlxOptions(compiled_decode=True), MlxOptions(compiled_decode=False)
STREAM = [int(t) for t in np.random.default_rng(7).integers(0, VOCAB, 150)]


def gemma(folder: Path, seed: int) -> Path:
    """A tiny Gemma 4 (gemma4_targets) whose sliding layers see 16 positions."""
    write_gemma4(folder, seed)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "sliding_window": WINDOW}))
    return folder


def their_rows(target: MlxModel, tokens: list[int]) -> np.ndarray:
    """mlx-lm's own rows, its own cache (a ring past the window), one token at a time after PROMPT."""
    cache = make_prompt_cache(target.module)
    assert any(type(c) is RotatingKVCache for c in cache)
    target.module(mx.array([PROMPT]), cache=cache)
    rows = [target.module(mx.array([[t]]), cache=cache)[0, -1].astype(mx.float32) for t in tokens]
    return np.array(mx.stack(rows))


def windows(ctx: MlxContext) -> list[WindowCache]:
    found = [c for c in ctx.kv_cache() if isinstance(c, WindowCache)]
    assert found
    return found


@pytest.mark.parametrize("mode", ["compiled", "uncompiled", "bounds"])
def test_rows_past_the_window_are_mlx_lms_own_through_batches_and_rewinds(tmp_path: Path, mode: str):
    """Batches of 1-5 rows with a rewind after every other one, 150 positions past a 16-position window:
    every row is mlx-lm's at its position and picks its token. The window moved and the buffer stayed
    within its ceiling; compiled, the steps past the window ran compiled. `bounds`: compiled, each layer
    attending by its rows' bounds rather than a mask (as the CUDA kernel does: here its semantics in
    MLX's operations), the sliding and the full layers alike."""
    options = OFF if mode == "uncompiled" else ON
    target = MlxModel.load(gemma(tmp_path / "g", 69), options)
    theirs = their_rows(target, STREAM)
    ctx = target.new_context(max_rows=5)
    windows_seen: list[int] = []
    if mode == "bounds":

        def attend(q: mx.array, k: mx.array, v: mx.array, scale: float, last: mx.array, window: int) -> mx.array:
            windows_seen.append(window)
            return reference(q, k, v, scale, last, window)

        ctx.observers.compiled.attend = attend
    ctx.prefill(PROMPT)
    at, batch = 0, 0
    while at < len(STREAM):
        n = min([1, 4, 2, 1, 3, 5][batch % 6], len(STREAM) - at)
        rows = ctx.decode(STREAM[at : at + n], all_logits=True)
        np.testing.assert_allclose(rows, theirs[at : at + n], rtol=1e-4, atol=1e-4)
        assert list(rows.argmax(-1)) == list(theirs[at : at + n].argmax(-1))
        back = min(n - 1, 2) if batch % 2 else 0
        ctx.rewind(ctx.n_past - back)  # a verify's rejected rows, decoded again next time
        at += n - back
        batch += 1
    assert ctx.tokens == [*PROMPT, *STREAM] and ctx.rewinds_replayed == 0
    for c in windows(ctx):
        assert c.start > 0 and c.keys.shape[2] <= c.ceiling and c.offset == len(PROMPT) + len(STREAM)
    compiled = ctx.observers.compiled
    assert (compiled.calls > 50) == (options is ON) and (compiled.calls == 0) == (options is OFF)
    if mode == "bounds":  # traced: each trace's two layers with a cache, a window's and a full one's
        assert WINDOW in windows_seen and 1 << 30 in windows_seen


@pytest.mark.parametrize("options", [ON, OFF], ids=["compiled", "uncompiled"])
def test_a_speculative_reply_past_the_window_is_mlx_lms_plain_decoding(tmp_path: Path, options: MlxOptions):
    """A Gemma 4 drafting for a Gemma 4, both windows of 16, 120 tokens: mlx-lm's generate_step's tokens,
    drafts kept and refused on the way; both caches moved their windows."""
    target = MlxModel.load(gemma(tmp_path / "g", 69), options)
    drafter = MlxModel.load(gemma(tmp_path / "d", 60), options)
    moved: list[int] = []  # each window's first position kept, in the drafter's context and the target's

    def loaded(ctx: MlxContext) -> ModelDrafter:
        draft = ModelDrafter(drafter, max_depth=3)
        close = draft.close

        def closing() -> None:
            moved.extend(c.start for c in [*windows(draft.ctx), *windows(ctx)])  # type: ignore[arg-type]
            close()

        draft.close = closing  # type: ignore[method-assign]
        return draft

    ours, _ = reply(target, 3, loaded, n_tokens=120)
    steps = generate_step(
        mx.array(PROMPT), target.module, max_tokens=120, prompt_cache=make_prompt_cache(target.module)
    )
    assert [e.token_id for e in ours] == [int(t) for t, _ in steps]
    kinds = [e.kind for e in ours]
    assert kinds.count(A) >= 10 and kinds.count(R) >= 10
    assert len(moved) == 2 and min(moved) > 0  # one sliding layer with a cache in each


def test_a_rewind_further_back_than_the_window_keeps_decodes_the_kept_tokens_again(tmp_path: Path):
    """A rewind of up to the spare positions trims; one further back (a follow-up sharing part of a long
    conversation) starts the cache again and decodes what is kept: the next row is mlx-lm's."""
    target = MlxModel.load(gemma(tmp_path / "g", 69), ON)
    theirs = their_rows(target, STREAM)
    ctx = target.new_context(max_rows=4)
    ctx.prefill(PROMPT)
    for t in STREAM[:120]:
        ctx.decode([t], all_logits=False)
    spare = windows(ctx)[0].trimmable()
    assert WINDOW <= spare < 60
    ctx.rewind(ctx.n_past - spare)
    assert ctx.rewinds_replayed == 0 and ctx.n_past == len(PROMPT) + 120 - spare
    ctx.rewind(len(PROMPT) + 60)
    assert ctx.rewinds_replayed == 1 and ctx.tokens == [*PROMPT, *STREAM[:60]]
    row = ctx.decode([STREAM[60]], all_logits=False)
    np.testing.assert_allclose(row[-1], theirs[60], rtol=1e-4, atol=1e-4)


def test_the_assistant_drafts_past_the_window_as_mlx_vlms_own(tmp_path: Path):
    """Gemma 4's assistant past a 16-position window reads the window's keys and values as mlx-vlm hands
    its own over (its buffered window): the same drafts and accepted counts round by round, up to where
    mlx-vlm first drops its oldest positions (32 past the window for a block of 4)."""
    target_folder = gemma(tmp_path / "g", 69)
    folder = write_assistant(tmp_path / "assistant", 169, target_folder, "random")
    target = MlxModel.load(target_folder, ON)
    depth = 3
    ours, rounds = reply(target, depth, lambda ctx: load(ctx, folder, depth), n_tokens=60)
    theirs, their_drafts, their_accepted = oracle(target_folder, folder, depth, 60 + 2 * depth, buffered=True)
    assert [e.token_id for e in ours] == theirs[:60]
    held, compared = len(PROMPT), 0  # the positions the target holds when a round drafts
    for i, r in enumerate(rounds[1:]):
        held += rounds[i].accepted + 1 if i else 1
        if held + depth + 1 > WINDOW + 32 or r.drafted < depth:
            break
        assert (list(r.draft_tokens), r.accepted) == (their_drafts[i], their_accepted[i])
        compared += held > WINDOW
    assert compared >= 15


def test_a_window_whose_values_are_narrower_than_its_keys_keeps_each_its_own_size():
    """A model whose values are narrower than its keys: each buffer keeps its own head size through the
    first write, growth and the window's drops, and hands back what was written last."""
    cache = WindowCache(8)
    keys, values = mx.random.normal((1, 2, 3, 32)), mx.random.normal((1, 2, 3, 16))
    cache.update_and_fetch(keys, values)
    for _ in range(120):
        got_keys, got_values = cache.update_and_fetch(keys[..., :1, :], values[..., :1, :])
    assert cache.start > 0 and got_keys.shape[-1] == 32 and got_values.shape[-1] == 16
    np.testing.assert_array_equal(np.array(got_values[..., -1:, :]), np.array(values[..., :1, :]))
    assert got_keys.shape[2] == got_values.shape[2] == cache.offset - cache.start == 123 - cache.start
