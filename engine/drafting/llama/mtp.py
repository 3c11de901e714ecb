"""The target drafts for itself: its multi-token-prediction (NextN) heads, or Gemma 4's assistant.

As llama.cpp's draft-mtp driver does it (common/speculative.cpp), in its three modes:

- One head (Qwen 3.5 and most others): the head at position p reads the token there and
  the target's hidden state at p-1. Every batch the target decodes is fed to the head with
  the target's hidden states, so the head's cache follows the target's; a draft steps the
  head alone, each step reading the head's own hidden state from the step before.
- Chained heads (Step 3.5): head j drafts the (j+1)-th token. Every target batch is fed to
  every head; draft step j runs head j over the round's whole prefix, so a round drafts at
  most as many tokens as there are heads.
- Shared memory (Gemma 4's assistant, a file of its own): the assistant has no cache; it
  attends to the target's. Nothing is fed to it; each draft step is one query at the
  position after the target's cache, reading the hidden state of the step before.

Drafting costs a fraction of a layer, not a second model's pass.
"""

from __future__ import annotations

import llama_cpp.llama_cpp as llama
import numpy as np

from engine.depth import MAX_DEPTH
from engine.drafting import kindnames
from engine.drafting.base import Draft, OnTarget, VerifyBatch, choose_draft
from engine.errors import IncompatibleDrafter, RuntimeFailure
from engine.runtime import Context, Model
from engine.runtime.llama.heads import Entry, mtp_head
from engine.runtime.llama.options import LoadedModel
from engine.sampling import Sampler

ASSISTANT_ARCHITECTURES = frozenset({"gemma4-assistant"})


def _reads_the_cache_of(assistant: LoadedModel, target: LoadedModel) -> None:
    """An assistant attends to the target's keys and values: their shapes must be its own; else a sentence."""
    said = {
        "attention.head_count_kv": "reads a cache of {} key/value heads, and {}'s has {}",
        "attention.key_length": "reads keys {} wide, and {}'s are {} wide",
    }
    for key, words in said.items():
        theirs = assistant.info.metadata.get(f"{assistant.info.architecture}.{key}")
        ours = target.info.metadata.get(f"{target.info.architecture}.{key}")
        if theirs != ours:
            sentence = words.format(theirs, target.name, ours)
            raise IncompatibleDrafter(f"{assistant.name} {sentence}: it was trained for another target.")


class MtpDrafter(OnTarget[Context]):
    """A target's own MTP heads (or Gemma 4's assistant) as the drafter; it rides on the target's context."""

    has_distribution = True
    needs_hidden_states = True

    def __init__(self, target: Context, max_depth: int = MAX_DEPTH, sidecar: Model | None = None) -> None:
        """The heads in the target's own file, or in `sidecar`, a file of them alone or an assistant
        (which this drafter then owns)."""
        model = sidecar or target.model
        theirs, ours = int(llama.llama_model_n_embd_out(model.ptr)), int(llama.llama_model_n_embd_out(target.model.ptr))
        if theirs != ours:
            raise IncompatibleDrafter(
                f"{model.name} reads hidden states {theirs} wide, and {target.model.name}'s are {ours} wide: "
                "it was trained for another target."
            )
        self.n_heads = int(llama.llama_model_n_layer_nextn(model.ptr))
        self.shared = model.info.architecture in ASSISTANT_ARCHITECTURES
        if self.shared:
            _reads_the_cache_of(model, target.model)
        self.chained = self.n_heads > 1 and not self.shared
        self.kind = kindnames.ASSISTANT if self.shared else kindnames.MTP
        self.head = mtp_head(target, sidecar)  # refuses a model without heads, in a sentence
        self.sidecar = sidecar
        self.ctx = self.head  # for the round's accounting of time inside llama.cpp
        if self.shared:
            self.name = f"{model.name} ({model.path.name})"  # model is the sidecar: the assistant
        else:
            heads = f"{self.n_heads} chained MTP heads" if self.chained else "MTP head"
            self.name = f"{target.model.name} {heads}" + (f" ({sidecar.path.name})" if sidecar else "")
        self.max_depth = min(max_depth, self.n_heads) if self.chained else max_depth
        self.target = target
        self._pending = np.zeros(self.head.width, dtype=np.float32)  # hidden state before the next token
        self._verify: np.ndarray | None = None  # the latest target batch's hidden states
        self._rows = np.empty((max_depth, target.model.n_vocab), dtype=np.float32)
        self._stop = target.observe_batches(self._catch_up)

    def _catch_up(self, tokens: list[int], start: int, hidden: np.ndarray | None) -> None:
        """A batch the target decoded: put (token, the hidden state before it) into each head's cache."""
        assert hidden is not None  # observe_batches was asked for hidden states (its default)
        if not self.shared:  # an assistant reads the target's cache itself
            entries: list[Entry] = [
                (t, start + i, self._pending if i == 0 else hidden[i - 1], False) for i, t in enumerate(tokens)
            ]
            for head in range(self.n_heads if self.chained else 1):
                self.head.rewind(start)
                with self.head.nextn_layer(head if self.chained else 0):
                    self.head.decode(entries)
        self._verify = hidden
        self._pending = hidden[-1].copy()

    def prefill(self, history: list[int]) -> None:
        """The target's prefill already fed the head; a cache it did not see cannot be caught up."""
        if not self.shared and self.head.n_past != len(self.target.tokens):
            raise RuntimeFailure("the MTP head missed part of the target's cache; reset both before a reply")

    def _draft(self, history: list[int], k: int, sampler: Sampler, p_min: float, banned: tuple[int, ...]) -> Draft:
        pos0 = len(history) - 1
        tokens: list[int] = []
        states = [self._pending]  # the hidden state each step reads: the target's, then the head's own
        for i in range(k):
            if self.chained:  # head i over the whole prefix; only its last row is asked for
                self.head.rewind(pos0)
                prefix = [history[-1], *tokens]
                entries: list[Entry] = [(t, pos0 + j, states[j], j == i) for j, t in enumerate(prefix)]
            else:  # the assistant reads the target's cache: every step is a query at pos0
                entries = [([history[-1], *tokens][-1], pos0 if self.shared else pos0 + i, states[-1], True)]
            with self.head.nextn_layer(i if self.chained else 0):
                logits, hidden = self.head.decode(entries)
            token = choose_draft(self._rows[i], logits[-1], sampler, p_min, banned)
            if token is None:
                break
            tokens.append(token)
            states.append(hidden[-1])
        self.rewind(pos0)  # the verify pass feeds these positions again, with the target's states
        return Draft(tokens, self._rows[: len(tokens)], sampler)

    def verified(self, batch: VerifyBatch) -> None:
        """The next draft starts from the target's state at the last token kept."""
        if self._verify is not None and len(self._verify):
            self._pending = self._verify[min(batch.accepted, len(self._verify) - 1)].copy()

    def rewind(self, keep: int) -> None:
        if not self.shared:  # an assistant's memory is the target's: the target rewinds it
            self.head.rewind(keep)

    def reset(self) -> None:
        if not self.shared:  # clearing an assistant's memory would clear the target's cache
            self.head.clear()
        self._pending = np.zeros(self.head.width, dtype=np.float32)
        self._verify = None

    def close(self) -> None:
        self._stop()
        self.head.close()
        if self.sidecar is not None:
            self.sidecar.close()
