"""Measuring a box profile: target passes of 1..k+1 rows, a draft model's steps, and calibration
replies for acceptance and a round's overhead, as steps (MeasureStep) a caller may pause between.
Saving, loading and judging what is measured is engine.measure.profile's."""

from __future__ import annotations

import statistics
import time
from collections.abc import Generator
from dataclasses import dataclass, replace

from engine.chat import Message, template_for, tokenize_prompt
from engine.depth import MAX_DEPTH, FixedDepth
from engine.drafting import ModelDrafter
from engine.drafting.model import step_plan
from engine.events import RoundEvent
from engine.measure.costmodel import BoxProfile, conditional_acceptance
from engine.measure.keys import machine_id, model_file, profile_key
from engine.measure.soundness import LoadMeter, MachineLoad, spread
from engine.runtime.protocol import RunOptions, TextModel
from engine.speculative import GenerationConfig, Prefill, generate

CALIBRATION_PROMPTS = (
    "Write a Python function that returns the n-th Fibonacci number, with a docstring.",
    "Describe a walk along a river on a summer evening in a few sentences.",
)


@dataclass(frozen=True)
class MeasureStep:
    """How far a box measurement has got: `done` of `total` steps (row timings, then calibration
    tokens), and what it is doing. Between two steps nothing is being timed: a caller may run a
    reply there (the app does) and carry on after it."""

    done: int
    total: int
    label: str


Steps = Generator[MeasureStep, None, "BoxProfile"]


def run_steps(steps: Steps) -> BoxProfile:
    """A measurement's steps run one after another, with no pause: its profile."""
    while True:
        try:
            next(steps)
        except StopIteration as end:
            return end.value


def _times(fn, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def _calibration_prompt(target: TextModel) -> list[int]:
    return tokenize_prompt(target, template_for(target).render([Message("user", CALIBRATION_PROMPTS[0])]))


GRAPH_WARM_PASSES = 2  # ggml-cuda runs a new shape directly, captures it on the next pass, replays after


def timing_rows(
    target: TextModel, options: RunOptions, prompt: list[int], max_depth: int, repeats: int, say, total: int = 0
) -> Generator[MeasureStep, None, tuple[list[float], float, list[float]]]:
    """Median seconds of a target pass of 1..max_depth+1 rows, after the prompt, sizes interleaved;
    of undoing a rejected draft (all but the first row of the largest pass); and each size's spread.

    On a GPU each timed pass follows untimed ones of its size: a round at a fixed depth
    verifies one shape again and again, and a CUDA graph is captured on a shape's second pass
    in a row and replayed from the third. Timing every pass after another shape priced each
    without its graph (the plain pass most of all: deeper rounds looked cheaper than they run).

    A step after the warm-up and after each repeat: `repeats + 1` of the measurement's `total`."""
    small = replace(options, n_ctx=min(options.n_ctx, 1024))  # beside the loaded context: no second full cache
    ctx = target.new_context(max_rows=max_depth + 1, options=small)
    ctx.decode(prompt[:-1], all_logits=False)
    base = ctx.n_past
    filler = (prompt * (max_depth + 2))[-(max_depth + 1) :]  # real tokens at real positions
    label = f"timing target passes of 1 to {max_depth + 1} rows"
    say(label)

    rollbacks: list[float] = []

    def one_pass(rows: int) -> float:
        t0 = time.perf_counter()
        ctx.decode(filler[:rows], all_logits=True)
        elapsed = time.perf_counter() - t0
        if rows == max_depth + 1:  # keep the last committed token, undo the drafts after it
            t1 = time.perf_counter()
            ctx.rewind(base + 1)
            rollbacks.append(time.perf_counter() - t1)
        ctx.rewind(base)
        return elapsed

    samples: list[list[float]] = [[] for _ in range(max_depth + 1)]
    try:
        for rows in range(1, max_depth + 2):  # warm-up: every batch shape once
            one_pass(rows)
        rollbacks.clear()
        yield MeasureStep(1, total or repeats + 1, label)
        sizes = list(range(1, max_depth + 2))
        for done in range(2, repeats + 2):  # interleaved, so a slow moment falls on every size alike
            # Each repeat starts at the next size: the first pass after a step (the thread back from the
            # caller's event loop, the other cores taken meanwhile) ran slow more often than not on a busy
            # box, and always landing on 1 row it priced that pass above the 2-row one.
            turn = (done - 2) % len(sizes)
            for rows in sizes[turn:] + sizes[:turn]:
                for _ in range(GRAPH_WARM_PASSES if ctx.acceleration.steady_draft_shape else 0):
                    one_pass(rows)
                samples[rows - 1].append(one_pass(rows))
            yield MeasureStep(done, total or repeats + 1, label)
    finally:
        ctx.close()
    return [statistics.median(x) for x in samples], statistics.median(rollbacks), [spread(x) for x in samples]


def measure(
    target: TextModel,
    drafter: TextModel,
    options: RunOptions,
    max_depth: int = MAX_DEPTH,
    repeats: int = 7,
    progress=None,
    calibration_tokens: int = 40,
) -> BoxProfile:
    """Time target passes of 1..max_depth+1 rows and drafter steps; calibrate acceptance."""
    return run_steps(measuring(target, drafter, options, max_depth, repeats, progress, calibration_tokens))


def measuring(
    target: TextModel,
    drafter: TextModel,
    options: RunOptions,
    max_depth: int = MAX_DEPTH,
    repeats: int = 7,
    progress=None,
    calibration_tokens: int = 40,
) -> Steps:
    """`measure` as steps (MeasureStep): the row timings' repeats, the drafter's steps, then each
    calibration reply's tokens as they come. The profile is the generator's return value."""
    say = progress or (lambda _m: None)
    template = template_for(target)
    prompt = _calibration_prompt(target)
    meter = LoadMeter()
    replies = len(CALIBRATION_PROMPTS) + 1  # and one more at depth 1 for a drafter that overlaps the verify
    total = repeats + 2 + replies * calibration_tokens
    rows_s, rollback_s, rows_spread = yield from timing_rows(target, options, prompt, max_depth, repeats, say, total)

    say("timing drafter steps")
    dctx = drafter.new_context(max_rows=1, options=options)
    dctx.decode(prompt[:-1], all_logits=False)
    dbase = dctx.n_past
    overlaps, shape = step_plan(dctx.acceleration, dctx.has_state)  # as ModelDrafter steps

    def one_step() -> None:
        dctx.rewind(dbase + 1 - shape)
        dctx.decode(prompt[-shape:], all_logits=False)

    one_step()
    steps = _times(one_step, repeats * 2)
    step_s = statistics.median(steps)
    dctx.close()
    if overlaps and max_depth > 1:
        total += calibration_tokens
    done = repeats + 2
    label = "calibrating acceptance and round overhead"
    yield MeasureStep(done, total, label)

    say(label)
    ctx = target.new_context(max_rows=max_depth + 1, options=options)
    draft_model = ModelDrafter(drafter, options, max_depth=max_depth)
    config = GenerationConfig(max_tokens=calibration_tokens, depth=max_depth, ignore_eog=True)
    observed: list[tuple[int, int]] = []  # (drafted, accepted) per round
    overheads: list[float] = []  # what follows the verify pass: the accept walk and the rewinds
    catch_ups: list[float] = []
    deep_rounds: list[tuple[float, bool]] = []  # a whole round drafting max_depth tokens, in a real reply
    rounds_at: dict[int, list[tuple[float, bool]]] = {}

    def calibration_reply(ids: list[int], depth: int) -> Generator[MeasureStep, None, list[RoundEvent]]:
        """One reply's rounds, a step after each (its tokens done); none is timed across a pause."""
        nonlocal done
        first_row, _ = ctx.prefill(ids)
        if depth:
            draft_model.prefill(ids)
        rounds, start = [], done
        reply = generate(
            ctx, draft_model if depth else None, FixedDepth(depth), list(ids), config,
            prefill=Prefill(first_row=first_row),
        )  # fmt: skip
        for event in reply:
            if isinstance(event, RoundEvent):
                if not event.from_prefill:
                    rounds.append(event)
                done = min(start + calibration_tokens, done + event.accepted + 1)
                yield MeasureStep(done, total, label)
        if done < start + calibration_tokens:
            done = start + calibration_tokens
            yield MeasureStep(done, total, label)
        ctx.clear()
        draft_model.reset()
        return rounds

    try:
        for text in CALIBRATION_PROMPTS:
            ids = tokenize_prompt(target, template.render([Message("user", text)]))
            for event in (yield from calibration_reply(ids, max_depth)):
                observed.append((event.drafted, event.accepted))
                if event.drafted:
                    catch_ups.append(event.draft_ms / 1e3 - (event.drafted - event.guessed) * step_s)
                overheads.append(event.commit_ms / 1e3)
                if event.drafted == max_depth:
                    deep_rounds.append((event.round_ms / 1e3, event.guessed))
        # and a plain reply: what a round costs beyond its target pass when nothing is drafted
        ids = tokenize_prompt(target, template.render([Message("user", CALIBRATION_PROMPTS[0])]))
        plain_rounds = [e.round_ms / 1e3 for e in (yield from calibration_reply(ids, 0))]
        # With an overlapping drafter, whole rounds drafting one token too: its step is priced from
        # how a round grows with its depth (below).
        rounds_at[max_depth] = deep_rounds
        if overlaps and max_depth > 1:
            rounds_at[1] = [
                (e.round_ms / 1e3, e.guessed) for e in (yield from calibration_reply(ids, 1)) if e.drafted == 1
            ]
    finally:
        draft_model.close()
        ctx.close()
    prior = conditional_acceptance(observed, max_depth)
    overhead = statistics.median(overheads) if overheads else 0.0
    catch_up = max(0.0, statistics.median(catch_ups)) if catch_ups else 0.0
    # Medians of whole rounds: a round that captured a new CUDA graph (a reply's first few)
    # must not price every round.
    plain_round_s = statistics.median(plain_rounds) if plain_rounds else 0.0
    if plain_rounds:
        overhead = max(0.0, plain_round_s - rows_s[0])
    if overlaps and max_depth > 1 and all(rounds_at.values()):
        # Every step is one row; once a round, the last draft's decode runs beside the verify and
        # slows it, priced as the round's catch-up.
        step_s, catch_up = price_steps(rounds_at, rows_s, overhead, step_s)
    elif (shape == 2 or overlaps) and deep_rounds:
        # Every step is the same batch (two rows, or one with the last draft taken in during the
        # verify): nothing to catch up. What a deep round costs beyond its verify pass and a
        # plain round's overhead (the steps, reading their rows, the longer walk, a verify
        # beside the drafter's decode) is priced per step.
        deep = statistics.median(s + guessed * step_s for s, guessed in deep_rounds)  # every step, as priced
        step_s = max(step_s, (deep - rows_s[max_depth] - overhead) / max_depth)
        catch_up = 0.0
    return BoxProfile(
        key=profile_key(model_file(target), model_file(drafter), options),
        machine=machine_id(),
        target=model_file(target).name,
        drafter=model_file(drafter).name,
        runtime=options.runtime_version(),
        mode=options.mode,
        threads=options.threads,
        target_rows_s=rows_s,
        drafter_step_s=step_s,
        overhead_s=overhead,
        acceptance_prior=prior,
        drafter_catch_up_s=catch_up,
        rollback_s=rollback_s,
        drafter_guesses=draft_model.guesses,
        plain_round_s=0.0 if options.pipelined_rounds else plain_round_s,
        **_trust([*rows_spread, spread(steps)], rows_spread[0], meter.read()),
    )


def _trust(spreads: list[float], plain_spread: float, load: MachineLoad) -> dict:
    return dict(spread=max(spreads), plain_spread=plain_spread, other_cpu=load.other_cpu, thermal=load.thermal)


def price_steps(
    rounds_at: dict[int, list[tuple[float, bool]]], rows_s: list[float], overhead_s: float, least_step_s: float
) -> tuple[float, float]:
    """A draft model's step and its catch-up per round, from whole rounds at two depths, each
    round's seconds and whether it began from a guess that came true (one step fewer).

    What a round costs beyond its verify pass and a plain round's rest is taken as catch-up +
    steps x step, the line through the shallowest and the deepest depth's median rounds of
    their most common kind (guessed, or not): both are priced as measured, and the depths
    between on the line. (A least-squares line through every depth was tried on an H200: rounds
    grow a little faster than linearly with depth there, so its intercept went below zero and
    depth 1 was priced 6-8% cheap.) The step is at least `least_step_s` (a bare step, timed
    alone); the catch-up is never negative."""
    points = []
    for k in (min(rounds_at), max(rounds_at)):
        kinds = {g: [s for s, guessed in rounds_at[k] if guessed is g] for g in (False, True)}
        g = max(kinds, key=lambda g: len(kinds[g]))  # a tie: the rounds that took every step
        points.append((k - g, statistics.median(kinds[g]) - rows_s[k] - overhead_s))
    (low, beyond_low), (high, beyond_high) = points
    step_s = max(least_step_s, (beyond_high - beyond_low) / (high - low) if high > low else 0.0)
    return step_s, max(0.0, beyond_low - low * step_s)


# A profile measured without a draft model (n-gram, MTP, DFlash, EAGLE-3 drafters) has no
# calibration of its own: Auto starts from this acceptance and learns from the conversation.
NEUTRAL_PRIOR = 0.5


def measuring_rows(target: TextModel, options: RunOptions, progress=None, repeats: int = 7) -> Steps:
    """The target's rows and rollback alone, as steps: the profile of a drafter with no model of its own."""
    meter = LoadMeter()
    say = progress or (lambda _m: None)
    rows_s, rollback_s, rows_spread = yield from timing_rows(
        target, options, _calibration_prompt(target), MAX_DEPTH, repeats, say
    )
    return BoxProfile(
        key=profile_key(model_file(target), model_file(target), options),
        machine=machine_id(),
        target=model_file(target).name,
        drafter="(none)",
        runtime=options.runtime_version(),
        mode=options.mode,
        threads=options.threads,
        target_rows_s=rows_s,
        drafter_step_s=0.0,
        overhead_s=rollback_s,  # until a conversation's rounds say what the rest of a round costs
        acceptance_prior=[NEUTRAL_PRIOR] * MAX_DEPTH,
        rollback_s=rollback_s,
        **_trust(rows_spread, rows_spread[0], meter.read()),
    )
