"""The speculative round and the generation loop built on it.

One round: the drafter proposes up to `depth` tokens; the target verifies [last, d1 .. dk]
in one batch; the walk keeps drafts while the target agrees and ends with the target's own
token; the round names each emitted token's provenance; both caches rewind to what was
kept. Depth 0 is the same round with nothing drafted: one target pass, one plain token.
The reply's first token is round 0: the same walk over the prompt's own last row.

The round speaks to the runtime protocol alone (engine.runtime.protocol). Each acceleration a
backend offers is one seam, chosen once by its `Acceleration`: the device's argmax and softmax
(`device_choices`, `device_parts`), side work in a decode's wait (`side`), and whatever a
drafter does on its own context (a draft model's overlap and guess).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Generator, Iterator

import numpy as np

from engine.chat import StopMatcher, TextStream
from engine.depth import DepthPolicy, RoundSeconds
from engine.drafting import Draft, Drafter, VerifyBatch
from engine.events import Event, FinishReason, RoundEvent, TokenEvent, TokenKind
from engine.reporting import Outbox, round_event, run_stats, token_event
from engine.rounds import Candidates, Emitted, GenerationConfig, Prefill, Round, Verdict
from engine.runtime.protocol import RuntimeContext
from engine.runtime.side import Job, SideWork
from engine.sampling import Sampler, residual, softmax_at, top_candidates

NO_DRAFT = Draft()
NO_PREFILL = Prefill()  # a reply whose caches hold history[:-1] already

__all__ = ["GenerationConfig", "Prefill", "generate", "provenance", "speculative_round", "walk"]


def speculative_round(
    target: RuntimeContext,
    drafter: Drafter | None,
    history: list[int],
    depth: int,
    sampler: Sampler,
    config: GenerationConfig,
    banned: tuple[int, ...] = (),
    prefill_row: np.ndarray | None = None,
    side: SideWork | None = None,
    pipeline: bool = False,
) -> Round:
    """One round. `history` is every committed token; the target's cache holds all but the last.

    With `prefill_row` (round 0) the cache already holds all of history and that row is
    the target's verdict: nothing is drafted or decoded. `banned` tokens get no probability
    from either model (ignore_eog's end-of-generation ids). With `side`, greedy decoding
    leaves the probabilities it reports to side work: the draft's while the target verifies
    it, the target's for the next decode (the round's `pending`). With `pipeline` (a greedy plain
    round that another follows) the target may launch the next step on its own guess (pipeline_greedy).
    """
    n = len(history)
    llama_before = _backend_s(target, drafter)
    syncs_before = target.host_syncs
    deferred = _defers_probabilities(target, side, sampler, config)
    t0 = time.perf_counter()

    # Draft.
    draft = NO_DRAFT
    if drafter is not None and depth > 0 and prefill_row is None:
        draft = drafter.draft(history, depth, sampler, config.p_min, banned, side)
        if deferred and side is not None and draft.tokens:  # deferred says side is there
            side.add(draft.prepare)  # its probabilities, in the verify's wait
    t1 = time.perf_counter()

    # Verify: one batch over [last, *draft] (round 0: the prompt's own last row).
    if pipeline and depth == 0 and prefill_row is None:
        target.pipeline_greedy(banned)
    lean = sampler.greedy and not config.top_candidates and not deferred  # the device's parts are all it reads
    rows, parts = _verify(target, history[-1], draft, prefill_row, sampler, config, banned, side, lean)
    t2 = time.perf_counter()

    # Walk.
    tops = target.device_choices(banned) if prefill_row is None else None  # the device's argmax, where it took it
    if parts is not None and None not in parts:
        deferred = False  # the device took each row's softmax: every probability is a lookup
    keep_dists = bool(config.top_candidates)
    verdict = walk(draft, rows, sampler, keep_dists, config.probabilities and not deferred, tops, parts)
    pending = (
        _later_probabilities(side, target, drafter, draft, verdict, rows) if deferred and side is not None else None
    )
    t3 = time.perf_counter()

    # Rewind: both caches keep history and the accepted drafts; the target's own token is the
    # new "last", decoded at the start of the next round.
    if prefill_row is None:
        keep = n + verdict.accepted
        target.rewind(keep)
        if drafter is not None:
            drafter.verified(VerifyBatch(tuple(history[-1:] + draft.tokens), n - 1, verdict.accepted))
            drafter.rewind(keep)
    t4 = time.perf_counter()

    want_probs = config.probabilities or not sampler.greedy
    emitted = provenance(draft, verdict, config.top_candidates, want_probs)
    confidence = draft.confidences() if want_probs else ()
    llama_s = _backend_s(target, drafter) - llama_before
    syncs_after = target.host_syncs
    syncs = None if syncs_before is None or syncs_after is None else syncs_after - syncs_before
    return Round(
        draft,
        verdict,
        emitted,
        t1 - t0,
        t2 - t1,
        t4 - t2,
        t4 - t3,
        llama_s,
        confidence=confidence,
        pending=pending,
        host_syncs=syncs,
    )


def _defers_probabilities(
    target: RuntimeContext, side: SideWork | None, sampler: Sampler, config: GenerationConfig
) -> bool:
    """Whether the probabilities this round reports go to side work (overlap_probabilities): greedy
    decoding needs none of them, so on an accelerator they are computed in the next decode's wait."""
    return (
        side is not None
        and target.acceleration.overlap_probabilities
        and sampler.greedy
        and config.probabilities
        and not config.top_candidates
    )


def _verify(
    target: RuntimeContext,
    last: int,
    draft: Draft,
    prefill_row: np.ndarray | None,
    sampler: Sampler,
    config: GenerationConfig,
    banned: tuple[int, ...],
    side: SideWork | None,
    lean: bool = False,
) -> tuple[np.ndarray, list[tuple[float, float] | None] | None]:
    """The target's rows for [last, *draft], banned tokens given no probability, with each row's
    softmax parts where the device took them; the side work queued for the verify's wait done.
    `lean`: the round reads the device's argmax and parts alone, so the rows may stay there (defer_rows)."""
    on_device = bool(banned) and prefill_row is None and target.ban_in_rows(banned)  # else written in below
    if lean and prefill_row is None:
        target.defer_rows()
    if prefill_row is None and draft.unread() is not None:  # ids still on the device: one wait for both
        rows = target.decode_unread(last, draft)
        parts = target.device_parts(rows, banned) if config.probabilities and sampler.greedy else None
    elif prefill_row is None:
        rows = target.decode([last, *draft.tokens], all_logits=True, side=side)
        asked = config.probabilities and sampler.greedy
        parts = target.device_parts(rows, banned) if asked else None  # read before the ban is written in
    else:
        rows, parts = prefill_row[None, :], None
    if banned and not on_device:
        rows[:, banned] = -np.inf
    if side is not None:
        side.run()  # the draft's last row and its probabilities: done in the verify's wait on a GPU
    return rows, parts


def _later_probabilities(
    side: SideWork, target: RuntimeContext, drafter: Drafter | None, draft: Draft, verdict: Verdict, rows: np.ndarray
) -> list[Job]:
    """The emitted tokens' target probabilities as side work, a job a row, each free to wait for a
    later gap (the drafter's steps are short)."""
    chosen = [*draft.tokens[: verdict.accepted], verdict.token]
    kept = rows[: len(chosen)]
    if drafter is None or drafter.ctx is None or not draft.tokens:  # the next decode is likely the target's own,
        kept, reads = kept.copy(), None  # which reuses the buffer these rows are in
    else:  # read in place during the drafter's next step; at the latest before the target decodes
        reads = target
    return [side.add(functools.partial(softmax_at, row, t), reads, may_wait=True) for row, t in zip(kept, chosen)]


def _backend_s(target: RuntimeContext, drafter: Drafter | None) -> float:
    """Time inside the backend's decodes so far, the target's and the drafter's own."""
    own = drafter.ctx if drafter is not None else None
    return target.decode_s + (own.decode_s if own is not None else 0.0)


def provenance(draft: Draft, verdict: Verdict, top: int, want_probs: bool) -> list[Emitted]:
    """The round's tokens: accepted drafts, then the target's own, named by where they came from."""
    accepted, drafts = verdict.accepted, draft.tokens
    tokens = [*drafts[:accepted], verdict.token]
    drafted = min(len(tokens), len(drafts))
    draft_probs = draft.probs(tokens[:drafted]) if want_probs and drafted else [None] * drafted
    target_probs = verdict.target_probs
    out = [Emitted(t, TokenKind.ACCEPTED, target_probs[i], draft_probs[i]) for i, t in enumerate(tokens[:accepted])]
    last, p = verdict.token, target_probs[accepted]
    if not drafts:
        out.append(Emitted(last, TokenKind.PLAIN, p))
    elif accepted == len(drafts):
        out.append(Emitted(last, TokenKind.BONUS, p))
    else:
        refused = drafts[accepted]
        rank = refused_p = None
        if want_probs and draft.rows is not None:
            rank = draft.rank(accepted, last)
            refused_p = draft.probs([*([None] * accepted), refused])[accepted]
        out.append(Emitted(last, TokenKind.REPLACED, p, draft_probs[accepted], refused, rank, refused_p))
    if top:
        out = [
            e._replace(target_top=_top(verdict.target_dists, pos, top), draft_top=_top_draft(draft, pos, top))
            for pos, e in enumerate(out)
        ]
    return out


def walk(
    draft: Draft,
    rows: np.ndarray,
    sampler: Sampler,
    keep_dists: bool = False,
    probabilities: bool = True,
    tops: list[int | None] | None = None,
    parts: list[tuple[float, float] | None] | None = None,
) -> Verdict:
    """Keep drafts while the target agrees; end with the target's own token.

    Greedy: a draft is kept while it is the target's argmax (`tops[i]` where the device took
    it, Context.device_choices; else a scan of the row, row by row), each probability a lookup where
    `parts` has the row's softmax_parts (Context.device_parts). Sampling: draft d is kept
    with probability min(1, p(d) / q(d)); at the first rejection the token is drawn from
    normalised max(0, p - q); if every draft is kept, the bonus is drawn from p. The output
    is then distributed exactly as the target's own sampling would be.
    """
    probs: list[float] = []
    dists: list[np.ndarray | None] = []
    if sampler.greedy:
        chosen: list[int] = []
        for i in range(len(draft.tokens) + 1):
            top = None if tops is None else tops[i]
            chosen.append(int(rows[i].argmax()) if top is None else top)
            if i == len(draft.tokens) or chosen[-1] != draft.tokens[i]:
                break
        if keep_dists:
            dists = [sampler.distribution(rows[i]) for i in range(len(chosen))]
        if probabilities:
            probs = [_chosen_p(rows, i, t, tops, parts) for i, t in enumerate(chosen)]
        else:
            probs = [math.nan] * len(chosen)
        return Verdict(len(chosen) - 1, chosen[-1], probs, dists)

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


def _chosen_p(
    rows: np.ndarray,
    i: int,
    token: int,
    tops: list[int | None] | None,
    parts: list[tuple[float, float] | None] | None,
) -> float:
    """p(token) under row i: where the token is the device's argmax and the device took the row's
    softmax parts, exp(0) over the normaliser, nothing of the row read (rows left on the device stay)."""
    part = None if parts is None else parts[i]
    if part is not None and tops is not None and tops[i] == token:
        return 1.0 / part[1]
    return softmax_at(rows[i], token, part)


def generate(
    target: RuntimeContext,
    drafter: Drafter | None,
    policy: DepthPolicy,
    history: list[int],
    config: GenerationConfig,
    cancelled: Callable[[], bool] = lambda: False,
    prefill: Prefill = NO_PREFILL,
) -> Iterator[Event]:
    """Run rounds until a stop; yield every token, every round, then the run's totals.

    The caches must already hold history[:-1], or all of it with `prefill.first_row`.
    `history` grows in place. Timing counts only the engine's own work, not the time the
    consumer holds an event. The policy chooses each round's depth and is told how it went.
    """
    model = target.model
    sampler = Sampler(config.sampling, model.n_vocab)
    text, stops = TextStream(), StopMatcher(config.stop)
    banned = model.eog_tokens() if config.ignore_eog else ()
    rounds: list[tuple[RoundEvent, float]] = []
    first_row, generated, pieces = prefill.first_row, 0, []
    shown: list[TokenEvent] = []  # the tokens the reply shows, for its acceptance by content
    finish = FinishReason.MAX_TOKENS
    # On an accelerator a round's probabilities are computed while the next round's first
    # decode runs, so its events go out one round late (milliseconds); elsewhere at once.
    # A draft model that takes in its last draft during the verify queues that decode here too.
    overlapped = target.acceleration.overlap_probabilities or (drafter is not None and drafter.overlaps)
    side = SideWork() if overlapped else None
    outbox = Outbox()
    # A round's time runs from the end of the last one's work (its events out, its tail done) to its
    # tokens made, less the time the consumer held the events handed over in between.
    start, held = time.perf_counter(), 0.0
    while generated < config.max_tokens and finish is FinishReason.MAX_TOKENS:
        if cancelled():
            finish = FinishReason.CANCELLED
            break
        room = target.n_ctx - target.n_past  # rows the target cache can still take
        if room < 1 and first_row is None:
            finish = FinishReason.CONTEXT_FULL
            break
        wanted = policy.choose()
        # The one depth cap: what the drafter says it can draft (a DFlash block, chained heads: one a head).
        deepest = drafter.max_depth if drafter is not None else 0
        depth = max(0, min(wanted, deepest, config.max_tokens - generated - 1, room - 1, target.max_rows - 1))
        try:
            more = wanted == 0 and sampler.greedy and generated + 1 < config.max_tokens  # a plain step follows
            r = speculative_round(target, drafter, history, depth, sampler, config, banned, first_row, side, more)
        except Exception:
            yield from outbox.release()  # what the reply had so far is the user's
            raise
        events, index = [], len(rounds)
        for pos, e in enumerate(r.emitted):
            history.append(e.token)
            generated += 1
            eog = model.is_eog(e.token)
            # The reply's last token (max tokens) shows a character it cuts as U+FFFD, as the text does.
            piece = "" if eog else text.push(model.piece(e.token), final=generated == config.max_tokens)
            events.append(token_event(e, piece, index, pos, model))
            if eog:
                finish = FinishReason.EOG
                break
        now = time.perf_counter()
        round_s, start, held = now - start - held, now, 0.0
        if first_row is None:
            policy.observe(len(r.draft.tokens), r.verdict.accepted, RoundSeconds(r.draft_s, r.verify_s, r.commit_s))
        held += yield from _handed(outbox.release())  # the previous round's, settled by this round's first decode
        released, stopped = stops.push_all(events)
        pieces += [e.text for e in released]
        shown += released
        outbox.put(released)
        if stopped:
            finish = FinishReason.STOP_STRING
        summary = round_event(r, index, wanted, round_s, from_prefill=first_row is not None)
        outbox.wait_for(index, r)
        outbox.put([summary])
        rounds.append((summary, round_s))
        if outbox.round is None:  # nothing left to side work: out at once
            held += yield from _handed(outbox.release())
        first_row = None
    if finish is not FinishReason.STOP_STRING:
        released = stops.flush()  # no stop string completed: the held text is the model's
        pieces.extend(e.text for e in released)
        shown.extend(released)
        outbox.put(released)
    yield from outbox.release()
    text.flush()  # a character cut by an end of turn or a Stop: no token shows it, so the text leaves it out
    yield run_stats(
        rounds,
        finish,
        policy.setting,
        history[len(history) - generated :],
        "".join(pieces),
        prefill,
        target.n_ctx,
        shown,
    )


def _handed(events: list[Event]) -> Generator[Event, None, float]:
    """Yield `events`; return how long the consumer held them (no time of the engine's)."""
    t0 = time.perf_counter()
    yield from events
    return time.perf_counter() - t0


def _top(dists: list[np.ndarray | None], pos: int, n: int) -> Candidates:
    dist = dists[pos] if n and pos < len(dists) else None
    return () if dist is None else tuple(top_candidates(dist, n))


def _top_draft(draft: Draft, pos: int, n: int) -> Candidates:
    if not n or pos >= len(draft.tokens):
        return ()
    dist = draft.distribution(pos)
    return () if dist is None else tuple(top_candidates(dist, n))
