"""The pairing doctor's acceptance probe: greedy replies at depth 3 on a few prompts, in a time budget.

Each prompt runs from empty caches, so its drafts and acceptances are what a direct run of
the same prompt gives (greedy decoding is deterministic on a box). A prompt the budget cuts
short keeps the rounds it finished.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from engine.chat import Message
from engine.errors import DraftlightError
from engine.events import FinishReason, RoundEvent, RunStats
from engine.ruler.prompts import BUILT_IN
from engine.runtime import RuntimeOptions
from engine.session import Engine
from engine.speculative import GenerationConfig

PROBE_SECONDS = 20.0
PROBE_DEPTH = 3
PROBE_TOKENS = 64
PROBE_PROMPTS = 6
ProbeProgress = Callable[[int, int, str], None]  # (prompts done, prompts in all, what runs now)


@dataclass(frozen=True)
class PromptProbe:
    """One prompt's greedy reply at the probe's depth: its drafts and how many the target kept."""

    name: str
    tokens: int
    drafted: int
    accepted: int
    cut_short: bool  # the time budget (or a cancel) ended it before its end

    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None


@dataclass(frozen=True)
class Probe:
    source: str  # "your recent prompts" or "the built-in prompts"
    depth: int
    seconds: float
    prompts: tuple[PromptProbe, ...] = ()
    rounds: tuple[tuple[int, int], ...] = ()  # (drafted, accepted) per round, every prompt's
    note: str = ""  # why it stopped early, or why it could not run
    rollback: str = ""  # how the loaded target undoes a rejected draft, where it keeps a recurrent state
    speculates: bool = True  # False: the loaded target cannot undo a draft, so every reply runs plain

    @property
    def drafted(self) -> int:
        return sum(p.drafted for p in self.prompts)

    @property
    def accepted(self) -> int:
        return sum(p.accepted for p in self.prompts)

    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None

    def summary(self) -> str:
        if not self.prompts:
            return self.note or "The probe ran no prompt."
        said = (
            f"Acceptance {self.acceptance:.0%} overall ({self.accepted} of {self.drafted} drafts) at depth {self.depth} "
            if self.acceptance is not None
            else f"No drafts at depth {self.depth} "
        )
        said += f"on {len(self.prompts)} of {self.source}, in {self.seconds:.1f} s."
        return f"{said} {self.note}" if self.note else said


def built_in_prompts() -> list[tuple[str, str]]:
    """The ruler's built-in prompts, shortest first: a prompt's prefill cannot be cut short, so the
    long article to summarize comes last, where the budget may leave it out."""
    return sorted(BUILT_IN.items(), key=lambda item: len(item[1]))


LOAD_FAILED = "The probe could not load the pair"  # a report whose probe says this exits 2


def run_probe(
    target: str | Path,
    drafter: str | Path,
    options: RuntimeOptions,
    prompts: list[tuple[str, str]],
    source: str,
    seconds: float = PROBE_SECONDS,
    max_tokens: int = PROBE_TOKENS,
    say: ProbeProgress = lambda *_: None,
    cancelled: Callable[[], bool] = lambda: False,
    runtime: str = "auto",
) -> Probe:
    """Load the pair and run each of `prompts` ((name, text) pairs) until the time budget runs out;
    a pair that cannot load or cannot speculate gives a Probe whose note says why."""
    start = time.monotonic()
    empty = Probe(source, PROBE_DEPTH, 0.0)
    say(0, len(prompts), "loading the pair")
    try:
        engine = Engine.load(target, drafter, options, runtime=runtime)
    except DraftlightError as exc:
        return replace(empty, note=f"{LOAD_FAILED}: {exc}")
    engine.ledger_source = "pair"
    deadline = start + seconds
    done: list[PromptProbe] = []
    rounds: list[tuple[int, int]] = []
    n = len(prompts)
    rollback = engine.describe_rollback() if engine.ctx.has_state else ""
    try:
        if not engine.can_speculate:
            return replace(empty, note=f"The probe did not run: {engine.notice}", rollback=rollback, speculates=False)
        config = GenerationConfig(max_tokens=max_tokens, depth=PROBE_DEPTH, probabilities=False)
        stop = lambda: cancelled() or time.monotonic() >= deadline  # noqa: E731
        for i, (name, text) in enumerate(prompts):
            if stop():
                break
            say(i, n, name)
            engine.forget()  # each prompt from empty caches: what a direct run of it gives
            ids = engine.prompt_ids([Message("user", text)])
            stats: RunStats | None = None
            for event in engine.stream(ids, config, stop):
                if isinstance(event, RoundEvent) and not event.from_prefill:
                    rounds.append((event.drafted, event.accepted))
                elif isinstance(event, RunStats):
                    stats = event
            if stats is not None and stats.generated_tokens:  # a prompt cut before its first token measured nothing
                cut = stats.finish_reason is FinishReason.CANCELLED
                done.append(PromptProbe(name, stats.generated_tokens, stats.drafted, stats.accepted, cut))
        last_cut = ", the last cut short" if done and done[-1].cut_short else ""
        note = ""
        if cancelled():
            note = f"Cancelled after {len(done)} of {n} prompts{last_cut}."
        elif len(done) < n or last_cut:
            note = f"The {seconds:g}-second budget ran out after {len(done)} of {n} prompts{last_cut}."
        say(n, n, "done")
    finally:
        engine.close()
    return Probe(source, PROBE_DEPTH, time.monotonic() - start, tuple(done), tuple(rounds), note, rollback)
