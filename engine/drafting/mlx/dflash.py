"""DFlash and DSpark on MLX: a whole block of drafts in one pass over the target's layers, as mlx-vlm runs it.

The drafter is mlx-vlm's DFlashDraftModel (Qwen 3's DFlash checkpoints) or its DSparkDraftModel
(DFlash with a Markov head; Gemma4DSparkDraftModel for Gemma 4 targets), loaded from its own
folder; it borrows the target's embeddings and head where it brings none of its own. Every batch the target decodes hands over
the outputs of its layers `target_layer_ids`, side by side (engine.runtime.mlx.hidden taps them).
A draft is one non-causal pass over [last token, MASK, ...]: the states of the positions its cache
lacks go in first, as context whose keys and values it keeps, and each MASK slot answers with the
token at its position. As mlx-vlm 0.7.10's `_dflash_rounds`: the context grows by the verified
positions each round, and the block itself leaves nothing in the cache.

DSpark's block differs in two ways, as its `draft_block` has it: with `sample_from_anchor` the last
token's slot drafts too (one MASK fewer), and each slot's row gains the Markov head's word on the
token before it (the last token, then the previous draft), so the rows are read one after another.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from engine.depth import MAX_DEPTH
from engine.drafting import kindnames
from engine.drafting.base import Draft, OnTarget, UnreadDraft, VerifyBatch, choose_draft
from engine.drafting.mlx.heads import TargetStates
from engine.errors import IncompatibleDrafter
from engine.runtime.mlx import audit
from engine.runtime.mlx.chain import UnreadIds, ban_row, pick
from engine.runtime.mlx.context import MlxContext, decode_errors
from engine.runtime.mlx_check import check_folder, loader_errors
from engine.sampling import Sampler


def load_dflash(folder: Path) -> nn.Module:
    """A DFlash or DSpark drafter's MLX folder, through mlx-vlm's loader."""
    from mlx_vlm.speculative.drafters import DFlashDraftModel, DSparkDraftModel, load_drafter

    check_folder(folder, "a DFlash drafter", IncompatibleDrafter)  # nothing unchecked reaches mlx-vlm
    with loader_errors(folder, "mlx-vlm", IncompatibleDrafter, "a DFlash drafter"):
        model, _ = load_drafter(str(folder), "dflash")
    from mlx_vlm.speculative.drafters.gemma4_dspark import Gemma4DSparkDraftModel

    if type(model) not in (DFlashDraftModel, DSparkDraftModel, Gemma4DSparkDraftModel):
        raise IncompatibleDrafter(
            f"{folder.name} is a {type(model).__name__}; the MLX runtime drafts with DFlash's and DSpark's own "
            "models alone yet."
        )
    return model


def block_drafts(config: Any) -> int:
    """The most drafts one pass proposes: the block the drafter was trained on, less the last token's slot.

    mlx-vlm's `block_size` is its verify width, the last token and the drafts: a DFlash checkpoint's own
    (the last token's slot then MASKs), and for DSpark the checkpoint's block plus one, since a DSpark
    checkpoint's block (7 in DeepSeek's `block7`) counts its proposals (`proposal_length`): with
    `sample_from_anchor` its block is [last token, MASK x 6] and every slot drafts. llama.cpp's
    draft-dflash and draft-dspark clamp a deeper ask to the same count ("exceeds the trained block
    size"). Asked for more (`draft_block_size`), mlx-vlm's loop runs a longer block than the drafter was
    trained on, and since the block's attention is not causal, every draft in it changes."""
    return int(config.block_size) - 1


class MlxDflashDrafter(OnTarget[MlxContext]):
    """A DFlash or DSpark drafter for an MLX target, reading the target's chosen layers."""

    has_distribution = True
    needs_hidden_states = True
    # Set by reset() and kept by _trim(): the drafter's cache, the positions it holds as context,
    # and the target's layers handed over for the positions it does not hold yet.
    _cache: list[Any]
    _context: int
    _states: TargetStates

    def __init__(
        self, target: MlxContext, drafter: nn.Module, max_depth: int = MAX_DEPTH, name: str = "", source: str = ""
    ) -> None:
        config = drafter.config
        parts = target.observers.parts
        if int(config.hidden_size) != parts.width:
            raise IncompatibleDrafter(
                f"the DFlash drafter is {config.hidden_size} wide, and {target.model.name} is {parts.width} wide: "
                "it was trained for another target."
            )
        self.mask = int(config.mask_token_id)
        if not 0 <= self.mask < target.model.n_vocab:
            raise IncompatibleDrafter(
                f"the DFlash drafter's mask token {self.mask:,} is outside {target.model.name}'s vocabulary: "
                "it was trained for another target."
            )
        self.markov = getattr(drafter, "markov_head", None)  # DSpark's
        self.kind = kindnames.DSPARK if self.markov is not None else kindnames.DFLASH
        variant = "DSpark" if self.markov is not None else "DFlash"
        if self.markov is not None and int(config.vocab_size) != target.model.n_vocab:
            raise IncompatibleDrafter(
                f"the DSpark drafter's Markov head knows {config.vocab_size:,} tokens, and {target.model.name} "
                f"has {target.model.n_vocab:,}: it was trained for another target."
            )
        if self.markov is not None and int(config.num_target_layers) != len(parts.layers):
            raise IncompatibleDrafter(
                f"the DSpark drafter was trained on a target of {config.num_target_layers} layers, and "
                f"{target.model.name} has {len(parts.layers)}: it was trained for another target."
            )
        if any(getattr(layer.self_attn, "use_k_eq_v", False) for layer in drafter.layers):
            raise IncompatibleDrafter(
                f"the {variant} drafter's layers have one projection for its keys and values, and mlx-vlm "
                "0.7.10's DFlash pass asks each layer for a value projection of its own: it cannot run it."
            )
        self.anchor = self.markov is not None and bool(config.sample_from_anchor)  # the last token's slot drafts
        self.layers = [int(i) for i in config.target_layer_ids]
        from mlx_vlm.speculative.drafters import DFlashDraftModel

        # DFlash's own bind: DSpark's asks the target for mlx-vlm's rollback hook, which the round does itself.
        own_head = drafter.lm_head  # Gemma 4's DSpark brings its own embeddings and head, and keeps them
        self.drafter = DFlashDraftModel.bind(drafter, target.model.module)
        if own_head is not None:
            self.drafter.lm_head = own_head
        self.target, self.name = target, name or f"{variant} drafter"
        self.who = f"the {self.name} in {source}" if source else self.name  # named where one of its passes fails
        self.max_depth = min(max_depth, block_drafts(config))
        self.decode_s = 0.0
        self.ctx = self  # the round counts the drafter's time inside MLX as its own
        self._dtype = parts.inner.embed_tokens.weight.dtype
        self._rows = np.empty((self.max_depth, target.model.n_vocab), dtype=np.float32)
        self._untap = target.observers.tap_layers(self.layers)  # refuses a layer the target lacks
        self.reset()
        self._stop = target.observe_batches(self._seen, hidden_states=False)

    def _seen(self, tokens: list[int], start: int, hidden: np.ndarray | None) -> None:
        taps = self.target.observers.layer_out
        self._states.add(start, mx.concatenate([taps[i][0] for i in self.layers], axis=1))  # evaluated (BatchTaps)

    def prefill(self, history: list[int]) -> None:
        """The target's prefill handed its layers over; the drafter takes them in at the first draft."""
        self._states.held(self._context, len(history) - 1)

    def failing(self) -> AbstractContextManager[None]:
        return decode_errors(self.who)

    def _draft(self, history: list[int], k: int, sampler: Sampler, p_min: float, banned: tuple[int, ...]) -> Draft:
        t0 = time.perf_counter()
        end = len(history) - 1  # the block's first slot is the last token's position
        self._trim(min(self._context, end))
        context = self._states.held(self._context, end)[None].astype(self._dtype)
        block = mx.array([[history[-1]] + [self.mask] * (k - self.anchor)], dtype=mx.int32)
        d = self.drafter
        logits = d._logits(d._hidden(block, context, self._cache)[:, 0 if self.anchor else 1 :])[0].astype(mx.float32)
        self._context = end
        if sampler.greedy and p_min <= 0.0:
            draft = self._on_device(logits, history[-1], sampler, banned)
        else:
            draft = self._on_host(logits, history[-1], k, sampler, p_min, banned)
        self.decode_s += time.perf_counter() - t0
        return draft

    def _on_device(self, logits: mx.array, last: int, sampler: Sampler, banned: tuple[int, ...]) -> Draft:
        """The block's greedy drafts chosen on the device and handed over unread: the verify takes the
        ids in as they stand, and its wait is the round's one (engine.runtime.mlx.chain)."""
        ban = ban_row(self.target.model.n_vocab, banned)
        if self.markov is None:
            rows = logits if ban is None else logits + ban
            ids = mx.argmax(rows, axis=-1)
        else:  # each slot's row takes the Markov head's word on the draft before it, unread
            chosen, before = [], mx.array([last], dtype=mx.int32)
            for i in range(logits.shape[0]):
                row, token = pick(logits[i] + self._markov_device(before), ban)
                chosen.append((row, token))
                before = token.astype(mx.int32)[None]
            rows, ids = mx.stack([r for r, _ in chosen]), mx.stack([t for _, t in chosen])
        return UnreadDraft(UnreadIds(ids, rows, lambda drafted: None), sampler)

    def _on_host(
        self, logits: mx.array, last: int, k: int, sampler: Sampler, p_min: float, banned: tuple[int, ...]
    ) -> Draft:
        """The block's drafts chosen on the host: sampling, or a p_min that may end it early."""
        audit.wait(logits)
        rows = np.asarray(logits)
        tokens: list[int] = []
        before = last
        for i in range(k):
            row = rows[i] if self.markov is None else rows[i] + self._markov_row(before)
            token = choose_draft(self._rows[i], row, sampler, p_min, banned)
            if token is None:
                break
            tokens.append(token)
            before = token
        return Draft(tokens, self._rows[: len(tokens)], sampler)

    def _markov_device(self, before: mx.array) -> mx.array:
        """DSpark's Markov head's word on the next token, given the token before it ([1] int32), unevaluated."""
        markov = self.markov
        assert markov is not None  # asked for only where the drafter has the head (DSpark)
        return markov.markov_w2(markov.get_prev_embeddings(before))[0].astype(mx.float32)

    def _markov_row(self, before: int) -> np.ndarray:
        """DSpark's Markov head's word on the next token, given the token before it."""
        row = self._markov_device(mx.array([before], dtype=mx.int32))
        audit.wait(row)
        return np.asarray(row)

    def verified(self, batch: VerifyBatch) -> None:
        """Nothing to carry: the verify pass's layers came with its batch."""

    def rewind(self, keep: int) -> None:
        self._trim(min(self._context, keep))
        self._states.forget_from(keep)

    def _trim(self, context: int) -> None:
        """Keep the context of positions before `context`: trimmed, or (a windowed cache) taken in again."""
        drop = self._context - context
        if drop <= 0:
            return
        if all(c.is_trimmable() for c in self._cache):
            for c in self._cache:
                c.trim(drop)
            self._context = context
        else:
            self._cache, self._context = self.drafter.make_cache(), 0

    def reset(self) -> None:
        self._cache = self.drafter.make_cache()
        self._context = 0  # positions whose states the cache holds as context
        self._states = TargetStates(self.name)

    def close(self) -> None:
        self._stop()
        self._untap()
