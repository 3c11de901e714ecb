"""DFlash: a drafter that writes a whole block of drafts in one pass over the target's features.

As llama.cpp's draft-dflash driver does it (common/speculative.cpp): every batch the target
decodes hands its chosen layers' inputs, side by side, to the drafter, which writes them
into its own cache (keys and values only). A draft is one non-causal pass over
[last token, MASK, MASK, ...]: each MASK slot answers with the token at its position.
"""

from __future__ import annotations

import llama_cpp.llama_cpp as llama
import numpy as np

from engine.depth import MAX_DEPTH
from engine.drafting.base import Draft, VerifyBatch, choose_draft
from engine.errors import IncompatibleDrafter
from engine.runtime import Context, Model
from engine.runtime.heads import DraftContext, layer_inputs, selector_top_k, set_layer_inputs, target_layers
from engine.sampling import Sampler

DEFAULT_BLOCK = 16  # llama.cpp's default when the file does not say
# Targets whose llama.cpp graph hands out its layers' inputs (src/models/*.cpp set t_layer_inp):
# a drafter that reads them can only ride on these.
LAYER_INPUT_ARCHITECTURES = frozenset(
    {
        "llama", "qwen3", "qwen3moe", "qwen3next", "qwen35", "qwen35moe", "qwen4exp", "gemma4", "deepseek4",
        "nemotron_h", "bailingmoe3", "gpt-oss", "lfm2", "minimax-01", "minimax-m2", "mimo2", "hunyuan_vl",
        "nanbeige", "muse-glimmer",
    }
)  # fmt: skip


class DflashDrafter:
    """A DFlash model drafting for `target`, reading its layer inputs from every batch it decodes."""

    kind = "dflash"
    has_distribution = True
    needs_hidden_states = True

    def __init__(self, model: Model, target: Context, max_depth: int = MAX_DEPTH) -> None:
        self.layers = target_layers(model.ptr)
        target_layers_n = int(llama.llama_model_n_layer(target.model.ptr))
        width = int(llama.llama_model_n_embd(target.model.ptr))
        if not self.layers:
            raise IncompatibleDrafter(f"{model.name} names no target layers to read, so it is not a DFlash drafter.")
        arch = target.model.info.architecture
        if arch not in LAYER_INPUT_ARCHITECTURES:
            raise IncompatibleDrafter(
                f"{model.name} reads the target's layers, and llama.cpp does not hand them out for "
                f"{target.model.name}'s architecture ({arch}): it was trained for another target."
            )
        if int(llama.llama_model_n_embd(model.ptr)) != width:
            raise IncompatibleDrafter(
                f"{model.name} is a DFlash drafter {llama.llama_model_n_embd(model.ptr)} wide, and "
                f"{target.model.name} is {width} wide: it was trained for another target."
            )
        if max(self.layers) >= target_layers_n:
            raise IncompatibleDrafter(
                f"{model.name} reads target layer {max(self.layers)}, and {target.model.name} has "
                f"{target_layers_n}: it was trained for another target."
            )
        if selector_top_k(model.ptr) > 0:
            raise IncompatibleDrafter(
                f"{model.name} is a DFlash2 drafter (a selector lattice); Draftlight cannot run it yet."
            )
        self.mask = int(llama.llama_vocab_mask(model.vocab))
        if self.mask < 0:
            raise IncompatibleDrafter(f"{model.name} has no mask token, which a DFlash drafter fills in.")
        block = model.meta("dflash.block_size")
        self.block = int(block) if block and block.isdigit() else DEFAULT_BLOCK
        self.model, self.target, self.width = model, target, width
        self.name = model.name
        self.max_depth = min(max_depth, self.block - 1)
        self.ctx = DraftContext(model, target, "the DFlash drafter", outputs=self.max_depth + 1)
        self.ctx.keep_hidden_states(masked=True)
        llama.llama_set_causal_attn(self.ctx.ptr, model.meta("dflash.attention.causal") == "true")
        set_layer_inputs(target.ptr, self.layers, True)
        self._rows = np.empty((self.max_depth, model.n_vocab), dtype=np.float32)
        self._stop = target.observe_batches(self._inject, hidden_states=False)

    def _inject(self, tokens: list[int], start: int, _hidden: np.ndarray | None) -> None:
        """Write the target's features for a batch it decoded into the drafter's cache."""
        n = len(tokens)
        features = np.concatenate(
            [layer_inputs(self.target.ptr, layer, n, self.width) for layer in self.layers], axis=1
        )
        self.ctx.rewind(start)
        step = self.target.capacity
        for first in range(0, n, step):
            chunk = range(first, min(n, first + step))
            self.ctx.decode([(None, start + i, features[i], False) for i in chunk])

    def prefill(self, history: list[int]) -> None:
        """The target's prefill already wrote the prompt's features."""

    def draft(
        self, history: list[int], k: int, sampler: Sampler, p_min: float = 0.0, banned: tuple[int, ...] = ()
    ) -> Draft:
        k = min(k, self.max_depth, self.target.n_ctx - len(history))
        if k <= 0:
            return Draft()
        pos0 = len(history) - 1
        block = [(history[-1], pos0, None, True)] + [(self.mask, pos0 + i, None, True) for i in range(1, k + 1)]
        logits, _ = self.ctx.decode(block)
        self.ctx.rewind(pos0)  # the block was noise; the verify pass writes these positions' features
        tokens: list[int] = []
        for i in range(k):
            token = choose_draft(self._rows[i], logits[i + 1], sampler, p_min, banned)
            if token is None:
                break
            tokens.append(token)
        return Draft(tokens, self._rows[: len(tokens)], sampler)

    def verified(self, batch: VerifyBatch) -> None:
        """Nothing to carry: the verify pass's features are already written."""

    def rewind(self, keep: int) -> None:
        self.ctx.rewind(keep)

    def reset(self) -> None:
        self.ctx.clear()

    def close(self) -> None:
        self._stop()
        if self.target.ptr:
            set_layer_inputs(self.target.ptr, self.layers, False)
        self.ctx.close()
        self.model.close()
