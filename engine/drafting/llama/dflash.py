"""DFlash: a drafter that writes a whole block of drafts in one pass over the target's features.

As llama.cpp's draft-dflash and draft-dspark drivers do it (common/speculative.cpp): every
batch the target decodes hands its chosen layers' inputs, side by side, to the drafter,
which writes them into its own cache (keys and values only). A draft is one non-causal
pass over [last token, MASK, MASK, ...]: each MASK slot answers with the token at its
position. Two variants share the code:

- DFlash2 (`dflash.selector_top_k` > 0): each slot hands out k candidates and a k x k score
  table over the slot before's choice; the draft is the walk through that lattice.
- DSpark (a Markov head, `markov_w1`): the graph biases each slot by the token chosen
  before it; with `sample_from_anchor` (the default) the last token's own slot drafts too,
  so a block of n tokens drafts n.
"""

from __future__ import annotations

import llama_cpp.llama_cpp as llama
import numpy as np

from engine.depth import MAX_DEPTH
from engine.drafting import kindnames
from engine.drafting.base import Draft, OnTarget, VerifyBatch, choose_draft
from engine.errors import IncompatibleDrafter
from engine.runtime import Context, Model
from engine.runtime.llama.heads import (
    DraftContext,
    Entry,
    layer_inputs,
    selector_top_k,
    set_layer_inputs,
    target_layers,
)
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


class DflashDrafter(OnTarget[Context]):
    """A DFlash model drafting for `target`, reading its layer inputs from every batch it decodes."""

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
        self.top_k = selector_top_k(model.ptr)  # DFlash2's lattice width; 0 for DFlash
        self.markov = "markov_w1.weight" in model.info.tensor_names  # DSpark
        self.confidence = self.markov and "conf_proj.weight" in model.info.tensor_names  # DSpark's stop signal
        anchor = model.meta("dflash.sample_from_anchor")
        self.anchor = self.markov and anchor in (None, "true")  # the last token's slot drafts too
        self.variant = "DFlash2" if self.top_k else "DSpark" if self.markov else "DFlash"
        self.kind = kindnames.DSPARK if self.markov else kindnames.DFLASH
        self.has_distribution = not self.top_k  # a lattice walk has scores, not a distribution over the vocabulary
        self.mask = int(llama.llama_vocab_mask(model.vocab))
        if self.mask < 0:
            raise IncompatibleDrafter(f"{model.name} has no mask token, which a DFlash drafter fills in.")
        block = model.meta("dflash.block_size")
        self.block = int(block) if block and block.isdigit() else DEFAULT_BLOCK
        self.model, self.target, self.width = model, target, width
        self.name = model.name if self.variant == "DFlash" else f"{model.name} ({self.variant})"
        self.max_depth = min(max_depth, self.block if self.anchor else self.block - 1)
        self.ctx = DraftContext(model, target, f"the {self.variant} drafter", outputs=self.max_depth + 1)
        self.ctx.keep_hidden_states(masked=not self.top_k)  # DFlash2: every row's lattice
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

    def _draft(self, history: list[int], k: int, sampler: Sampler, p_min: float, banned: tuple[int, ...]) -> Draft:
        pos0 = len(history) - 1
        n = k if self.anchor else k + 1  # slot i answers for position pos0 + i + 1; DFlash skips the last token's
        block: list[Entry] = [(history[-1] if i == 0 else self.mask, pos0 + i, None, not self.top_k) for i in range(n)]
        logits, states = self.ctx.decode(block)
        if self.top_k:
            lattice = self.ctx.all_hidden_states(n)
        self.ctx.rewind(pos0)  # the block was noise; the verify pass writes these positions' features
        if self.top_k:
            return Draft(self._walk(lattice, k, p_min, banned))
        tokens: list[int] = []
        first = 0 if self.anchor else 1
        for i in range(k):
            if self.confidence and p_min > 0.0 and states[first + i, 0] < p_min:
                break  # DSpark's confidence head, not the token's probability, decides when to stop
            p = 0.0 if self.confidence else p_min  # without the head: the token's probability, as DFlash
            token = choose_draft(self._rows[i], logits[first + i], sampler, p, banned)
            if token is None:
                break
            tokens.append(token)
        return Draft(tokens, self._rows[: len(tokens)], sampler)

    def _walk(self, lattice: np.ndarray, k: int, p_min: float, banned: tuple[int, ...]) -> list[int]:
        """DFlash2: row i holds k candidates, then a k x k score table by the previous slot's choice."""
        tokens: list[int] = []
        top, choice = self.top_k, 0
        for i in range(1, k + 1):
            scores = lattice[i, top + choice * top : top + (choice + 1) * top]
            choice = int(scores.argmax())
            if p_min > 0.0 and 1.0 / float(np.exp(scores - scores[choice]).sum()) < p_min:
                break
            token = int(lattice[i, choice])
            if token in banned:
                break
            tokens.append(token)
        return tokens

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
