"""The MLX runtime behind the runtime protocol: the same round (engine.speculative) and the same draft
model (ModelDrafter) on mlx-lm's own model classes, against MLX's forward pass and mlx-lm's own
speculative decoding. Fast: tiny random-weight qwen2 models built here, on MLX's CPU backend."""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")

from mlx.utils import tree_flatten  # noqa: E402
from mlx_lm.generate import speculative_generate_step  # noqa: E402
from mlx_lm.models import mamba, qwen2  # noqa: E402

from engine import speculative  # noqa: E402
from engine.cli import summary  # noqa: E402
from engine.depth import FixedDepth  # noqa: E402
from engine.drafting import ModelDrafter  # noqa: E402
from engine.errors import Cancelled, RuntimeFailure  # noqa: E402
from engine.events import RoundEvent, RunStats, TokenEvent, TokenKind  # noqa: E402
from engine.rounds import GenerationConfig, Prefill  # noqa: E402
from engine.runtime.mlx import MlxContext, MlxModel, MlxOptions  # noqa: E402
from engine.runtime.protocol import Acceleration  # noqa: E402
from engine.sampling import softmax_parts  # noqa: E402
from engine.speculative import generate  # noqa: E402

VOCAB = 97
PROMPT = [3, 14, 15, 92, 65, 35, 89, 79, 32, 38]
N_TOKENS = 32
A, R, B, P = TokenKind.ACCEPTED, TokenKind.REPLACED, TokenKind.BONUS, TokenKind.PLAIN
# A batch of rows against as many one-row decodes: on MLX's CPU backend they came out bit-identical
# (a difference of 0.0 measured); the bound leaves room for another backend's reductions.
BATCH_TOLERANCE = 1e-4


def qwen2_args() -> qwen2.ModelArgs:
    return qwen2.ModelArgs(
        model_type="qwen2",
        hidden_size=64,
        num_hidden_layers=2,
        intermediate_size=128,
        num_attention_heads=4,
        rms_norm_eps=1e-6,
        vocab_size=VOCAB,
        num_key_value_heads=2,
        max_position_embeddings=512,
    )


def build(seed: int) -> qwen2.Model:
    """A tiny qwen2 with random weights, the same for the same seed."""
    mx.random.seed(seed)
    module = qwen2.Model(qwen2_args())
    mx.eval(module.parameters())
    return module


@pytest.fixture(scope="module")
def target() -> MlxModel:
    return MlxModel(build(0), VOCAB, "target")


def tokens(events: list) -> list[TokenEvent]:
    return [e for e in events if isinstance(e, TokenEvent)]


def reply(target: MlxModel, drafter_model: MlxModel | None, depth: int, n_tokens: int = N_TOKENS, top: int = 0) -> list:
    """One reply's events, as tests/engine/test_round_fast.py's `reply` runs it: prefill, then the rounds."""
    ctx = target.new_context(max_rows=7)
    drafter = ModelDrafter(drafter_model, max_depth=6) if drafter_model is not None else None
    first_row, prefilled = ctx.prefill(PROMPT)
    if drafter is not None:
        drafter.prefill(PROMPT)
    cfg = GenerationConfig(max_tokens=n_tokens, depth=depth, top_candidates=top)
    policy = FixedDepth(depth)
    prefill = Prefill(prefilled, 0.0, first_row)
    events = list(generate(ctx, drafter, policy, list(PROMPT), cfg, prefill=prefill))
    assert ctx.tokens == [*PROMPT, *[t.token_id for t in tokens(events)]][:-1]  # rewound to what was kept
    return events


def test_options_ask_for_no_acceleration_and_a_test_model_has_no_tokenizer(target):
    assert target.options.acceleration() == Acceleration()
    assert target.eog_tokens() == () and not target.is_eog(0)
    assert target.piece(42) == b"<42>"
    ctx = target.new_context(max_rows=5)
    assert isinstance(ctx, MlxContext) and ctx.acceleration == Acceleration()
    assert not ctx.has_state and ctx.can_rewind and ctx.rollback_depth == 4
    assert ctx.device_choices() is None and ctx.device_parts(np.zeros((1, VOCAB))) is None and not ctx.keeps_rows
    assert ctx.n_ctx == 512  # the model's own limit, under the options' 4,096


def test_rows_are_the_models_own_forward_pass(target):
    ctx = target.new_context(max_rows=len(PROMPT))
    rows = ctx.decode(PROMPT, all_logits=True)
    own = target.module(mx.array(PROMPT)[None])[0]  # no cache: the plain forward pass
    assert rows.dtype == np.float32 and rows.shape == (len(PROMPT), VOCAB)
    np.testing.assert_allclose(rows, np.array(own), rtol=0, atol=BATCH_TOLERANCE)
    assert ctx.tokens == PROMPT and ctx.n_past == len(PROMPT) and ctx.decode_s > 0


def test_a_batch_of_rows_equals_as_many_one_row_decodes(target):
    batch = target.new_context(max_rows=len(PROMPT)).decode(PROMPT, all_logits=True)
    single = target.new_context()
    one_by_one = np.concatenate([single.decode([t], all_logits=False) for t in PROMPT])
    assert np.abs(batch - one_by_one).max() <= BATCH_TOLERANCE
    assert list(batch.argmax(axis=1)) == list(one_by_one.argmax(axis=1))


def test_rewind_then_decode_again_gives_the_same_rows(target):
    ctx = target.new_context(max_rows=5)
    ctx.decode(PROMPT[:6], all_logits=False)
    before = ctx.decode(PROMPT[6:], all_logits=True)
    ctx.rewind(6)
    assert ctx.tokens == PROMPT[:6]
    again = ctx.decode(PROMPT[6:], all_logits=True)
    np.testing.assert_array_equal(again, before)
    ctx.rewind(3)  # further back than one batch: a KV cache trims any suffix
    ctx.decode(PROMPT[3:6], all_logits=False)
    np.testing.assert_array_equal(ctx.decode(PROMPT[6:], all_logits=True), before)


def test_prefill_sync_feed_and_collect_keep_the_contract(target):
    ctx = target.new_context(max_rows=3)
    row, decoded = ctx.prefill(PROMPT)
    assert decoded == len(PROMPT) and row.shape == (VOCAB,)
    again, decoded = ctx.prefill(PROMPT)  # the same prompt: its pass's row, nothing decoded
    assert decoded == 0 and np.array_equal(again, row) and ctx.tokens == PROMPT
    assert ctx.sync([*PROMPT[:4], 7, 8]) == 2 and ctx.tokens == [*PROMPT[:4], 7, 8]
    ctx.feed([9])
    assert ctx.unread
    fed = ctx.collect()
    assert not ctx.unread and fed.shape == (1, VOCAB)
    with pytest.raises(RuntimeFailure):
        ctx.collect()
    with pytest.raises(ValueError):
        ctx.decode([1, 2, 3, 4], all_logits=True)  # more rows than the context was made for
    ctx.clear()
    assert ctx.tokens == [] and ctx.n_past == 0
    ctx.close()
    with pytest.raises(RuntimeFailure, match="closed"):
        ctx.decode([1], all_logits=False)


def test_a_long_prefill_stops_between_chunks_when_cancelled():
    model = MlxModel(build(0), VOCAB, "target", options=MlxOptions(prefill_chunk=4))
    ctx = model.new_context()
    asked = []

    def cancelled() -> bool:
        asked.append(ctx.n_past)
        return len(asked) > 2  # the third chunk's check says stop

    with ctx.stoppable(cancelled), pytest.raises(Cancelled):
        ctx.decode(PROMPT, all_logits=False)
    assert ctx.tokens == PROMPT[:8] and asked == [0, 4, 8]  # the chunks done stay in the cache


def test_a_folder_saved_and_loaded_back_gives_identical_rows(target, tmp_path: Path):
    """config.json + model.safetensors, no tokenizer: mlx-lm's load() needs one (transformers makes it
    from the folder's files), so MlxModel loads the weights alone through mlx_lm.utils.load_model."""
    mx.save_safetensors(str(tmp_path / "model.safetensors"), dict(tree_flatten(target.module.parameters())))
    (tmp_path / "config.json").write_text(json.dumps(asdict(qwen2_args())))
    loaded = MlxModel.load(tmp_path)
    assert loaded.n_vocab == VOCAB and loaded.name == tmp_path.name and loaded.tokenizer is None
    mine = target.new_context(max_rows=len(PROMPT)).decode(PROMPT, all_logits=True)
    theirs = loaded.new_context(max_rows=len(PROMPT)).decode(PROMPT, all_logits=True)
    np.testing.assert_array_equal(theirs, mine)


def test_a_recurrent_model_rewinds_from_a_snapshot_of_its_state():
    """A mamba's state cannot be trimmed (mlx-lm's own speculative decoding refuses it): the context
    keeps it before each batch (engine.runtime.mlx.snapshots); tests/engine/runtime/test_mlx_hybrid.py
    speculates on it and on a hybrid."""
    mx.random.seed(0)
    args = mamba.ModelArgs(
        model_type="mamba",
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        state_size=8,
        num_hidden_layers=1,
        conv_kernel=4,
        use_bias=False,
        use_conv_bias=True,
        time_step_rank=4,
    )
    model = MlxModel(mamba.Model(args), VOCAB, "tiny-mamba", n_ctx_train=512)
    ctx, fresh = model.new_context(max_rows=3), model.new_context(max_rows=3)
    assert ctx.has_state and ctx.rollback_depth == 2 and ctx.can_rewind
    assert "undone from the state kept before its verify batch" in ctx.describe_rollback()
    ctx.decode(PROMPT[:6], all_logits=False)
    ctx.decode(PROMPT[6:9], all_logits=True)
    ctx.rewind(7)  # inside the latest batch: from its snapshot
    fresh.decode(PROMPT[:7], all_logits=False)
    np.testing.assert_array_equal(ctx.decode([9], all_logits=True), fresh.decode([9], all_logits=True))
    ctx.rewind(4)  # before it: the state starts again from the kept tokens
    assert ctx.tokens == PROMPT[:4] and ctx.rewinds_replayed == 1
    ctx.rewind(0)  # back to nothing: a fresh cache, which any layer can start
    assert ctx.tokens == []


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_the_model_drafting_for_itself_writes_what_it_writes_alone(target, depth):
    plain = [t.token_id for t in tokens(reply(target, None, 0))]
    events = reply(target, MlxModel(build(0), VOCAB, "drafter"), depth)
    assert [t.token_id for t in tokens(events)] == plain
    kinds = [t.kind for t in tokens(events)]
    # every draft accepted, then the bonus; the last rounds draft what room is left (none: plain)
    expected, written = [P], 1
    while written < N_TOKENS:
        k = min(depth, N_TOKENS - written - 1)
        expected += [A] * k + [B if k else P]
        written += k + 1
    assert kinds == expected
    stats = events[-1]
    assert isinstance(stats, RunStats) and stats.generated_tokens == N_TOKENS


def expected_kinds(written: list[int], drafter: MlxModel, depth: int) -> list[TokenKind]:
    """Each token's provenance from the plain reply and the drafter's own greedy chain, round by round."""
    history, kinds, pos = [*PROMPT, written[0]], [P], 1
    while pos < len(written):
        k = min(depth, len(written) - pos - 1)
        ctx = drafter.new_context()
        proposed = []
        row = ctx.decode(history, all_logits=False)
        for _ in range(k):
            proposed.append(int(row[-1].argmax()))
            row = ctx.decode(proposed[-1:], all_logits=False)
        kept = 0
        while kept < k and proposed[kept] == written[pos + kept]:
            kept += 1
        kinds += [A] * kept + ([B] if kept == k and k else [R] if k else [P])
        pos += kept + 1
        history = [*PROMPT, *written[:pos]]
    return kinds[: len(written)]


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_a_drafter_that_disagrees_changes_nothing_but_the_provenance(target, depth):
    plain = [t.token_id for t in tokens(reply(target, None, 0))]
    other = MlxModel(build(1), VOCAB, "other")
    events = reply(target, other, depth)
    assert [t.token_id for t in tokens(events)] == plain
    kinds = [t.kind for t in tokens(events)]
    assert kinds == expected_kinds(plain, other, depth)
    assert R in kinds  # a different model's drafts are refused somewhere
    for t in tokens(events):
        if t.kind is R:
            assert t.rejected_id is not None and t.rejected_id != t.token_id


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("depth", [2, 3])
def test_the_same_tokens_and_drafts_as_mlx_lms_own_speculative_decoding(target, seed, depth):
    """mlx-lm's speculative_generate_step drafts `num_draft_tokens` a round (as many as are left to
    write, at most) from the prompt's last token; our round 0 is the prompt's own row, so it is
    given the prompt and our first token: then its rounds are ours, and its from_draft tokens our
    ACCEPTED ones. Our last rounds draft fewer to leave room for the bonus: compared before them."""
    drafter = MlxModel(build(seed), VOCAB, "drafter")
    ours = tokens(reply(target, drafter, depth))
    prompt = mx.array([*PROMPT, ours[0].token_id])
    steps = speculative_generate_step(
        prompt, target.module, drafter.module, num_draft_tokens=depth, max_tokens=N_TOKENS + depth
    )
    theirs = [(int(t), bool(from_draft)) for t, _, from_draft in steps]
    compared = N_TOKENS - depth - 2  # ours[1 : N_TOKENS - depth - 1]: the rounds drafted at full depth
    assert [t for t, _ in theirs[:compared]] == [e.token_id for e in ours[1 : 1 + compared]]
    assert [d for _, d in theirs[:compared]] == [e.kind is A for e in ours[1 : 1 + compared]]
    if seed == 0:  # the target drafting for itself: `depth` drafts kept, then the bonus, every round
        assert [d for _, d in theirs[:compared]] == [i % (depth + 1) != depth for i in range(compared)]


def test_a_folder_with_a_tokenizer_loads_through_mlx_lm_and_spells_bytes(tmp_path: Path):
    """A byte-level BPE trained here (tokenizers) beside the weights: mlx_lm.utils.load takes the folder
    whole; end of generation is the tokenizer's end of sequence, and each token's piece is its bytes,
    half a UTF-8 character too."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, pre_tokenizers, trainers

    bpe = tokenizers.Tokenizer(tokenizers.models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=280, initial_alphabet=alphabet, special_tokens=["<|endoftext|>"])
    bpe.train_from_iterator(["héllo world, the mill on the river"] * 20, trainer)
    bpe.save(str(tmp_path / "tokenizer.json"))
    settings = {"eos_token": "<|endoftext|>", "tokenizer_class": "PreTrainedTokenizerFast"}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(settings))
    args = qwen2_args()
    args.vocab_size = bpe.get_vocab_size()
    mx.random.seed(0)
    module = qwen2.Model(args)
    mx.save_safetensors(str(tmp_path / "model.safetensors"), dict(tree_flatten(module.parameters())))
    (tmp_path / "config.json").write_text(json.dumps(asdict(args)))

    model = MlxModel.load(tmp_path)
    assert model.tokenizer is not None and model.n_vocab == args.vocab_size
    eos = bpe.token_to_id("<|endoftext|>")
    assert model.eog_tokens() == (eos,) and model.is_eog(eos) and model.piece(eos) == b""
    ids = model.tokenize("héllo world")
    assert b"".join(model.piece(t) for t in ids) == "héllo world".encode()
    half = bpe.token_to_id("Ã")  # the byte 0xC3: the first half of "é"
    assert model.piece(half) == b"\xc3"
    ctx = model.new_context()
    assert ctx.decode(ids, all_logits=False).shape == (1, args.vocab_size)


def test_the_devices_argmax_takes_each_rows_own_token_and_writes_the_same_reply(target):
    """MlxOptions(argmax_on_device=True) (a GPU's default) on MLX's CPU backend: each row's greedy token
    is the row's own argmax, a banned one left to the host's scan, and the reply's ids and provenance
    are those the host's argmax gives; each row's softmax parts come from the device's normaliser,
    a banned token's terms taken out, and give the probabilities the host's pass over the row gives."""
    on_device = MlxModel(target.module, VOCAB, "target", options=MlxOptions(argmax_on_device=True))
    assert on_device.options.acceleration() == Acceleration(argmax_on_device=True)
    ctx = on_device.new_context(max_rows=len(PROMPT))
    rows = ctx.decode(PROMPT, all_logits=True)
    tops = [int(t) for t in rows.argmax(axis=1)]
    assert ctx.device_choices() == tops
    assert ctx.device_choices((tops[0],)) == [None if t == tops[0] else t for t in tops]
    banned = next(t for t in range(VOCAB) if t not in tops)  # no row's own token: every row has parts
    parts = ctx.device_parts(rows, (banned,))
    assert parts is not None and len(parts) == len(rows)
    for row, part in zip(rows, parts, strict=True):
        host = row.copy()
        host[banned] = -np.inf
        assert part == pytest.approx(softmax_parts(host), rel=1e-5)
    for depth in (0, 3):
        ours, theirs = tokens(reply(on_device, on_device, depth)), tokens(reply(target, target, depth))
        assert [(t.token_id, t.kind) for t in ours] == [(t.token_id, t.kind) for t in theirs]
        assert [t.target_prob for t in ours] == pytest.approx([t.target_prob for t in theirs], rel=1e-5)


def test_a_drafts_softmax_parts_taken_on_the_device_give_the_hosts_probabilities(target, monkeypatch):
    """Where the device takes a draft chain's softmax parts (a GPU's way), each drafted row's parts
    come back in the verify's one wait and the reply's draft and target probabilities are those the
    host's passes over the rows give; the same tokens and provenance."""
    from engine.runtime.mlx import chain

    host = tokens(reply(target, target, 3))
    monkeypatch.setattr(chain, "parts_on_device", lambda: True)
    on_device = MlxModel(target.module, VOCAB, "target", options=MlxOptions(argmax_on_device=True))
    events = reply(on_device, on_device, 3)
    ours = tokens(events)
    assert [(t.token_id, t.kind) for t in ours] == [(t.token_id, t.kind) for t in host]
    drafted = [i for i, t in enumerate(host) if t.draft_prob is not None]
    assert drafted and [i for i, t in enumerate(ours) if t.draft_prob is not None] == drafted
    assert [ours[i].draft_prob for i in drafted] == pytest.approx([host[i].draft_prob for i in drafted], rel=1e-5)
    assert [t.target_prob for t in ours] == pytest.approx([t.target_prob for t in host], rel=1e-5)
    assert all(r.host_syncs == 1 for r in events if isinstance(r, RoundEvent) and not r.from_prefill)


def test_a_greedy_reply_with_the_devices_parts_copies_no_row_to_the_host(target, monkeypatch):
    """Where the device takes each row's argmax and softmax parts (a GPU's way), a greedy round reads
    nothing of the target's or the draft's rows: plain and drafted replies copy no row to the host
    (on MLX's CUDA build each read moves the row's buffer), and their ids, provenance and
    probabilities are exactly those of the same reply with teaching mode's alternatives, which read
    the rows (and copy them); drafted tokens' probabilities included."""
    from engine.runtime.mlx import audit, chain, context, hostrows

    left: list[int] = []  # the rows of each decode left on the device: its row count

    class Counted(hostrows.UnreadRows):
        def __init__(self, rows: mx.array) -> None:
            super().__init__(rows)
            left.append(len(self))

    monkeypatch.setattr(chain, "parts_on_device", lambda: True)
    monkeypatch.setattr(context, "UnreadRows", Counted)
    on_device = MlxModel(target.module, VOCAB, "target", options=MlxOptions(argmax_on_device=True))
    for depth in (0, 3):
        left.clear()
        before = audit.copies()
        lean = tokens(reply(on_device, on_device, depth))
        assert audit.copies() == before
        assert len(left) == len(lean) - 1 if depth == 0 else len(left) > 0 and max(left) == depth + 1
        left.clear()
        read = tokens(reply(on_device, on_device, depth, top=3))
        assert not left and all(t.target_top for t in read)  # the rows read: none left on the device
        assert audit.copies() > before if depth else audit.copies() == before  # the draft's, then copied
        seen = [(t.token_id, t.kind, t.target_prob, t.draft_prob) for t in read]
        assert [(t.token_id, t.kind, t.target_prob, t.draft_prob) for t in lean] == seen
        assert depth == 0 or any(t.draft_prob is not None for t in lean)


def test_the_eval_audit_counts_each_rounds_host_syncs(target):
    """A round waits for MLX once: a plain round for its decode; a draft model's for its verify, which
    takes the chain of drafts in unread and brings back their tokens and rows with its own. The
    reply's total is the rounds' sum; the prefill's round waits for nothing."""
    for drafter, depth, per_round in ((None, 0, 1), (target, 3, 1)):
        events = reply(target, drafter, depth)
        rounds = [e for e in events if isinstance(e, RoundEvent)]
        assert rounds[0].from_prefill and rounds[0].host_syncs is None
        assert [r.host_syncs for r in rounds[1:]] == [per_round] * (len(rounds) - 1)
        stats = events[-1]
        assert isinstance(stats, RunStats) and stats.host_syncs == per_round * stats.rounds
        assert stats.to_json()["host_syncs"] == stats.host_syncs
        assert re.search(r"; host [\d.]+ ms and 1\.0 syncs a round; max_tokens\]$", summary(stats))


def test_plain_greedy_decoding_launches_each_step_on_the_devices_guess(target, monkeypatch):
    """A greedy plain reply (depth 0) runs as mlx-lm's generate_step: each decode launches the next step
    on the device's argmax before its one wait, and the next round finds that step launched; the
    tokens are one-at-a-time greedy decoding's, one host sync a round."""
    from engine.runtime.mlx import ahead

    taken: list[bool] = []
    take = ahead.take
    monkeypatch.setattr(ahead, "take", lambda ctx, toks: taken.append(ctx.ahead is not None) or take(ctx, toks))
    host_softmax: list[int] = []
    softmax_at = speculative.softmax_at
    monkeypatch.setattr(speculative, "softmax_at", lambda *a: host_softmax.append(a[1]) or softmax_at(*a))
    events = reply(target, None, 0)
    seen = list(taken)
    rounds = [e for e in events if isinstance(e, RoundEvent)]
    ctx = target.new_context()
    row, _ = ctx.prefill(PROMPT)
    plain, probs = [int(row.argmax())], [softmax_at(row, int(row.argmax()))]
    while len(plain) < N_TOKENS:
        row = ctx.decode([plain[-1]], all_logits=False)[-1]
        plain.append(int(row.argmax()))
        probs.append(softmax_at(row, plain[-1]))
    assert [t.token_id for t in tokens(events)] == plain
    # A launched step's argmax and probability are the device's (its softmax parts), on this CPU too: the
    # host's pass over a row is the prompt's row and the first decode's alone, launched before any guess.
    assert host_softmax == plain[:2]
    assert [t.target_prob for t in tokens(events)] == pytest.approx(probs, rel=1e-5)
    assert [r.host_syncs for r in rounds[1:]] == [1] * (N_TOKENS - 1)
    # Round 1 launches the first step ahead; every later round takes the one launched before it.
    assert seen == [False, False] + [True] * (N_TOKENS - 2)  # the prompt's decode, then the rounds


@pytest.mark.parametrize("then", ["another token", "a rewind", "the guess banned"])
def test_a_step_launched_on_a_wrong_guess_leaves_the_cache_as_if_never_launched(target, then):
    """Where the next decode is not the guessed step (another token, a rewind, or the guess banned
    so the device guesses its runner-up), the cache and rows are a context's that never guessed."""
    fresh, ctx = target.new_context(max_rows=2), target.new_context(max_rows=2)
    first, _ = [int(c.decode(PROMPT, all_logits=False)[-1].argmax()) for c in (fresh, ctx)]
    want = fresh.decode([first], all_logits=True)[0].copy()
    best = int(want.argmax())
    ctx.pipeline_greedy((best,) if then == "the guess banned" else ())
    assert np.array_equal(ctx.decode([first], all_logits=True)[0], want) and ctx.ahead is not None
    if then == "a rewind":
        fresh.rewind(len(PROMPT))
        ctx.rewind(len(PROMPT))
        nxt = first
    else:
        nxt = (best + 1) % VOCAB if then == "another token" else int(np.argsort(want)[-2])
    assert np.array_equal(ctx.decode([nxt], all_logits=True), fresh.decode([nxt], all_logits=True))
    assert ctx.tokens == fresh.tokens and ctx.ahead is None
    assert [c.kv_cache()[0].offset for c in (ctx, fresh)] == [len(fresh.tokens)] * 2


def test_the_ban_is_added_on_the_device_for_the_one_decode_that_asked(target):
    """ban_in_rows: the next decode's rows come back with the ban's -inf and every other logit as
    it was, the host writing nothing; the step it launched on its banned guess, taken by a decode
    that asked for no ban, hands back its rows unbanned."""
    fresh, ctx = target.new_context(max_rows=2), target.new_context(max_rows=2)
    first, _ = [int(c.decode(PROMPT, all_logits=False)[-1].argmax()) for c in (fresh, ctx)]
    want = fresh.decode([first], all_logits=True)[0].copy()
    best = int(want.argmax())
    ctx.pipeline_greedy((best,))
    assert ctx.ban_in_rows((best,))
    got = ctx.decode([first], all_logits=True)[0]
    assert got[best] == -np.inf and np.array_equal(np.delete(got, best), np.delete(want, best))
    guess = int(np.argsort(want)[-2])  # the device's guess with `best` banned
    assert ctx.ahead is not None and int(ctx.ahead.guess.item()) == guess
    assert np.array_equal(ctx.decode([guess], all_logits=True), fresh.decode([guess], all_logits=True))
    assert ctx.tokens == fresh.tokens and ctx.ahead is None
