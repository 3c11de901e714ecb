"""EAGLE-3: a one-layer drafter that reads three of the target's layers, fused by its encoder.

As llama.cpp's draft-eagle3 driver does it (common/speculative.cpp): every batch the target
decodes hands three layers' inputs (or the final hidden state, for the layer past the
last) to the drafter's encoder, whose output g for position p is written into the drafter's
cache beside the token at p+1. The last position of a batch waits for its next token. A
draft seeds with (the last token, the g before it) and then steps on the decoder's own
pre-norm state.
"""

from __future__ import annotations

import llama_cpp.llama_cpp as llama
import numpy as np

from engine.depth import MAX_DEPTH
from engine.drafting import kindnames
from engine.drafting.base import Draft, OnTarget, VerifyBatch, choose_draft
from engine.drafting.llama.dflash import LAYER_INPUT_ARCHITECTURES
from engine.errors import IncompatibleDrafter
from engine.runtime import Context, Model
from engine.runtime.llama.heads import DraftContext, Entry, layer_inputs, set_layer_inputs, target_layers
from engine.sampling import Sampler


class Eagle3Drafter(OnTarget[Context]):
    """An EAGLE-3 model drafting for `target`."""

    kind = kindnames.EAGLE3
    has_distribution = True
    needs_hidden_states = True

    def __init__(self, model: Model, target: Context, max_depth: int = MAX_DEPTH) -> None:
        self.layers = target_layers(model.ptr)
        n_layer = int(llama.llama_model_n_layer(target.model.ptr))
        arch = target.model.info.architecture
        if len(self.layers) != 3:
            raise IncompatibleDrafter(f"{model.name} names {len(self.layers)} target layers; EAGLE-3 reads three.")
        if max(self.layers) > n_layer or (arch not in LAYER_INPUT_ARCHITECTURES and min(self.layers) < n_layer):
            raise IncompatibleDrafter(
                f"{model.name} reads target layers {self.layers}, which {target.model.name} ({arch}, {n_layer} "
                "layers) cannot hand out: it was trained for another target."
            )
        self.target_width = int(llama.llama_model_n_embd(target.model.ptr))
        self.model, self.target, self.name = model, target, model.name
        self.max_depth = max_depth
        self.ctx = DraftContext(model, target, "the EAGLE-3 drafter", outputs=target.capacity)
        self.ctx.keep_hidden_states(masked=True)
        self._n_layer = n_layer
        self._trunk_layers = [layer for layer in self.layers if layer < n_layer]  # the rest: the final state
        set_layer_inputs(target.ptr, self._trunk_layers, True)
        width = self.ctx.width
        self._pending_g = np.zeros(width, dtype=np.float32)  # g of the position waiting for its next token
        self._pending_pos = -1
        self._verify_g: np.ndarray | None = None
        self._verify_first = -1
        self._rows = np.empty((max_depth, model.n_vocab), dtype=np.float32)
        self._stop = target.observe_batches(self._read, hidden_states=max(self.layers) == n_layer)

    def _read(self, tokens: list[int], start: int, hidden: np.ndarray | None) -> None:
        """Encode a target batch's features; write (token at p+1, g at p) for all but the batch's last position."""
        n = len(tokens)
        parts: list[np.ndarray] = []
        for layer in self.layers:
            if layer == self._n_layer:
                # hidden states were asked for exactly when a layer is the final one (observe_batches)
                assert hidden is not None
                parts.append(hidden)
            else:
                parts.append(layer_inputs(self.target.ptr, layer, n, self.target_width))
        features = np.concatenate(parts, axis=1)
        g = np.concatenate(
            [
                self.ctx.encode(features[i : i + self.target.capacity], self.ctx.last_position() + 1)
                for i in range(0, n, self.target.capacity)
            ]
        )
        entries: list[Entry] = []
        p = self._pending_pos
        if p >= 0 and p + 1 == start and p > self.ctx.last_position():  # a batch that began where the last one ended
            entries.append((tokens[0], p, self._pending_g, False))
        entries += [(tokens[k + 1], start + k, g[k], False) for k in range(n - 1)]
        self._verify_first, self._verify_g = start, g
        self._pending_pos, self._pending_g = start + n - 1, g[-1].copy()
        if entries:
            self.ctx.decode(entries)

    def prefill(self, history: list[int]) -> None:
        """The target's prefill already fed the drafter."""

    def _draft(self, history: list[int], k: int, sampler: Sampler, p_min: float, banned: tuple[int, ...]) -> Draft:
        if self._pending_pos < 0:  # no verified batch to draft from yet
            return Draft()
        seed = self._pending_pos
        self.ctx.rewind(seed)
        entries: list[Entry] = [(history[-1], seed, self._pending_g, True)]
        tokens: list[int] = []
        for i in range(k):
            logits, state = self.ctx.decode(entries)
            token = choose_draft(self._rows[i], logits[0], sampler, p_min, banned)
            if token is None:
                break
            tokens.append(token)
            entries = [(token, seed + i + 1, state[0], True)]
        self.ctx.rewind(seed + 1)  # keep the seed; the verify pass writes what follows
        return Draft(tokens, self._rows[: len(tokens)], sampler)

    def verified(self, batch: VerifyBatch) -> None:
        """The next seed: the g of the last token the target kept."""
        if self._verify_g is not None and len(self._verify_g):
            i = min(batch.accepted, len(self._verify_g) - 1)
            self._pending_pos, self._pending_g = self._verify_first + i, self._verify_g[i].copy()

    def rewind(self, keep: int) -> None:
        self.ctx.rewind(keep)

    def reset(self) -> None:
        self.ctx.clear()
        self._pending_g = np.zeros(self.ctx.width, dtype=np.float32)
        self._pending_pos, self._verify_g, self._verify_first = -1, None, -1

    def close(self) -> None:
        self._stop()
        if self.target.ptr:
            set_layer_inputs(self.target.ptr, self._trunk_layers, False)
        self.ctx.close()
        self.model.close()
