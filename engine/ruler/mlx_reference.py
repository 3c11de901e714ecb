"""The reference loops on MLX: mlx-lm's own plain and speculative generation on our prompt's token ids.

Both run as our engine's reply runs: the caches are prefilled with the whole prompt (timed as the
prefill) and the first token is the argmax of the prompt's last row; then mlx-lm's generator takes
that token as its prompt over the prefilled caches and writes the rest, so its decode time covers
the same tokens ours does. End-of-generation ids are banned in the sampler (the ruler's runs are of
a fixed length), which keeps mlx-lm on its fast path (a logits processor would not).
"""

from __future__ import annotations

import time

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.generate import generate_step, speculative_generate_step
from mlx_lm.models.cache import make_prompt_cache

from engine.ruler.oracle_arms import ReferenceRun

PREFILL_STEP = 512  # mlx-lm's own default for speculative generation


def banning_sampler(n_vocab: int, banned: tuple[int, ...]):
    """Greedy over log-probabilities with `banned` ids never chosen: mlx-lm's greedy sampler, masked."""
    if not banned:
        return lambda logprobs: mx.argmax(logprobs, axis=-1)
    mask = mx.zeros((n_vocab,), dtype=mx.float32)
    mask[mx.array(banned)] = -mx.inf
    return lambda logprobs: mx.argmax(logprobs + mask, axis=-1)


def _prefill(module: nn.Module, prompt: list[int]) -> tuple[list, mx.array]:
    """A fresh cache holding `prompt`, and the prompt's last row."""
    cache = make_prompt_cache(module)
    ids = mx.array(prompt, dtype=mx.uint32)
    for start in range(0, len(prompt), PREFILL_STEP):
        logits = module(ids[start : start + PREFILL_STEP][None], cache=cache)
        mx.eval([c.state for c in cache])
    row = logits[0, -1]
    mx.eval(row)
    return cache, row


def mlx_lm_run(
    target: nn.Module,
    drafter: nn.Module | None,
    prompt: list[int],
    n_tokens: int,
    depth: int,
    n_vocab: int,
    banned: tuple[int, ...] = (),
) -> ReferenceRun:
    """`n_tokens` greedy tokens after `prompt`: mlx-lm's generate_step at depth 0, else its
    speculative_generate_step drafting `depth` tokens a round with `drafter`."""
    sampler = banning_sampler(n_vocab, banned)
    t0 = time.perf_counter()
    cache, row = _prefill(target, prompt)
    draft_cache = _prefill(drafter, prompt)[0] if depth > 0 and drafter is not None else []
    first = int(sampler(row[None])[0])
    t1 = time.perf_counter()
    tokens, flags = [first], []
    y = mx.array([first], dtype=mx.uint32)
    if n_tokens > 1:
        if depth > 0 and drafter is not None:
            steps = speculative_generate_step(
                y, target, drafter, num_draft_tokens=depth, max_tokens=n_tokens - 1, sampler=sampler,
                prompt_cache=cache + draft_cache,
            )  # fmt: skip
            for token, _, from_draft in steps:
                tokens.append(int(token))
                flags.append(bool(from_draft))
        else:
            for token, _ in generate_step(y, target, max_tokens=n_tokens - 1, sampler=sampler, prompt_cache=cache):
                tokens.append(int(token))
    t2 = time.perf_counter()
    rounds, drafted, accepted, per_position = (
        _rounds(flags, depth, n_tokens - 1) if flags else (len(tokens) - 1, 0, 0, [])
    )
    return ReferenceRun(tokens, t1 - t0, t2 - t1, rounds, drafted, accepted, per_position)


def _rounds(flags: list[bool], depth: int, budget: int) -> tuple[int, int, int, list[float]]:
    """Rounds, drafts and acceptances from mlx-lm's from_draft flags: a round is its kept drafts and
    the target's own token; it drafts min(depth, tokens left) (speculative_generate_step's rule)."""
    drafted_at = [0] * depth
    accepted_at = [0] * depth
    rounds = written = 0
    i = 0
    while i < len(flags):
        k = min(depth, budget - written)
        rounds += 1
        kept = 0
        while i < len(flags) and flags[i]:
            kept, i = kept + 1, i + 1
        for pos in range(k):
            drafted_at[pos] += 1
            accepted_at[pos] += pos < kept
        written += kept + (i < len(flags))
        i += 1  # the target's own token
    per_position = [a / d for a, d in zip(accepted_at, drafted_at) if d]
    return rounds, sum(drafted_at), sum(accepted_at), per_position
