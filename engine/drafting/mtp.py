"""The target drafts for itself: its multi-token-prediction (NextN) head.

As llama.cpp's draft-mtp driver does it (common/speculative.cpp): the head at position p
reads the token there and the target's hidden state at p-1. Every batch the target decodes
(the prompt, each verify pass) is fed to the head with the target's hidden states, so the
head's cache follows the target's; a draft then steps the head alone, each step reading the
head's own hidden state from the step before. Drafting costs a fraction of a layer, not a
second model's pass.
"""

from __future__ import annotations

import llama_cpp.llama_cpp as llama
import numpy as np

from engine.depth import MAX_DEPTH
from engine.drafting.base import Draft, VerifyBatch, choose_draft
from engine.errors import IncompatibleDrafter, RuntimeFailure
from engine.runtime import Context, Model
from engine.runtime.heads import mtp_head
from engine.sampling import Sampler


class MtpDrafter:
    """A target's own MTP head as the drafter; it rides on the target's context."""

    kind = "mtp"
    has_distribution = True
    needs_hidden_states = True

    def __init__(self, target: Context, max_depth: int = MAX_DEPTH, sidecar: Model | None = None) -> None:
        """The heads in the target's own file, or in `sidecar`, a file of them alone (which this drafter then owns)."""
        self.n_heads = int(llama.llama_model_n_layer_nextn((sidecar or target.model).ptr))
        if self.n_heads > 1:
            raise IncompatibleDrafter(
                f"{(sidecar or target.model).name} chains {self.n_heads} MTP heads; Draftlight runs a single head only, for now."
            )
        self.head = mtp_head(target, sidecar)  # refuses a model without heads, in a sentence
        self.sidecar = sidecar
        self.ctx = self.head  # for the round's accounting of time inside llama.cpp
        self.name = f"{target.model.name} MTP head" + (f" ({sidecar.path.name})" if sidecar else "")
        self.max_depth = max_depth
        self.target = target
        self._pending = np.zeros(self.head.width, dtype=np.float32)  # hidden state before the next token
        self._verify: np.ndarray | None = None  # the latest target batch's hidden states
        self._rows = np.empty((max_depth, target.model.n_vocab), dtype=np.float32)
        self._stop = target.observe_batches(self._catch_up)

    def _catch_up(self, tokens: list[int], start: int, hidden: np.ndarray) -> None:
        """A batch the target decoded: put (token, the hidden state before it) into the head's cache."""
        self.head.rewind(start)
        entries = [(t, start + i, self._pending if i == 0 else hidden[i - 1], False) for i, t in enumerate(tokens)]
        self.head.decode(entries)
        self._verify = hidden
        self._pending = hidden[-1].copy()

    def prefill(self, history: list[int]) -> None:
        """The target's prefill already fed the head; a cache it did not see cannot be caught up."""
        if self.head.n_past != len(self.target.tokens):
            raise RuntimeFailure("the MTP head missed part of the target's cache; reset both before a reply")

    def draft(
        self, history: list[int], k: int, sampler: Sampler, p_min: float = 0.0, banned: tuple[int, ...] = ()
    ) -> Draft:
        k = min(k, self.max_depth, self.target.n_ctx - len(history))
        if k <= 0:
            return Draft()
        pos0 = len(history) - 1
        entries = [(history[-1], pos0, self._pending, True)]
        tokens: list[int] = []
        for i in range(k):
            logits, hidden = self.head.decode(entries)
            token = choose_draft(self._rows[i], logits[0], sampler, p_min, banned)
            if token is None:
                break
            tokens.append(token)
            entries = [(token, pos0 + i + 1, hidden[0], True)]
        self.head.rewind(pos0)  # the verify pass feeds these positions again, with the target's states
        return Draft(tokens, self._rows[: len(tokens)], sampler)

    def verified(self, batch: VerifyBatch) -> None:
        """The next draft starts from the target's state at the last token kept."""
        if self._verify is not None and len(self._verify):
            self._pending = self._verify[min(batch.accepted, len(self._verify) - 1)].copy()

    def rewind(self, keep: int) -> None:
        self.head.rewind(keep)

    def reset(self) -> None:
        self.head.clear()
        self._pending = np.zeros(self.head.width, dtype=np.float32)
        self._verify = None

    def close(self) -> None:
        self._stop()
        self.head.close()
        if self.sidecar is not None:
            self.sidecar.close()
