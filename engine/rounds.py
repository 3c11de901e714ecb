"""A round's data: what a reply asks for, the prompt's pass, the target's verdict, each emitted
token with its provenance, and the round itself. Data only: below both the code that makes
rounds (engine.speculative) and the code that reports them (engine.reporting).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from engine.depth import Depth
from engine.drafting.base import Draft
from engine.events import TokenKind
from engine.runtime.side import Job
from engine.sampling import SamplingConfig

Candidates = tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class GenerationConfig:
    """What to generate and how."""

    max_tokens: int = 512
    depth: Depth = 2  # drafted tokens per round (0 turns speculation off), or AUTO
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    p_min: float = 0.0  # stop drafting when the drafter's top probability falls below this
    stop: tuple[str, ...] = ()
    # Fixed-length runs (benchmarks): end-of-generation tokens are banned, so the model
    # writes on as llama.cpp's ignore_eos makes it; the same rule for drafter and target.
    ignore_eog: bool = False
    top_candidates: int = 0  # report the target's and drafter's top-n at each token
    # Report each token's probabilities. Greedy decoding needs none of them, and each costs
    # one pass over the vocabulary (~80 us for 152k tokens on a laptop-class CPU).
    probabilities: bool = True


@dataclass(frozen=True)
class Prefill:
    """The prompt's own pass: tokens it took in, its time, and its last row of logits.

    With `first_row` the target's cache holds the whole prompt and the first token comes
    from that row, as in llama.cpp: round 0, no draft, no decode time.
    """

    tokens: int = 0
    seconds: float = 0.0
    first_row: np.ndarray | None = None


@dataclass
class Verdict:
    """What the target made of one draft."""

    accepted: int  # drafts kept
    token: int  # the target's own token after them
    target_probs: list[float]  # for each emitted token
    target_dists: list[np.ndarray | None]  # kept only when someone asked for candidates


class Emitted(NamedTuple):
    """One token a round emitted, with its provenance: the round decides it."""

    token: int
    kind: TokenKind
    target_prob: float
    draft_prob: float | None = None
    rejected: int | None = None  # for REPLACED: the draft the target refused
    draft_rank: int | None = None  # for REPLACED: the target's token among the drafter's choices (1: first)
    rejected_prob: float | None = None  # for REPLACED: the drafter's probability of its refused draft
    target_top: Candidates = ()
    draft_top: Candidates = ()


@dataclass
class Round:
    draft: Draft
    verdict: Verdict
    emitted: list[Emitted]
    draft_s: float
    verify_s: float
    commit_s: float
    rewind_s: float
    llama_s: float  # time inside llama.cpp
    confidence: tuple[float, ...] = ()  # the drafter's top probability at each drafted position
    # The target's probabilities of the emitted tokens, when they are left to side work (the
    # next decode's wait on an accelerator); `emitted` has NaN in their place until then.
    pending: list[Job] | None = None
    host_syncs: int | None = None  # the host's waits for the device in this round, where counted (the eval audit)
