"""Gemma 4's assistant on MLX: a small model that attends to the target's own memory, as mlx-vlm runs it.

The assistant is mlx-vlm's Gemma4AssistantDraftModel, loaded from its own folder; it borrows the
target's input embeddings and keeps no cache of its own. Its layers attend, bidirectionally, to the
keys and values of the target's last layer of each kind (full and sliding attention), read from the
target's prompt cache as it stands at the draft: the positions the target holds. As mlx-vlm
0.7.10's `_mtp_rounds` drives it, a draft over a history whose last token the target has yet to see
(n positions held) starts from (that token's embedding, the target's last layer, normed, at
position n-1), the query held at position n-1 for every step; each further step reads the
assistant's own output (projected back to the target's width) beside the token it just drafted.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from engine.depth import MAX_DEPTH
from engine.drafting import kindnames
from engine.drafting.base import Draft, OnTarget, UnreadDraft, VerifyBatch, choose_draft
from engine.drafting.mlx.heads import TargetStates
from engine.errors import IncompatibleDrafter, RuntimeFailure
from engine.runtime.mlx import audit
from engine.runtime.mlx.chain import UnreadIds, ban_row, pick
from engine.runtime.mlx.context import MlxContext, decode_errors
from engine.runtime.mlx_check import check_folder, loader_errors
from engine.sampling import Sampler


def load_assistant(folder: Path) -> nn.Module:
    """A Gemma 4 assistant's MLX folder, through mlx-vlm's loader."""
    from mlx_vlm.speculative.drafters import load_drafter
    from mlx_vlm.speculative.drafters.gemma4_assistant import Gemma4AssistantDraftModel

    check_folder(folder, "a Gemma 4 assistant", IncompatibleDrafter)  # nothing unchecked reaches mlx-vlm
    with loader_errors(folder, "mlx-vlm", IncompatibleDrafter, "a Gemma 4 assistant"):
        model, _ = load_drafter(str(folder), "mtp")
    if not isinstance(model, Gemma4AssistantDraftModel):
        kind = getattr(model.config, "model_type", type(model).__name__)
        raise IncompatibleDrafter(f"{folder.name} is a {kind} model, not a Gemma 4 assistant.")
    return model


def memory_layers(target: MlxContext) -> dict[str, int]:
    """Each attention kind's last layer with a cache of its own: whose keys and values the assistant reads."""
    layers = target.observers.parts.layers
    sources: dict[str, int] = {}
    for i in range(len(target.kv_cache())):
        kind = getattr(layers[i], "layer_type", None)
        if kind is None:
            raise IncompatibleDrafter(
                f"{target.model.name} is not a Gemma 4 model: the assistant attends to a Gemma 4 target's memory."
            )
        sources[kind] = i
    return sources


def centroid_rows(masked: nn.Module, hidden: mx.array, weight: mx.array) -> mx.array:
    """mlx-vlm's MaskedEmbedder's rows, their floor (the chosen tokens' lowest logit less one, given
    to every other token) kept on the device where mlx-vlm reads it on the host (`.item()`)."""
    chosen, logits = masked._selected_logits(hidden, weight)
    b, n = hidden.shape[:2]
    floor = (logits.min().astype(mx.float32) - 1.0).astype(hidden.dtype)
    rows = mx.full((b, n, masked.vocab_size), floor, dtype=hidden.dtype)
    return mx.put_along_axis(rows, chosen.reshape(b, n, -1), logits, axis=-1)


class MlxAssistantDrafter(OnTarget[MlxContext]):
    """Gemma 4's assistant drafting for an MLX Gemma 4 target: it reads the target's last layer and memory."""

    kind = kindnames.ASSISTANT
    has_distribution = True
    needs_hidden_states = True

    def __init__(
        self, target: MlxContext, assistant: nn.Module, max_depth: int = MAX_DEPTH, name: str = "", source: str = ""
    ) -> None:
        config = assistant.config
        parts = target.observers.parts
        if int(config.backbone_hidden_size) != parts.width:
            raise IncompatibleDrafter(
                f"the assistant reads hidden states {config.backbone_hidden_size} wide, and {target.model.name}'s "
                f"are {parts.width} wide: it was trained for another target."
            )
        vocab = int(config.text_config.vocab_size)
        if vocab != target.model.n_vocab:
            raise IncompatibleDrafter(
                f"the assistant knows {vocab:,} tokens, and {target.model.name} has {target.model.n_vocab:,}: "
                "it was trained for another target."
            )
        self.sources = memory_layers(target)
        wanted = {layer.layer_type for layer in assistant.model.layers}
        missing = sorted(wanted - set(self.sources))
        if missing:
            raise IncompatibleDrafter(
                f"the assistant attends to {' and '.join(k.replace('_', ' ') for k in missing)} layers, which "
                f"{target.model.name} lacks: it was trained for another target."
            )
        self.assistant = assistant.bind(target.model.module)
        if assistant.masked_embedding is not None:  # its floor taken on the device: no wait a step
            weight, masked = assistant.model.embed_tokens.weight, assistant.masked_embedding
            self.assistant._lm_head_fn = lambda h: centroid_rows(masked, h, weight)
        if self.assistant._input_embed is None:
            raise IncompatibleDrafter(f"the assistant cannot find {target.model.name}'s input embeddings.")
        self.target, self.max_depth, self.name = target, max_depth, name or "Gemma 4 assistant"
        self.who = f"the {self.name} in {source}" if source else self.name  # named where one of its passes fails
        self.decode_s = 0.0
        self.ctx = self  # the round counts the drafter's time inside MLX as its own
        self._dtype = parts.inner.embed_tokens.weight.dtype
        self._rows = np.empty((max_depth, target.model.n_vocab), dtype=np.float32)
        self.reset()
        self._stop = target.observe_batches(self._seen, hidden_states=False)  # read on the device

    def _seen(self, tokens: list[int], start: int, hidden: np.ndarray | None) -> None:
        last_layer = self.target.observers.hidden
        assert last_layer is not None  # the target decodes with its hidden states while a drafter listens
        self._states.add(start, last_layer[0])

    def prefill(self, history: list[int]) -> None:
        """The target's prefill handed its last layer over; the first draft reads its last position."""
        self._states.held(len(history) - 2, len(history) - 1)

    def _memory(self, held: int) -> dict[str, tuple[mx.array, mx.array]]:
        """The keys and values of each source layer's cache, in position order: the `held` positions, a
        sliding window's from the first it keeps (engine.runtime.mlx.window), as mlx-vlm hands over its
        own buffered window's."""
        cache = self.target.kv_cache()
        memory = {}
        for kind, i in self.sources.items():
            c = cache[i]
            keys, values = c.keys_and_values()
            first = getattr(c, "start", 0)  # a WindowCache's first position kept
            if c.offset != held or keys.shape[-2] != held - first:
                raise RuntimeFailure(
                    f"{self.target.model.name}'s {kind.replace('_', ' ')} memory holds {keys.shape[-2]:,} positions "
                    f"and the reply {held:,}: the assistant cannot read the target's memory."
                )
            memory[kind] = (keys, values)
        return memory

    def failing(self) -> AbstractContextManager[None]:
        return decode_errors(self.who)

    def _draft(self, history: list[int], k: int, sampler: Sampler, p_min: float, banned: tuple[int, ...]) -> Draft:
        held = len(history) - 1  # the positions the target holds: all but the last token's
        if held <= 0:
            return Draft()
        t0 = time.perf_counter()
        a = self.assistant
        a.set_shared_kv(self._memory(held), held, position=held - 1, kv_valid_len=held)
        positions = mx.array([[held - 1]], dtype=mx.int32)
        state = self._states.held(held - 1, held)[None].astype(self._dtype)
        token = mx.array([[history[-1]]], dtype=mx.int32)
        on_device = sampler.greedy and p_min <= 0.0  # else each row is read on the host (sampling, p_min)
        ban = ban_row(self.target.model.n_vocab, banned)
        rows, ids, tokens = [], [], []
        for i in range(k):
            embedded = a._input_embed(token) * a._input_embed_scale
            state, logits = a(mx.concatenate([embedded, state], axis=-1), a._shared_kv, positions)
            if on_device:  # chosen on the device and fed to the next step unread
                row, chosen = pick(logits[0, -1], ban)
                rows.append(row)
                ids.append(chosen)
                token = chosen.astype(mx.int32).reshape(1, 1)
                continue
            row = logits[0, -1].astype(mx.float32)
            audit.wait(state, row)
            drafted = choose_draft(self._rows[i], np.asarray(row), sampler, p_min, banned)
            if drafted is None:
                break
            tokens.append(drafted)
            token = mx.array([[drafted]], dtype=mx.int32)
        a._shared_kv = None  # the target's memory moves on with the verify
        self.decode_s += time.perf_counter() - t0
        if on_device:  # the verify takes the ids in as they stand: its wait is the round's one
            return UnreadDraft(UnreadIds(mx.stack(ids), mx.stack(rows), lambda drafted: None), sampler)
        return Draft(tokens, self._rows[: len(tokens)], sampler)

    def verified(self, batch: VerifyBatch) -> None:
        """Nothing to carry: the verify pass's last layer came with its batch, its memory is in its cache."""

    def rewind(self, keep: int) -> None:
        self._states.forget_from(keep)

    def reset(self) -> None:
        self._states = TargetStates(self.name)

    def close(self) -> None:
        self._stop()
