"""Short MLX decodes compiled (engine.runtime.mlx.compiled): the same tokens, rows and provenance as the
model's own code, every plain step and verify batch of a plain KV model compiled, a hybrid's plain steps
too, and what cannot be compiled decoding as it always did."""

from __future__ import annotations

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")

from mlx_lm.generate import generate_step  # noqa: E402
from mlx_lm.models import qwen2  # noqa: E402
from mlx_lm.models.cache import KVCache, RotatingKVCache, make_prompt_cache  # noqa: E402
from test_mlx import PROMPT, VOCAB, build, qwen2_args  # noqa: E402
from test_mlx_hybrid import build_qwen35, nearby  # noqa: E402

from engine.depth import FixedDepth  # noqa: E402
from engine.drafting import ModelDrafter  # noqa: E402
from engine.events import RoundEvent, TokenEvent, TokenKind  # noqa: E402
from engine.rounds import GenerationConfig, Prefill  # noqa: E402
from engine.runtime.mlx import MlxContext, MlxModel, MlxOptions  # noqa: E402
from engine.runtime.mlx.compiled import CompiledForward  # noqa: E402
from engine.runtime.mlx.stepstates import StepStates  # noqa: E402
from engine.speculative import generate  # noqa: E402

ON, OFF = MlxOptions(compiled_decode=True), MlxOptions(compiled_decode=False)


def run(
    target: MlxModel, drafter: MlxModel | None, depth: int, n_tokens: int
) -> tuple[list[tuple], MlxContext, ModelDrafter | None]:
    """A greedy reply: each token as (id, provenance, the draft it replaced), its context and drafter."""
    ctx = target.new_context(max_rows=depth + 1)
    draft = ModelDrafter(drafter, max_depth=depth) if drafter is not None and depth else None
    first_row, prefilled = ctx.prefill(PROMPT)
    if draft is not None:
        draft.prefill(PROMPT)
    cfg = GenerationConfig(max_tokens=n_tokens, depth=depth)
    events = generate(ctx, draft, FixedDepth(depth), list(PROMPT), cfg, prefill=Prefill(prefilled, 0.0, first_row))
    written = [(e.token_id, e.kind, e.rejected_id) for e in events if isinstance(e, TokenEvent)]
    return written, ctx, draft


def calls(ctx: object) -> int:
    return int(ctx.observers.compiled.calls)  # type: ignore[attr-defined]


def test_a_plain_reply_runs_compiled_and_writes_mlx_lms_own_tokens():
    """Every step after the prompt's is compiled; the tokens are mlx-lm's generate_step's."""
    target = MlxModel(build(0), VOCAB, "target", options=ON)
    written, ctx, _ = run(target, None, 0, 40)
    cache = make_prompt_cache(target.module)
    steps = generate_step(mx.array(PROMPT), target.module, max_tokens=40, prompt_cache=cache)
    assert [t for t, _, _ in written] == [int(t) for t, _ in steps]
    assert calls(ctx) >= 38  # the first token is the prompt's; the last step's guess may go unused
    assert all(type(c) is KVCache for c in ctx.kv_cache())


@pytest.mark.parametrize("depth", [1, 3])
def test_compiled_verify_batches_and_drafts_keep_every_token_and_its_provenance(depth):
    """A drafter that disagrees now and then (another seed): the compiled pair writes what the uncompiled
    pair writes, token by token, with the same provenance and replaced drafts; both contexts compiled."""
    ours, ctx, draft = run(
        MlxModel(build(0), VOCAB, "t", options=ON), MlxModel(build(1), VOCAB, "d", options=ON), depth, 36
    )
    theirs, plain_ctx, plain_draft = run(
        MlxModel(build(0), VOCAB, "t", options=OFF), MlxModel(build(1), VOCAB, "d", options=OFF), depth, 36
    )
    assert ours == theirs
    assert TokenKind.REPLACED in {kind for _, kind, _ in ours}
    assert draft is not None and plain_draft is not None
    assert ctx.observers.compiled.lengths[depth + 1] > 0 and calls(draft.ctx) > 0  # verify batches compiled
    assert calls(plain_ctx) == 0 and calls(plain_draft.ctx) == 0


def test_a_reply_past_the_buffer_doubles_it_and_changes_nothing():
    """mlx-lm's first decode gives each layer 256 positions; a compiled step that needs more doubles them."""
    ours, ctx, _ = run(MlxModel(build(0), VOCAB, "t", options=ON), None, 0, 300)
    theirs, _, _ = run(MlxModel(build(0), VOCAB, "t", options=OFF), None, 0, 300)
    assert ours == theirs
    assert {c.keys.shape[2] for c in ctx.kv_cache()} == {512}
    assert calls(ctx) >= 298


def test_a_hybrids_plain_steps_compile_and_match_its_own_code():
    """A Qwen 3.5 of gated delta-nets and attention: its recurrent arrays go through the compiled step as
    they are; a verify whose per-step states are recorded (the CPU's rewind) runs the model's own code."""
    target = MlxModel(build_qwen35(0), VOCAB, "tiny-qwen3_5", n_ctx_train=512, options=ON)
    ours, ctx, _ = run(target, None, 0, 30)
    plain = MlxModel(build_qwen35(0), VOCAB, "tiny-qwen3_5", n_ctx_train=512, options=OFF)
    theirs, _, _ = run(plain, None, 0, 30)
    assert ours == theirs and calls(ctx) >= 28
    drafter = nearby("qwen3_5")
    spec, spec_ctx, _ = run(target, drafter, 2, 30)
    assert [t for t, _, _ in spec] == [t for t, _, _ in theirs]
    assert spec_ctx.snapshots.from_steps > 0  # rejected drafts undone from the verify's recorded states


class _Branching(qwen2.Model):
    """A model whose code reads its position as a number: it cannot be traced with the position an array."""

    def __call__(self, inputs, cache=None, **kwargs):  # type: ignore[override]
        if cache is not None and cache[0] is not None and cache[0].offset > 10**6:
            raise AssertionError("never that long")
        return super().__call__(inputs, cache=cache, **kwargs)


def test_a_buffer_never_grows_past_the_context():
    """A context of 300 positions: the buffers stop at 300, not at the doubling's 512."""
    target = MlxModel(build(0), VOCAB, "t", n_ctx_train=300, options=ON)
    written, ctx, _ = run(target, None, 0, 280)
    assert ctx.n_ctx == 300 and {c.keys.shape[2] for c in ctx.kv_cache()} == {300}
    assert written == run(MlxModel(build(0), VOCAB, "t", n_ctx_train=300, options=OFF), None, 0, 280)[0]


def test_a_model_that_will_not_trace_decodes_uncompiled_with_the_same_rows():
    mx.random.seed(0)
    module = _Branching(qwen2_args())
    module.update(build(0).parameters())
    target = MlxModel(module, VOCAB, "branching", options=ON)
    ctx = target.new_context()
    ctx.prefill(PROMPT)
    row = ctx.decode([5], all_logits=False)
    assert calls(ctx) == 0 and ctx.observers.compiled.enabled is False
    reference = MlxModel(build(0), VOCAB, "t", options=OFF).new_context()
    reference.prefill(PROMPT)
    np.testing.assert_array_equal(row, reference.decode([5], all_logits=False))


def test_what_is_not_compiled():
    """mlx-lm's ring for a sliding window (our contexts hold a WindowCache instead), a batch longer than a
    verify, a first decode (no buffers yet), a batch whose per-step states are recorded, and the option
    off: each is the model's own code (None)."""
    module = build(0)
    compiled = CompiledForward(module)
    one = mx.array([[5]], dtype=mx.uint32)
    assert compiled(one, [KVCache(), KVCache()]) is None  # no buffers before the first decode
    cache = make_prompt_cache(module)
    module(mx.array([PROMPT]), cache=cache)
    assert compiled(mx.zeros((1, 17), dtype=mx.uint32), cache) is None and cache[0].offset == len(PROMPT)
    assert compiled(one, [RotatingKVCache(max_size=8), *cache[1:]]) is None
    assert CompiledForward(module, enabled=False)(one, cache) is None
    hybrid = build_qwen35(0)
    states = make_prompt_cache(hybrid)
    hybrid(mx.array([PROMPT]), cache=states)
    steps = StepStates([])
    steps.arm(0, 2)  # a hybrid's verify recording its per-step states: hybrids wait, others need not
    try:
        assert CompiledForward(hybrid)(one, states) is None and states[1].offset == len(PROMPT)
        assert compiled(one, cache) is not None and cache[0].offset == len(PROMPT) + 1
    finally:
        steps.arm(-1, 0)
    assert CompiledForward(hybrid)(one, states) is not None and states[1].offset == len(PROMPT) + 1
    assert compiled(one, cache) is not None and cache[0].offset == len(PROMPT) + 2 and compiled.calls == 2


def test_the_option_resolves_by_device():
    """The default compiles (MLX's own attention on its CPU backend and Metal, our kernel on its CUDA
    build); the option overrides it either way."""
    assert MlxOptions().compiles() and ON.compiles() and not OFF.compiles()
    assert MlxOptions().attention() is None  # this CPU: MLX's own attention behind the mask


@pytest.mark.parametrize("kind", ["mtp", "eagle3", "dflash"])
def test_a_drafter_reading_the_target_has_its_verifies_compiled(tmp_path, kind):
    """An MTP head (the last layer), EAGLE-3 and DFlash (tapped layers) on an all-attention Qwen 3.5: the
    target's verify batches run compiled with the layers they read, and every round drafts, keeps and
    writes what it does with the model's own code."""
    pytest.importorskip("mlx_vlm")
    from mlx_targets import load_target
    from test_mlx_one_sync import pair

    def reply(target: MlxModel) -> tuple[list[tuple], list[list[int]], MlxContext]:
        ctx = target.new_context(max_rows=4)
        drafter = load(ctx)
        row, prefilled = ctx.prefill(PROMPT)
        drafter.prefill(PROMPT)
        cfg = GenerationConfig(max_tokens=24, depth=3)
        events = list(generate(ctx, drafter, FixedDepth(3), list(PROMPT), cfg, prefill=Prefill(prefilled, 0.0, row)))
        drafter.close()
        written = [(e.token_id, e.kind) for e in events if isinstance(e, TokenEvent)]
        return written, [e.draft_tokens for e in events if isinstance(e, RoundEvent)], ctx

    target, load = pair(tmp_path, kind)
    ours, drafts, ctx = reply(target)
    assert ctx.observers.compiled.lengths[4] > 0 and target.options.compiles()
    assert target.path is not None
    plain = load_target(target.path, OFF)
    theirs, their_drafts, plain_ctx = reply(plain)
    assert (ours, drafts) == (theirs, their_drafts) and plain_ctx.observers.compiled.calls == 0


@pytest.mark.parametrize("depth", [0, 3])
def test_a_compiled_step_attending_by_bounds_writes_what_its_mask_writes(depth):
    """On MLX's CUDA build the compiled step attends by each row's bounds (its kernel); here the same
    semantics in MLX's operations (cuda_attention.reference) stand in: a disagreeing pair writes the
    masked step's tokens, provenance and replaced drafts, every traced attention call routed there."""
    from engine.runtime.mlx.cuda_attention import reference

    routed: list[int] = []

    def attend(q: mx.array, k: mx.array, v: mx.array, scale: float, last: mx.array, window: int) -> mx.array:
        routed.append(window)
        return reference(q, k, v, scale, last, window)

    target, drafter = MlxModel(build(0), VOCAB, "t", options=ON), MlxModel(build(1), VOCAB, "d", options=ON)
    original = MlxModel.new_context

    def bounded(self: MlxModel, *args: object, **kwargs: object) -> MlxContext:
        ctx = original(self, *args, **kwargs)  # type: ignore[arg-type]
        ctx.observers.compiled.attend = attend  # type: ignore[attr-defined]
        return ctx

    MlxModel.new_context = bounded  # type: ignore[method-assign]
    try:
        ours, ctx, _ = run(target, drafter, depth, 36)
    finally:
        MlxModel.new_context = original  # type: ignore[method-assign]
    theirs, _, _ = run(
        MlxModel(build(0), VOCAB, "t", options=ON), MlxModel(build(1), VOCAB, "d", options=ON), depth, 36
    )
    assert ours == theirs
    assert calls(ctx) > 5
    assert set(routed) == {1 << 30}
    if depth:
        assert TokenKind.REPLACED in {kind for _, kind, _ in ours}


def test_routed_attention_leaves_every_other_call_to_mlx():
    """Only a mask a compiled slot noted goes to the bounds' attention; another mask, a string mask and
    attention with sinks go to MLX's own, and MLX's own is back after the trace."""
    from engine.runtime.mlx.cuda_attention import Bounds, fits, kernel, reference, routed

    q, k = mx.random.normal((1, 4, 2, 32)), mx.random.normal((1, 2, 8, 32))
    own = mx.fast.scaled_dot_product_attention
    bounds = Bounds()
    noted = bounds.note(mx.arange(8)[None] <= 3 + mx.arange(2)[:, None], mx.array(3), 1 << 30)
    other = mx.arange(8)[None] <= 3 + mx.arange(2)[:, None]
    seen: list[int] = []

    def attend(*args: object) -> mx.array:
        seen.append(1)
        return reference(*args)  # type: ignore[arg-type]

    with routed(bounds, attend):
        ours = mx.fast.scaled_dot_product_attention(q, k, k, scale=0.5, mask=noted)
        theirs = mx.fast.scaled_dot_product_attention(q, k, k, scale=0.5, mask=other)
        mx.fast.scaled_dot_product_attention(q, k, k, scale=0.5, mask="causal")
        mx.fast.scaled_dot_product_attention(q, k, k, scale=0.5, mask=noted, sinks=mx.zeros((4,)))
    assert seen == [1] and mx.fast.scaled_dot_product_attention is own and not bounds.made
    np.testing.assert_allclose(np.array(ours), np.array(theirs), rtol=1e-5, atol=1e-5)
    assert fits(q, k, k) and not fits(q[..., :16], k[..., :16], k[..., :16]) and not fits(q, k.astype(mx.float16), k)
    assert kernel(q[..., :16], k[..., :16], k[..., :16], 0.5, mx.array(3), 1 << 30) is None  # MLX's own then


def test_two_threads_tracing_at_once_take_turns_and_leave_mlxs_own_attention():
    """Two contexts tracing at once (two replies on `draftlight serve`): the second routing waits for the
    first, so neither puts back the other's function and MLX's own is in place after both."""
    import threading

    from engine.runtime.mlx.cuda_attention import Bounds, reference, routed

    own = mx.fast.scaled_dot_product_attention
    order: list[str] = []

    def second() -> None:
        with routed(Bounds(), reference):
            order.append("second")

    with routed(Bounds(), reference):
        thread = threading.Thread(target=second)
        thread.start()
        thread.join(timeout=0.3)
        assert thread.is_alive()  # waiting for the first trace's routing
        order.append("first")
    thread.join(timeout=5)
    assert order == ["first", "second"] and mx.fast.scaled_dot_product_attention is own
