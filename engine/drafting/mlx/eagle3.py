"""EAGLE-3 on MLX: a one-layer drafter that reads three of the target's layers, as mlx-vlm runs it.

The drafter is mlx-vlm's Eagle3DraftModel, loaded from its own folder (Speculators' and SGLang's
layout). Its fc fuses the outputs of the target's layers `capture_layer_ids` (the inputs of its
`target_layer_ids`), tapped in every batch the target decodes (engine.runtime.mlx.hidden); its
entries sit at rope position p+1; after each verify it drops its own entries and feeds the kept
drafts again with the target's states, as mlx-vlm's `_eagle3_rounds` does
(engine.drafting.mlx.heads says how the rounds drive it). A drafter with a vocabulary of
its own (`d2t`) writes its row into the target's vocabulary, the rest given no probability.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from engine.depth import MAX_DEPTH
from engine.drafting import kindnames
from engine.drafting.mlx.heads import ChainedHead
from engine.errors import IncompatibleDrafter
from engine.runtime.mlx.context import MlxContext
from engine.runtime.mlx_check import check_folder, loader_errors


def load_eagle3(folder: Path) -> nn.Module:
    """An EAGLE-3 drafter's MLX folder, through mlx-vlm's loader."""
    from mlx_vlm.speculative.drafters import load_drafter

    check_folder(folder, "an EAGLE-3 drafter", IncompatibleDrafter)  # nothing unchecked reaches mlx-vlm
    with loader_errors(folder, "mlx-vlm", IncompatibleDrafter, "an EAGLE-3 drafter"):
        model, kind = load_drafter(str(folder), "eagle3")
    if kind != "eagle3":
        raise IncompatibleDrafter(f"{folder.name} is a {kind} drafter, not EAGLE-3.")
    return model


class MlxEagle3Drafter(ChainedHead):
    """An EAGLE-3 drafter for an MLX target, reading three of its layers."""

    kind = kindnames.EAGLE3
    keeps_own_entries = False

    def __init__(
        self, target: MlxContext, drafter: nn.Module, max_depth: int = MAX_DEPTH, name: str = "", source: str = ""
    ) -> None:
        config = drafter.config
        parts = target.observers.parts
        if int(config.target_hidden_size) != parts.width:
            raise IncompatibleDrafter(
                f"the EAGLE-3 drafter reads layers {config.target_hidden_size} wide, and {target.model.name}'s "
                f"are {parts.width} wide: it was trained for another target."
            )
        self.layers = [int(i) for i in getattr(config, "capture_layer_ids", None) or config.target_layer_ids]
        self.drafter = drafter.bind(target.model.module)
        self._dtype = parts.inner.embed_tokens.weight.dtype
        d2t = drafter.d2t
        hot = None if d2t is None else np.array(mx.arange(d2t.shape[0], dtype=mx.int32) + d2t.astype(mx.int32))
        if hot is not None and (hot.min() < 0 or hot.max() >= target.model.n_vocab):
            raise IncompatibleDrafter(
                f"the EAGLE-3 drafter maps its tokens outside {target.model.name}'s vocabulary: "
                "it was trained for another target."
            )
        self._hot = None if hot is None else mx.array(hot)  # where each of its tokens sits in the target's
        self._untap = target.observers.tap_layers(self.layers)  # refuses a layer the target lacks
        super().__init__(target, max_depth, name or "EAGLE-3 drafter", source)

    def make_cache(self) -> list[Any]:
        return self.drafter.make_cache()

    def states(self) -> mx.array:
        taps = self.target.observers.layer_out
        return mx.concatenate([taps[i][0] for i in self.layers], axis=1)  # evaluated float32 (BatchTaps)

    def forward(self, tokens: mx.array, states: mx.array, first: int) -> mx.array:
        d = self.drafter
        d._cache, d._next_position = self._cache, first + 1  # mlx-vlm's entries start at position 1
        return d._forward_tokens(tokens, states.astype(self._dtype), mx.int32)

    def device_logits(self, out: mx.array) -> mx.array:
        row = self.drafter._logits(out)[0, -1].astype(mx.float32)
        if self._hot is None:
            return row
        full = mx.full((self.target.model.n_vocab,), -mx.inf, dtype=mx.float32)
        full[self._hot] = row  # the target's tokens it cannot draft get no probability
        return full

    def close(self) -> None:
        super().close()
        self._untap()
