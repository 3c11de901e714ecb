"""The speculative round and the generation loop built on it.

One round: the drafter proposes up to `depth` tokens; the target verifies
[last, d1 .. dk] in one batch; the walk keeps drafts while the target agrees and ends
with the target's own token; both caches rewind to what was kept. Depth 0 is the same
round with nothing drafted: one target pass, one plain token.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from engine.chat import StopMatcher, TextStream
from engine.drafters import Draft, Drafter
from engine.events import Event, FinishReason, RoundEvent, RunStats, TokenEvent, TokenKind
from engine.runtime import Context
from engine.sampling import Sampler, SamplingConfig, residual, top_candidates

NO_DRAFT = Draft()


@dataclass(frozen=True)
class GenerationConfig:
    """What to generate and how."""

    max_tokens: int = 512
    depth: int = 2  # drafted tokens per round; 0 turns speculation off
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


@dataclass
class Verdict:
    """What the target made of one draft."""

    accepted: int  # drafts kept
    token: int  # the target's own token after them
    target_probs: list[float]  # for each emitted token
    target_dists: list[np.ndarray | None]  # kept only when someone asked for candidates


@dataclass
class Round:
    draft: Draft
    verdict: Verdict
    draft_s: float
    verify_s: float
    commit_s: float
    rewind_s: float
    llama_s: float  # time inside llama.cpp


def speculative_round(
    target: Context,
    drafter: Drafter | None,
    history: list[int],
    depth: int,
    sampler: Sampler,
    p_min: float = 0.0,
    keep_dists: bool = False,
    probabilities: bool = True,
    banned: tuple[int, ...] = (),
) -> Round:
    """One round. `history` is every committed token; the target's cache holds all but the last.

    `banned` tokens get no probability from either model (ignore_eog's end-of-generation ids).
    """
    n = len(history)
    drafter_ctx = getattr(drafter, "ctx", None)
    llama_before = target.decode_s + (drafter_ctx.decode_s if drafter_ctx else 0.0)
    t0 = time.perf_counter()

    draft = drafter.draft(history, depth, sampler, p_min, banned) if drafter is not None and depth > 0 else NO_DRAFT
    t1 = time.perf_counter()

    rows = target.decode([history[-1], *draft.tokens], all_logits=True)
    if banned:
        rows[:, banned] = -np.inf
    t2 = time.perf_counter()

    verdict = walk(draft, rows, sampler, keep_dists, probabilities)
    t3 = time.perf_counter()
    # The caches keep history and the accepted drafts; the target's own token is the new
    # "last" and is decoded at the start of the next round.
    keep = n + verdict.accepted
    target.rewind(keep)
    if drafter is not None:
        drafter.rewind(keep)
    t4 = time.perf_counter()

    llama_after = target.decode_s + (drafter_ctx.decode_s if drafter_ctx else 0.0)
    return Round(draft, verdict, t1 - t0, t2 - t1, t4 - t2, t4 - t3, llama_after - llama_before)


def walk(
    draft: Draft, rows: np.ndarray, sampler: Sampler, keep_dists: bool = False, probabilities: bool = True
) -> Verdict:
    """Keep drafts while the target agrees; end with the target's own token.

    Greedy: a draft is kept while it is the target's argmax. Sampling: draft d is kept
    with probability min(1, p(d) / q(d)); at the first rejection the token is drawn from
    normalised max(0, p - q); if every draft is kept, the bonus is drawn from p. The output
    is then distributed exactly as the target's own sampling would be.
    """
    probs: list[float] = []
    dists: list[np.ndarray | None] = []
    if sampler.greedy:
        softmax_at = _softmax_at if probabilities else _no_prob
        for i, d in enumerate(draft.tokens):
            token = int(rows[i].argmax())
            probs.append(softmax_at(rows[i], token))
            if keep_dists:
                dists.append(sampler.distribution(rows[i]))
            if token != d:
                return Verdict(i, token, probs, dists)
        k = len(draft.tokens)
        token = int(rows[k].argmax())
        probs.append(softmax_at(rows[k], token))
        if keep_dists:
            dists.append(sampler.distribution(rows[k]))
        return Verdict(k, token, probs, dists)

    for i, d in enumerate(draft.tokens):
        p = sampler.distribution(rows[i])
        q = draft.distribution(i)
        q_d = float(q[d]) if q is not None else 1.0
        dists.append(p if keep_dists else None)
        if sampler.uniform() * q_d < float(p[d]):
            probs.append(float(p[d]))
            continue
        token = sampler.draw(residual(p, q, d))
        probs.append(float(p[token]))
        return Verdict(i, token, probs, dists)
    k = len(draft.tokens)
    p = sampler.distribution(rows[k])
    token = sampler.draw(p)
    probs.append(float(p[token]))
    dists.append(p if keep_dists else None)
    return Verdict(k, token, probs, dists)


def _no_prob(row: np.ndarray, token: int) -> float:
    return math.nan


def _softmax_at(row: np.ndarray, token: int) -> float:
    top = row.max()
    return math.exp(float(row[token] - top)) / float(np.exp(row - top).sum())


@dataclass
class _Tally:
    """Running totals for RunStats."""

    depth: int
    drafted_at: list[int] = field(default_factory=list)
    accepted_at: list[int] = field(default_factory=list)
    rounds: int = 0
    draft_s: float = 0.0
    verify_s: float = 0.0
    commit_s: float = 0.0
    rewind_s: float = 0.0
    overhead_s: float = 0.0
    decode_s: float = 0.0

    def add(self, r: Round, round_s: float) -> None:
        self.rounds += 1
        drafted, accepted = len(r.draft.tokens), r.verdict.accepted
        while len(self.drafted_at) < drafted:
            self.drafted_at.append(0)
            self.accepted_at.append(0)
        for i in range(drafted):
            self.drafted_at[i] += 1
        for i in range(accepted):
            self.accepted_at[i] += 1
        self.draft_s += r.draft_s
        self.verify_s += r.verify_s
        self.commit_s += r.commit_s
        self.rewind_s += r.rewind_s
        self.overhead_s += round_s - r.llama_s
        self.decode_s += round_s


def generate(
    target: Context,
    drafter: Drafter | None,
    history: list[int],
    config: GenerationConfig,
    piece: Callable[[int], bytes],
    is_eog: Callable[[int], bool],
    cancelled: Callable[[], bool] = lambda: False,
    prompt_tokens: int = 0,
    prefill_s: float = 0.0,
    tuner=None,
    first_row: np.ndarray | None = None,
) -> Iterator[Event]:
    """Run rounds until a stop; yield every token, every round, then the run's totals.

    The caches must already hold history[:-1] (the prefill). `history` grows in place.
    With `first_row`, the logits of the prompt's last token from a prefill that took it in
    (the target's cache holds all of history), the first token comes from that row, as in
    llama.cpp: round 0, no draft, no decode time. Timing counts only the engine's own
    work, not the time the consumer holds an event. A tuner (engine.tuner.AutoDepth)
    chooses each round's depth and is told how it went.
    """
    sampler = Sampler(config.sampling, target.model.n_vocab)
    text = TextStream()
    stops = StopMatcher(config.stop)
    tally = _Tally(config.depth)
    generated: list[int] = []
    pieces: list[str] = []
    finish, message = FinishReason.MAX_TOKENS, ""
    want_top = config.top_candidates
    banned = target.model.eog_tokens() if config.ignore_eog else ()
    want_probs = config.probabilities or not sampler.greedy
    from_prefill = 0

    def token_event(token: int, kind: TokenKind, round_index: int, pos: int, **fields) -> tuple[TokenEvent, bool]:
        """The event for one emitted token (history grows); and whether it ends the turn."""
        history.append(token)
        generated.append(token)
        eog = is_eog(token)
        chunk = "" if eog else text.push(piece(token))
        return TokenEvent(token_id=token, text=chunk, kind=kind, round_index=round_index, position=pos, **fields), eog

    if first_row is not None and config.max_tokens > 0 and not cancelled():
        start = time.perf_counter()
        if banned:
            first_row[list(banned)] = -np.inf
        probs = sampler.distribution(first_row) if not sampler.greedy or want_top else None
        token = sampler.choose(first_row, probs)
        p = float(probs[token]) if probs is not None else _softmax_at(first_row, token) if want_probs else math.nan
        event, eog = token_event(token, TokenKind.PLAIN, 0, 0, target_prob=p, target_top=_top([probs], 0, want_top))
        from_prefill = 1
        released, stopped = stops.push(event)
        for e in released:
            pieces.append(e.text)
            yield e
        overhead_ms = (time.perf_counter() - start) * 1e3
        yield RoundEvent(0, 0, 0, 0.0, 0.0, 0.0, 0.0, overhead_ms, (), 0, from_prefill=True)
        if eog:
            finish = FinishReason.EOG
        elif stopped:
            finish = FinishReason.STOP_STRING
    stopped_early = finish is not FinishReason.MAX_TOKENS

    while len(generated) < config.max_tokens and not stopped_early:
        if cancelled():
            finish = FinishReason.CANCELLED
            break
        start = time.perf_counter()
        room = target.n_ctx - target.n_past  # rows the target cache can still take
        if room < 1:
            finish = FinishReason.CONTEXT_FULL
            message = f"The reply filled the context window ({target.n_ctx:,} tokens); start a new conversation."
            break
        wanted = tuner.choose() if tuner is not None else config.depth
        depth = max(0, min(wanted, config.max_tokens - len(generated) - 1, room - 1, target.max_rows - 1))
        r = speculative_round(
            target, drafter, history, depth, sampler, config.p_min, bool(want_top), config.probabilities, banned
        )
        draft, verdict = r.draft, r.verdict
        round_index = tally.rounds + from_prefill
        emitted = [*draft.tokens[: verdict.accepted], verdict.token]
        events: list[TokenEvent] = []
        stop_here = False
        for pos, token in enumerate(emitted):
            if not draft.tokens:
                kind = TokenKind.PLAIN
            elif pos < verdict.accepted:
                kind = TokenKind.ACCEPTED
            elif verdict.accepted < len(draft.tokens):
                kind = TokenKind.REPLACED
            else:
                kind = TokenKind.BONUS
            rejected = draft.tokens[pos] if kind is TokenKind.REPLACED else None
            event, eog = token_event(
                token,
                kind,
                round_index,
                pos,
                target_prob=verdict.target_probs[pos],
                draft_prob=draft.prob(pos, token) if want_probs and pos < len(draft.tokens) else None,
                rejected_id=rejected,
                rejected_text=piece(rejected).decode("utf-8", errors="replace") if rejected is not None else None,
                target_top=_top(verdict.target_dists, pos, want_top),
                draft_top=_top_draft(draft, pos, want_top),
            )
            events.append(event)
            if eog:
                finish, stop_here = FinishReason.EOG, True
                break
        round_s = time.perf_counter() - start
        tally.add(r, round_s)
        if tuner is not None:
            tuner.observe(len(draft.tokens), verdict.accepted)

        for event in events:
            released, stopped = stops.push(event)
            for e in released:
                pieces.append(e.text)
                yield e
            if stopped:
                finish, stop_here = FinishReason.STOP_STRING, True
                break
        yield RoundEvent(
            round_index=round_index,
            drafted=len(draft.tokens),
            accepted=verdict.accepted,
            draft_ms=r.draft_s * 1e3,
            verify_ms=r.verify_s * 1e3,
            commit_ms=r.commit_s * 1e3,
            rewind_ms=r.rewind_s * 1e3,
            overhead_ms=(round_s - r.llama_s) * 1e3,
            draft_tokens=tuple(draft.tokens),
            depth=wanted,
        )
        if stop_here:
            break

    if finish is not FinishReason.STOP_STRING:
        for e in stops.flush():  # no stop string completed: the held text is the model's
            pieces.append(e.text)
            yield e
        tail = text.flush()
        if tail:
            pieces.append(tail)
    if finish is FinishReason.CANCELLED:
        message = "Stopped."

    per_pos = tuple(a / d if d else 0.0 for a, d in zip(tally.accepted_at, tally.drafted_at))
    yield RunStats(
        prompt_tokens=prompt_tokens,
        prefill_s=prefill_s,
        generated_tokens=len(generated),
        decode_s=tally.decode_s,
        rounds=tally.rounds,
        depth=-1 if tuner is not None else config.depth,
        drafted=sum(tally.drafted_at),
        accepted=sum(tally.accepted_at),
        acceptance_per_position=per_pos,
        drafted_per_position=tuple(tally.drafted_at),
        accepted_per_position=tuple(tally.accepted_at),
        draft_s=tally.draft_s,
        verify_s=tally.verify_s,
        commit_s=tally.commit_s,
        rewind_s=tally.rewind_s,
        overhead_s=tally.overhead_s,
        finish_reason=finish,
        message=message,
        text="".join(pieces),
        token_ids=tuple(generated),
        from_prefill=from_prefill,
    )


def _top(dists: list[np.ndarray | None], pos: int, n: int) -> tuple[tuple[int, float], ...]:
    if not n or pos >= len(dists) or dists[pos] is None:
        return ()
    return tuple(top_candidates(dists[pos], n))


def _top_draft(draft: Draft, pos: int, n: int) -> tuple[tuple[int, float], ...]:
    if not n or pos >= len(draft.tokens):
        return ()
    dist = draft.distribution(pos)
    return () if dist is None else tuple(top_candidates(dist, n))
