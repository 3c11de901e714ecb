"""An MLX target drafts for itself with its own MTP head, as mlx-vlm's speculative decoding does it.

The head is mlx-vlm's drafter module (Qwen3_5MTPDraftModel for Qwen 3.5 and 3.6), loaded from the
`mtp.*` weights of the target's own folder by mlx-vlm's splitters; it reads the target's last layer,
normed, and keeps its own entries for the drafts the target kept, as mlx-vlm's `_mtp_rounds` does
(engine.drafting.mlx.heads says how the rounds drive it). So the drafts are mlx-vlm's own,
token for token (tests/engine/runtime/test_mlx_drafters.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from engine.depth import MAX_DEPTH
from engine.drafting import kindnames
from engine.drafting.mlx.heads import ChainedHead
from engine.errors import IncompatibleDrafter
from engine.runtime.mlx.context import MlxContext
from engine.runtime.mlx_check import check_folder, one_line


def load_heads(folder: Path) -> nn.Module:
    """The MTP head in an MLX model folder (its `mtp.*` weights), through mlx-vlm's splitters."""
    from mlx_vlm.speculative.drafters.mtp_split import get_mtp_splitter

    config = check_folder(folder, error=IncompatibleDrafter).config  # the target's folder, read again with care
    splitter = get_mtp_splitter(source_config=config)
    if splitter is None:
        kind = config.get("model_type", "?")
        raise IncompatibleDrafter(f"{folder.name} is a {kind} model, and mlx-vlm knows no MTP head for that kind.")
    try:
        return splitter.load(folder, source_config=config)
    except ValueError as e:
        raise IncompatibleDrafter(f"{folder.name} has no MTP head to draft with: {one_line(e)}") from e
    except Exception as e:  # whatever else mlx-vlm raises is the folder's fault, said in a sentence
        raise IncompatibleDrafter(f"mlx-vlm could not load {folder.name}'s MTP head: {one_line(e)}") from e


class MlxMtpDrafter(ChainedHead):
    """A target's own MTP head drafting for it on MLX; it reads the target's last layer, normed."""

    kind = kindnames.MTP

    def __init__(self, target: MlxContext, head: nn.Module, max_depth: int = MAX_DEPTH, name: str = "") -> None:
        """`head` is an mlx-vlm MTP drafter module (load_heads), bound here to the target's embeddings and head."""
        parts = target.observers.parts
        theirs = int(head.config.text_config.hidden_size)
        if theirs != parts.width:
            raise IncompatibleDrafter(
                f"the MTP head reads hidden states {theirs} wide, and {target.model.name}'s are {parts.width} "
                "wide: it was trained for another target."
            )
        self.head = head.bind(target.model.module)
        self._dtype = parts.inner.embed_tokens.weight.dtype
        super().__init__(target, max_depth, name or f"{target.model.name} MTP head")

    def make_cache(self) -> list[Any]:
        return self.head.make_cache()

    def forward(self, tokens: mx.array, states: mx.array, first: int) -> mx.array:
        head = self.head
        embedded = head._input_embed(tokens) * head._input_embed_scale
        positions = mx.arange(first, first + tokens.shape[1], dtype=mx.int32)[None]
        return head._forward_hidden(embedded, states.astype(self._dtype), self._cache, positions)

    def device_logits(self, out: mx.array) -> mx.array:
        return self.head._lm_head_fn(out)[0, -1].astype(mx.float32)
