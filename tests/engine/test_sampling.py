"""Sampling with speculation must draw from exactly the target's distribution."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from engine import GenerationConfig, Message, SamplingConfig, TokenEvent
from engine.drafting import Draft
from engine.sampling import Sampler, parts_from_top, residual, softmax_at, softmax_parts
from engine.speculative import walk


@pytest.fixture(scope="module")
def real_rows(engine):
    """The target's and the drafter's logits for the first token of an open-ended prompt."""
    prompt = engine.prompt_ids([Message("user", "Name one fruit. One word only.")])
    engine.ctx.clear()
    engine.ctx.decode(prompt[:-1], all_logits=False)
    target_row = engine.ctx.decode(prompt[-1:], all_logits=True)[0].copy()
    engine.ctx.clear()
    dctx = engine.drafter.ctx
    dctx.clear()
    drafter_row = dctx.decode(prompt, all_logits=False)[0].copy()
    dctx.clear()
    return target_row, drafter_row


def _chi_square(counts: dict[int, int], p: np.ndarray, n: int) -> float:
    """p-value of the observed counts under p, rare tokens pooled so each bin expects >= 5."""
    order = np.argsort(p)[::-1]
    observed, expected, rest_obs, rest_exp = [], [], 0, 0.0
    for t in order:
        e = p[t] * n
        if e >= 5:
            observed.append(counts.get(int(t), 0))
            expected.append(e)
        else:
            rest_obs += counts.get(int(t), 0)
            rest_exp += e
    observed.append(rest_obs)
    expected.append(rest_exp)
    return float(sps.chisquare(observed, np.array(expected) * sum(observed) / sum(expected)).pvalue)


def _first_tokens(target_row, drafter_row, trials, temperature=1.0, seed=7, drafter_distribution=True):
    sampler = Sampler(SamplingConfig(temperature=temperature, seed=seed), len(target_row))
    rows = np.stack([target_row, target_row])  # row 1 (the bonus) is never reached in this count
    q = sampler.distribution(drafter_row)
    counts: dict[int, int] = {}
    for _ in range(trials):
        if drafter_distribution:
            d = sampler.draw(q)
            draft = Draft([d], drafter_row[None, :], sampler, {0: q})
        else:  # a drafter with no distribution always proposes its favourite
            draft = Draft([int(drafter_row.argmax())])
        v = walk(draft, rows, sampler)
        first = draft.tokens[0] if v.accepted else v.token
        counts[first] = counts.get(first, 0) + 1
    return counts


def test_first_token_with_speculation_is_distributed_as_the_target(real_rows):
    target_row, drafter_row = real_rows
    sampler = Sampler(SamplingConfig(temperature=1.0), len(target_row))
    p = sampler.distribution(target_row).astype(np.float64)
    q = sampler.distribution(drafter_row).astype(np.float64)
    assert np.abs(p - q).sum() > 0.05  # the two models disagree enough for the test to bite
    n = 10000
    counts = _first_tokens(target_row, drafter_row, n)
    assert _chi_square(counts, p, n) > 1e-3


def test_one_hot_drafter_is_also_exact(real_rows):
    target_row, drafter_row = real_rows
    p = Sampler(SamplingConfig(temperature=1.0), len(target_row)).distribution(target_row).astype(np.float64)
    n = 10000
    counts = _first_tokens(target_row, drafter_row, n, drafter_distribution=False)
    assert _chi_square(counts, p, n) > 1e-3


def test_the_test_can_fail(real_rows):
    """Drawing straight from the drafter is rejected by the same statistic."""
    target_row, drafter_row = real_rows
    sampler = Sampler(SamplingConfig(temperature=1.0, seed=3), len(target_row))
    p = sampler.distribution(target_row).astype(np.float64)
    q = sampler.distribution(drafter_row)
    n = 10000
    counts: dict[int, int] = {}
    for _ in range(n):
        t = sampler.draw(q)
        counts[t] = counts.get(t, 0) + 1
    assert _chi_square(counts, p, n) < 1e-6


def test_parts_from_the_normaliser_at_the_top_are_the_rows_own_with_the_ban():
    """A row's softmax_parts from its argmax and the normaliser there (what the device hands back),
    with banned tokens then given no probability: the host's parts of the row with the ban written in."""
    rng = np.random.default_rng(3)
    row = (rng.standard_normal(5000) * 3).astype(np.float32)
    top = int(row.argmax())
    banned = tuple(int(i) for i in np.argsort(row)[-4:-1])  # three of the likeliest after the top
    z = 1.0 / softmax_at(row, top)
    masked = row.copy()
    masked[list(banned)] = -np.inf
    largest, total = parts_from_top(row, top, z, banned)
    assert (largest, total) == pytest.approx(softmax_parts(masked), rel=1e-6)
    assert total < z - 0.01  # the ban took a real share out
    assert parts_from_top(row, top, 0.5) is None and parts_from_top(row, top, float("nan")) is None
    spoiled = row.copy()
    spoiled[banned[0]] = np.nan  # a NaN where a banned token's logit was
    assert parts_from_top(spoiled, top, z, banned) is None


def test_residual_is_normalised_max_of_difference():
    p = np.array([0.5, 0.3, 0.2])
    q = np.array([0.2, 0.6, 0.2])
    np.testing.assert_allclose(residual(p, q, 1), [1.0, 0.0, 0.0])
    np.testing.assert_allclose(residual(p, None, 0), [0.0, 0.6, 0.4])


def test_top_k_and_top_p_restrict_the_distribution():
    row = np.log(np.array([0.5, 0.25, 0.15, 0.1], dtype=np.float32))
    top_k = Sampler(SamplingConfig(temperature=1.0, top_k=2), 4).distribution(row)
    np.testing.assert_allclose(top_k, [2 / 3, 1 / 3, 0, 0], rtol=1e-5)
    top_p = Sampler(SamplingConfig(temperature=1.0, top_p=0.8), 4).distribution(row)
    np.testing.assert_allclose(top_p, [0.5 / 0.9, 0.25 / 0.9, 0.15 / 0.9, 0], rtol=1e-5)


def test_a_seed_reproduces_a_sampled_reply(engine, prompts):
    cfg = GenerationConfig(max_tokens=24, depth=2, sampling=SamplingConfig(temperature=0.8, seed=42))

    def fresh():  # from empty caches: a prompt prefilled in one batch, both times
        engine.ctx.clear()
        engine.drafter.reset()
        return list(engine.stream(prompts["prose"], cfg))[-1]

    a, b = fresh(), fresh()
    assert a.token_ids == b.token_ids
    events = list(engine.stream(prompts["prose"], cfg))
    assert any(isinstance(e, TokenEvent) for e in events)
