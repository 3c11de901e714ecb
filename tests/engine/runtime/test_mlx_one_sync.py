"""One host sync a greedy round for every MLX drafter that drafts for itself (the eval audit).

MTP heads, EAGLE-3, DFlash, DSpark and Gemma 4's assistant choose a greedy draft on the device,
each draft fed to the next step unread, and the verify takes the ids in as they stand: the
round waits for MLX once, in the verify, for its rows and the draft's tokens and rows together.
A draft read on the host (sampling, or a p_min that may end it early) waits a step at a time;
both ways give the same drafts, rows and tokens. Tiny random-weight folders written here
(mlx_targets.py, gemma4_targets.py); their drafts against mlx-vlm's are each kind's own test.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")
pytest.importorskip("mlx_vlm")

from gemma4_targets import write_assistant, write_gemma4  # noqa: E402
from mlx_targets import (  # noqa: E402
    N_TOKENS,
    PROMPT,
    load_target,
    plain,
    reply,
    write_dflash,
    write_dspark,
    write_eagle3,
    write_target,
)

from engine.depth import FixedDepth  # noqa: E402
from engine.drafting import kinds  # noqa: E402
from engine.drafting.base import Drafter, UnreadDraft  # noqa: E402
from engine.events import RoundEvent, TokenEvent  # noqa: E402
from engine.rounds import GenerationConfig, Prefill  # noqa: E402
from engine.runtime.mlx import MlxContext, MlxModel, MlxOptions  # noqa: E402
from engine.sampling import Sampler, SamplingConfig  # noqa: E402
from engine.speculative import generate  # noqa: E402

DEPTH = 3
KINDS = ["mtp", "eagle3", "dflash", "dspark", "assistant", "centroids"]
Load = Callable[[MlxContext], Drafter]


def pair(tmp: Path, kind: str) -> tuple[MlxModel, Load]:
    """A tiny target and a way to load the drafter of `kind` on a context of it."""
    if kind in ("assistant", "centroids"):  # centroids: a head that scores the tokens of 8 clusters alone
        target_folder = write_gemma4(tmp / "gemma4", 61)
        folder = write_assistant(tmp / "assistant", 161, target_folder, "copy", centroids=kind == "centroids")
        return MlxModel.load(target_folder, MlxOptions()), lambda ctx: _load(kinds.ASSISTANT, ctx, folder)
    if kind == "mtp":
        return load_target(write_target(tmp / "qwen35", 7, "noisy")), lambda ctx: _load(kinds.MTP, ctx, None)
    layers = 4 if kind == "eagle3" else 3
    target = load_target(write_target(tmp / "qwen35", 21, "random", layers=layers))
    if kind == "eagle3":  # a vocabulary of its own: its rows written into the target's on the device
        folder = write_eagle3(tmp / "eagle3", 12, 40)
        return target, lambda ctx: _load(kinds.EAGLE3, ctx, folder)
    if kind == "dflash":
        folder = write_dflash(tmp / "dflash", 121)
        return target, lambda ctx: _load(kinds.DFLASH, ctx, folder)
    folder = write_dspark(tmp / "dspark", 141)
    return target, lambda ctx: _load(kinds.DSPARK, ctx, folder)


def _load(kind: kinds.DrafterKind, ctx: MlxContext, folder: Path | None) -> Drafter:
    drafter = kinds.load(kind, ctx, folder, ctx.model.options, max_depth=DEPTH)
    assert drafter is not None
    return drafter


def replied(target: MlxModel, load: Load, p_min: float) -> tuple[list[TokenEvent], list[RoundEvent]]:
    """A greedy reply at DEPTH with `p_min` (above 0: each draft read on the host, a step at a time)."""
    ctx = target.new_context(max_rows=DEPTH + 1)
    drafter = load(ctx)
    row, prefilled = ctx.prefill(PROMPT)
    drafter.prefill(PROMPT)
    cfg = GenerationConfig(max_tokens=N_TOKENS, depth=DEPTH, p_min=p_min)
    events = list(generate(ctx, drafter, FixedDepth(DEPTH), list(PROMPT), cfg, prefill=Prefill(prefilled, 0.0, row)))
    drafter.close()
    return [e for e in events if isinstance(e, TokenEvent)], [e for e in events if isinstance(e, RoundEvent)]


@pytest.mark.parametrize("kind", KINDS)
def test_a_greedy_round_waits_for_mlx_once(tmp_path: Path, kind: str):
    """Every greedy round after the prompt's waits once, whatever the kind; the tokens are plain
    greedy decoding's, and drafts read on the host give the same drafts, provenance and tokens."""
    target, load = pair(tmp_path, kind)
    ours, rounds = reply(target, DEPTH, load)
    assert [e.token_id for e in ours] == plain(target, N_TOKENS)
    assert rounds[0].host_syncs is None and [r.host_syncs for r in rounds[1:]] == [1] * (len(rounds) - 1)
    assert any(r.drafted == DEPTH for r in rounds[1:])
    host, host_rounds = replied(target, load, p_min=1e-30)  # never ends a draft: read a step at a time
    assert [(e.token_id, e.kind) for e in host] == [(e.token_id, e.kind) for e in ours]
    assert [r.draft_tokens for r in host_rounds] == [r.draft_tokens for r in rounds]
    assert sum(r.host_syncs or 0 for r in host_rounds) > sum(r.host_syncs or 0 for r in rounds)


@pytest.mark.parametrize("kind", KINDS)
def test_a_draft_chosen_on_the_device_has_the_hosts_rows_and_keeps_the_ban(tmp_path: Path, kind: str):
    """The first draft after the prompt, chosen on the device and on the host (p_min above 0), with
    its first greedy token banned: the same tokens and the same rows, the banned one given none."""
    target, load = pair(tmp_path, kind)
    greedy = Sampler(SamplingConfig(temperature=0.0), target.n_vocab)

    def first_draft(p_min: float, banned: tuple[int, ...]) -> tuple[list[int], np.ndarray, bool]:
        ctx = target.new_context(max_rows=DEPTH + 1)
        drafter = load(ctx)
        row, _ = ctx.prefill(PROMPT)
        drafter.prefill(PROMPT)
        draft = drafter.draft([*PROMPT, int(row.argmax())], DEPTH, greedy, p_min, banned)
        on_device = isinstance(draft, UnreadDraft)
        assert draft.rows is not None
        tokens, rows = list(draft.tokens), np.array([draft.rows[i] for i in range(len(draft))])
        drafter.close()
        return tokens, rows, on_device

    first = first_draft(0.0, ())[0][0]
    device_tokens, device_rows, on_device = first_draft(0.0, (first,))
    host_tokens, host_rows, on_host = first_draft(1e-30, (first,))
    assert on_device and not on_host
    assert device_tokens == host_tokens and len(device_tokens) == DEPTH and first not in device_tokens
    assert np.array_equal(device_rows, host_rows) and np.all(device_rows[:, first] == -np.inf)


def test_a_centroid_heads_rows_are_mlx_vlms_with_their_floor_taken_on_the_device(tmp_path: Path):
    """mlx-vlm's MaskedEmbedder reads its floor on the host (`.item()`, a wait a draft step); ours
    keeps it on the device, and the rows are the same, bit for bit."""
    from engine.drafting.mlx.assistant import centroid_rows, load_assistant

    target = write_gemma4(tmp_path / "gemma4", 62)
    assistant = load_assistant(write_assistant(tmp_path / "assistant", 162, target, centroids=True))
    masked, weight = assistant.masked_embedding, assistant.model.embed_tokens.weight
    hidden = mx.random.normal((1, 3, weight.shape[-1]), key=mx.random.key(5))
    assert mx.array_equal(centroid_rows(masked, hidden, weight), masked(hidden, weight)).item()
