"""mlx-vlm 0.7.10's own speculative generation on our prompt's token ids: its MTP, EAGLE-3 and DFlash rounds.

As its generate_step (mlx_vlm.generate.ar) runs them for one prompt: the target, mlx-vlm's own model
class on the folder's weights (a text-only folder's vision tower stays off), reads the whole prompt
in one pass (a drafter turns its chunked prefill off), asking for what the drafter reads
(speculative_prefill_kwargs: the last layer and the attention's keys and values for an MTP head,
chosen layers for EAGLE-3 and DFlash), and the first token is the argmax of its last row: the
prefill's time. Then run_speculative_rounds, to which generate_step hands the rest, drafts `depth`
tokens a round (a block of depth + 1; DFlash and DSpark no more than their trained block holds, as
ours) and writes the rest: the decode's. Greedy, as mlx-vlm's greedy rounds are: they take the
argmax of the whole vocabulary, so no end-of-generation id can be banned there; where one wins, this
arm writes it and the ruler reports the mismatch.
"""

from __future__ import annotations

import time
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
from mlx_vlm.models import cache as vlm_cache
from mlx_vlm.speculative.common import speculative_stats_since, speculative_stats_snapshot
from mlx_vlm.speculative.utils import run_speculative_rounds, speculative_prefill_kwargs

from engine.drafting import kinds
from engine.drafting.mlx.dflash import block_drafts
from engine.errors import IncompatibleDrafter
from engine.ruler.oracle_arms import ReferenceRun, per_position

# Our drafter kinds and the round loops mlx-vlm runs them with: a Gemma 4 assistant is its MTP kind, DSpark its DFlash.
DRAFT_KINDS = {
    kinds.MTP.name: "mtp",
    kinds.ASSISTANT.name: "mtp",
    kinds.EAGLE3.name: "eagle3",
    kinds.DFLASH.name: "dflash",
    kinds.DSPARK.name: "dflash",
}


def load_target(folder: Path, kind: str) -> nn.Module:
    """mlx-vlm's own model on an MLX folder's weights, as its load does (its language model runs the rounds).

    A text-only Gemma 4 folder (model_type gemma4_text) loads as mlx-vlm's text-only class, which takes
    the MTP loop's asks for the last layer and the keys and values and hands back neither; so for a
    drafter of the MTP kind (Gemma 4's assistant) its language model is mlx-vlm's Gemma 4 one, the class
    a published (multimodal) Gemma 4 folder runs on, with the same weights."""
    from mlx_vlm.utils import load_model

    model = load_model(Path(folder), strict=False)  # a text-only folder has no vision tower's weights
    if DRAFT_KINDS.get(kind) == "mtp" and getattr(model.config, "model_type", "") == "gemma4_text":
        model.language_model = _gemma4_language_model(Path(folder), model.language_model)
    return model


def _gemma4_language_model(folder: Path, text_only: nn.Module) -> nn.Module:
    """mlx-vlm's Gemma 4 language model (mlx_vlm.models.gemma4) on a text-only one's loaded weights."""
    import json

    from mlx.utils import tree_flatten
    from mlx_vlm.models.gemma4.config import TextConfig
    from mlx_vlm.models.gemma4.language import LanguageModel

    lm = LanguageModel(TextConfig.from_dict(json.loads((folder / "config.json").read_text())))
    try:
        lm.load_weights(tree_flatten(text_only.parameters()))
    except ValueError as e:
        raise IncompatibleDrafter(
            f"mlx-vlm's Gemma 4 language model, which its MTP rounds need, cannot take {folder.name}'s weights: {e}"
        ) from e
    return lm


def load_drafter(folder: Path, kind: str) -> nn.Module:
    """mlx-vlm's drafter module of `kind` (ours: engine.drafting.kinds) from `folder`: for MTP the target's own."""
    from mlx_vlm.speculative.drafters import load_drafter as vlm_load_drafter

    if kind not in DRAFT_KINDS:
        raise IncompatibleDrafter(f"mlx-vlm has no speculative loop for a drafter of kind {kind}.")
    drafter = vlm_load_drafter(str(folder), kind=DRAFT_KINDS[kind])[0]
    if kind == kinds.ASSISTANT.name or DRAFT_KINDS[kind] == "dflash":
        # Asked for a block past the assistant's configured one, mlx-vlm's MTP loop drafts the configured
        # block less one until deep drafts land often (its _effective_mtp_block_size); a DSpark folder whose
        # config says so (as published ones do) sizes each block from recent acceptance (its DFlash loop's
        # _dflash_next_block_size). Ours drafts the depth asked; this switch makes mlx-vlm do so too, so
        # each depth's arms do the same work.
        drafter.prefer_requested_block_size = True
    return drafter


def block_size(drafter: nn.Module, kind: str, depth: int) -> int:
    """The block mlx-vlm's rounds are asked for at `depth`: the last token and the drafts. For DFlash and
    DSpark, no more drafts than the block the drafter was trained on, as ours and llama.cpp draft
    (engine.drafting.mlx.dflash.block_drafts): asked for more, mlx-vlm runs a longer block than
    the drafter knows, so each depth's arms would not draft alike."""
    if DRAFT_KINDS[kind] == "dflash":
        depth = min(depth, block_drafts(drafter.config))
    return depth + 1


def greedy(logprobs: mx.array) -> mx.array:
    return mx.argmax(logprobs, axis=-1)


def mlx_vlm_run(
    model: nn.Module, drafter: nn.Module, kind: str, prompt: list[int], n_tokens: int, depth: int
) -> ReferenceRun:
    """`n_tokens` greedy tokens after `prompt` by mlx-vlm's rounds, `drafter` drafting `depth` tokens a round."""
    draft_kind = DRAFT_KINDS[kind]
    lm = model.language_model
    lm._position_ids = lm._rope_deltas = None  # as generate_step: no mRoPE state from an earlier run
    cache = vlm_cache.make_prompt_cache(lm)
    ids = mx.array([prompt], dtype=mx.int32)
    before = speculative_stats_snapshot(drafter)
    t0 = time.perf_counter()
    out = lm(ids, cache=cache, **speculative_prefill_kwargs(draft_kind, drafter))
    logits = out.logits[:, -1, :]
    logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
    steps = run_speculative_rounds(
        model, drafter, cache, ids, greedy(logprobs), logprobs.squeeze(0), out, draft_kind=draft_kind,
        max_tokens=n_tokens, sampler=greedy, draft_block_size=block_size(drafter, kind, depth),
        sampler_is_greedy=True,
    )  # fmt: skip
    tokens = [int(next(steps)[0])]  # the first token: the prefill's last row, evaluated
    t1 = time.perf_counter()
    tokens += [int(token) for token, _ in steps]
    t2 = time.perf_counter()
    rounds, accepted, drafted = speculative_stats_since(drafter, before)
    accept_lens, draft_lens = list(drafter.accept_lens), list(getattr(drafter, "draft_lens", []))
    acceptance = per_position(draft_lens, [int(a) for a in accept_lens]) if len(draft_lens) == len(accept_lens) else []
    return ReferenceRun(tokens, t1 - t0, t2 - t1, rounds or 0, drafted or 0, accepted or 0, acceptance)
