"""An MLX target drafts for itself with its own MTP head, as mlx-vlm's speculative decoding does it.

The head (mlx-vlm's drafter module, Qwen3_5MTPDraftModel for Qwen 3.5 and 3.6) keeps a KV cache of
its own whose entry p holds (the token at p+1, the target's last layer at p, normed) and answers
with its guess for p+2. As in mlx-vlm 0.7.10's `_mtp_rounds`:

- every target batch hands its hidden states over (MlxContext.observe_batches); a draft first
  feeds, in one batch, the entries the head lacks (the prompt's after a prefill, the verified
  ones after a round), and its last output gives the first draft;
- each further draft steps the head on its own output and appends that entry, which stays if the
  target keeps the token (the round's rewind drops the rest), though it read the head's state, not
  the target's;
- the draft's last token is not fed: the verify pass hands its hidden state over.

So the drafts are mlx-vlm's own, token for token (tests/engine/runtime/test_mlx_drafters.py).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from engine.depth import MAX_DEPTH
from engine.drafting.base import Draft, OwnPace, VerifyBatch, choose_draft
from engine.drafting.mtp import HEADS_KIND
from engine.errors import IncompatibleDrafter, RuntimeFailure
from engine.runtime.contexts import common_prefix
from engine.runtime.mlx.context import MlxContext
from engine.runtime.side import SideWork
from engine.sampling import Sampler


def load_heads(folder: Path) -> nn.Module:
    """The MTP head in an MLX model folder (its `mtp.*` weights), through mlx-vlm's splitters."""
    from mlx_vlm.speculative.drafters.mtp_split import get_mtp_splitter

    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise IncompatibleDrafter(f"{folder.name}'s config.json cannot be read: {e}") from e
    splitter = get_mtp_splitter(source_config=config)
    if splitter is None:
        kind = config.get("model_type", "?")
        raise IncompatibleDrafter(f"{folder.name} is a {kind} model, and mlx-vlm knows no MTP head for that kind.")
    try:
        return splitter.load(folder, source_config=config)
    except ValueError as e:
        raise IncompatibleDrafter(f"{folder.name} has no MTP head to draft with: {e}") from e


class MlxMtpDrafter(OwnPace):
    """A target's own MTP head drafting for it on MLX; it reads the target's context's hidden states."""

    kind = HEADS_KIND
    has_distribution = True
    needs_hidden_states = True

    def __init__(self, target: MlxContext, head: nn.Module, max_depth: int = MAX_DEPTH, name: str = "") -> None:
        """`head` is an mlx-vlm MTP drafter module (load_heads), bound here to the target's embeddings and head."""
        width = target.observers.parts.width
        theirs = int(head.config.text_config.hidden_size)
        if theirs != width:
            raise IncompatibleDrafter(
                f"the MTP head reads hidden states {theirs} wide, and {target.model.name}'s are {width} wide: "
                "it was trained for another target."
            )
        self.head = head.bind(target.model.module)
        self.target, self.max_depth = target, max_depth
        self.name = name or f"{target.model.name} MTP head"
        self.decode_s = 0.0
        self.ctx = self  # the round counts the head's time inside MLX as the drafter's
        self._dtype = target.observers.parts.inner.embed_tokens.weight.dtype
        self._rows = np.empty((max_depth, target.model.n_vocab), dtype=np.float32)
        self.reset()
        self._stop = target.observe_batches(self._seen)

    def _seen(self, tokens: list[int], start: int, hidden: np.ndarray | None) -> None:
        """A batch the target decoded: keep its hidden states until the head's entries take them in."""
        assert hidden is not None
        if self._states is not None and self._from <= start <= self._from + len(self._states):
            self._states = np.concatenate([self._states[: start - self._from], hidden])
        else:
            self._from, self._states = start, hidden.copy()

    def prefill(self, history: list[int]) -> None:
        """The target's prefill handed its hidden states over; the head takes them in at the first draft."""
        self._held(len(self._fed), len(history) - 1)

    def _held(self, first: int, end: int) -> np.ndarray:
        """The target's hidden states at positions first..end-1, or a sentence for a head that missed them."""
        s = self._states
        if first < end and (s is None or first < self._from or end > self._from + len(s)):
            raise RuntimeFailure("the MTP head missed part of the target's cache; reset both before a reply")
        return s[first - self._from : end - self._from] if s is not None else np.zeros((0, 0), np.float32)

    def _feed(self, tokens: list[int], hidden: mx.array) -> mx.array:
        """Append entries (tokens[i], hidden[i]) at the head's next positions; its output for each."""
        head, at = self.head, len(self._fed)
        embedded = head._input_embed(mx.array([tokens], dtype=mx.int32)) * head._input_embed_scale
        positions = mx.arange(at, at + len(tokens), dtype=mx.int32)[None]
        out = head._forward_hidden(embedded, hidden.astype(self._dtype), self._cache, positions)
        self._fed += tokens
        return out

    def draft(
        self,
        history: list[int],
        k: int,
        sampler: Sampler,
        p_min: float = 0.0,
        banned: tuple[int, ...] = (),
        side: SideWork | None = None,
    ) -> Draft:
        k = min(k, self.max_depth, self.target.n_ctx - len(history))
        if k <= 0:
            return Draft()
        t0 = time.perf_counter()
        self._trim(common_prefix(self._fed, history[1:]))  # entry p embeds history[p + 1]
        end = len(history) - 1  # entries up to the last token's position - 1: the target has those states
        if len(self._fed) < end:
            first = len(self._fed)
            states = mx.array(self._held(first, end))[None]
            self._out = self._feed(history[first + 1 :], states)[:, -1:, :]
        if self._out is None:
            return Draft()
        tokens: list[int] = []
        h = self._out
        for i in range(k):
            logits = self.head._lm_head_fn(h)
            mx.eval(logits)
            token = choose_draft(self._rows[i], np.array(logits[0, -1].astype(mx.float32)), sampler, p_min, banned)
            if token is None:
                break
            tokens.append(token)
            if i < k - 1:  # the last draft's state comes from the verify pass
                h = self._feed([token], h)
        self._out = None  # the next draft starts from entries the round kept
        self.decode_s += time.perf_counter() - t0
        return Draft(tokens, self._rows[: len(tokens)], sampler)

    def verified(self, batch: VerifyBatch) -> None:
        """Nothing to carry: the verify pass's hidden states came with its batch."""

    def rewind(self, keep: int) -> None:
        """Forget positions from `keep` on: the head's entries that embed them, the states held for them."""
        self._trim(max(keep - 1, 0))
        if self._states is not None and keep < self._from + len(self._states):
            self._states = self._states[: max(keep - self._from, 0)]

    def _trim(self, entries: int) -> None:
        drop = len(self._fed) - entries
        if drop > 0:
            for c in self._cache:
                c.trim(drop)
            del self._fed[entries:]
            self._out = None

    def reset(self) -> None:
        self._cache: list[Any] = self.head.make_cache()
        self._fed: list[int] = []  # the token each head entry embeds, entry by entry
        self._out: mx.array | None = None  # the head's output at its last entry, where a draft can start
        self._from, self._states = 0, None  # the target's hidden states from position _from on

    def close(self) -> None:
        self._stop()
