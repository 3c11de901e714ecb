"""Auto depth: the box's cost of rows and draft steps, times the text's acceptance.

Acceptance is a property of the text; the cost of a row is a property of the box. The
profile measures the second once per machine, model pair and runtime; the conversation
supplies the first, round by round. Expected tokens per round at depth k are
E_k = 1 + sum_{j<=k} prod_{i<=j} a_i (a_i: acceptance at position i given i-1 was
accepted); the round costs C_k = k draft steps + a target pass of k+1 rows + overhead.
The tuner picks the k with the most tokens per second, E_k / C_k, depth 0 included.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import statistics
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path

from engine.catalog import cache_dir
from engine.chat import Message
from engine.errors import DraftlightError
from engine.events import RoundEvent
from engine.runtime import Context, Model, RuntimeOptions, runtime_version

MAX_AUTO_DEPTH = 4
CALIBRATION_PROMPTS = (
    "Write a Python function that returns the n-th Fibonacci number, with a docstring.",
    "Describe a walk along a river on a summer evening in a few sentences.",
)
PROFILE_VERSION = 3  # 3: exact mode keeps the KV cache in Q8_0


@dataclass
class BoxProfile:
    """What a round costs on this machine for this pair, in seconds."""

    key: str
    machine: str
    target: str
    drafter: str
    runtime: str
    mode: str
    threads: int
    target_rows_s: list[float]  # target pass of 1, 2, ... rows
    drafter_step_s: float  # one drafter decode of one token
    overhead_s: float  # the rest of a round: sampling, bookkeeping, rewinds
    acceptance_prior: list[float]  # conditional acceptance per position, from the calibration prompts
    # A round's first draft step also feeds the drafter what the last round committed (the
    # target's token, and the last draft after a full acceptance): its extra cost, in situ.
    drafter_catch_up_s: float = 0.0
    measured_at: float = field(default_factory=time.time)
    version: int = PROFILE_VERSION

    def rows_in_passes(self, rows: int) -> float:
        return self.target_rows_s[rows - 1] / self.target_rows_s[0]

    def round_cost_s(self, depth: int, drafter_step_s: float | None = None) -> float:
        step = self.drafter_step_s if drafter_step_s is None else drafter_step_s
        catch_up = self.drafter_catch_up_s if depth and step else 0.0
        return catch_up + depth * step + self.target_rows_s[depth] + self.overhead_s

    def table(self) -> str:
        one = self.target_rows_s[0]
        lines = ["rows  target pass  in plain passes"]
        for i, t in enumerate(self.target_rows_s, 1):
            lines.append(f"{i:4}  {t * 1e3:8.1f} ms  {t / one:6.2f}")
        lines.append(
            f"drafter step {self.drafter_step_s * 1e3:.1f} ms = {self.drafter_step_s / one:.2f} of a target pass"
        )
        lines.append(f"drafter catch-up at a round's start {self.drafter_catch_up_s * 1e3:.1f} ms")
        lines.append(f"round overhead (accept walk, rewinds) {self.overhead_s * 1e3:.2f} ms")
        lines.append("calibration acceptance per position: " + " ".join(f"{a:.0%}" for a in self.acceptance_prior))
        return "\n".join(lines)


def conditional_acceptance(rounds, depth: int, prior: list[float] | None = None, pull: float = 0.0) -> list[float]:
    """Acceptance at each position given the one before was accepted, from (drafted, accepted) pairs.

    With a prior, each estimate is pulled towards it as if `pull` rounds had agreed with it.
    A position no round reached borrows the estimate of the position before it: drafts
    deeper than the rounds went are judged by the text seen so far.
    """
    out: list[float] = []
    for i in range(depth):
        reached = sum(1 for d, a in rounds if d > i and a >= i)
        kept = sum(1 for d, a in rounds if d > i and a > i)
        p = prior[min(i, len(prior) - 1)] if prior else 0.0
        if reached == 0 and out and rounds:
            out.append(out[-1])
        else:
            out.append((kept + pull * p) / (reached + pull) if reached + pull else p)
    return out


def expected_tokens(acceptance: list[float], depth: int) -> float:
    """E_k: 1 + sum over j <= k of the product of conditional acceptances up to j."""
    total, run = 1.0, 1.0
    for a in acceptance[:depth]:
        run *= a
        total += run
    return total


def best_depth(
    profile: BoxProfile, acceptance: list[float], drafter_step_s: float | None = None, max_depth: int = MAX_AUTO_DEPTH
) -> tuple[int, list[float]]:
    """The depth with the most tokens per second, and tokens/s at each depth (0..max)."""
    max_depth = min(max_depth, len(profile.target_rows_s) - 1, len(acceptance))
    rates = [expected_tokens(acceptance, k) / profile.round_cost_s(k, drafter_step_s) for k in range(max_depth + 1)]
    return max(range(len(rates)), key=rates.__getitem__), rates


def explain(profile: BoxProfile, depth: int, acceptance: list[float], drafter_step_s: float | None = None) -> str:
    """One line a person can act on: why this depth, in this box's numbers."""
    rows2 = profile.rows_in_passes(2)
    step = profile.drafter_step_s if drafter_step_s is None else drafter_step_s
    c1 = profile.round_cost_s(1, step) / profile.round_cost_s(0, step)
    need = c1 - 1.0  # depth 1 pays when 1 + a > c1
    seen = f"{acceptance[0]:.0%}" if acceptance else "unknown"
    if depth == 0:
        if need >= 1.0:
            return (
                f"Speculation off: verifying 2 rows costs {rows2:.2f} passes and a draft step "
                f"{step / profile.target_rows_s[0]:.2f} here, so no acceptance could pay for a draft."
            )
        return (
            f"Speculation off: verifying 2 rows costs {rows2:.2f} passes here; drafts would need "
            f"> {need:.0%} acceptance, and this text gets {seen}."
        )
    _, rates = best_depth(profile, acceptance, drafter_step_s)
    return (
        f"Depth {depth}: {rates[depth] / rates[0]:.2f}x predicted over speculation off "
        f"(2 rows cost {rows2:.2f} passes here; acceptance {seen} at position 1)."
    )


# ---- measuring the box ---------------------------------------------------------------


def machine_id() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.node()} | {platform.system()} {platform.machine()} | {cpu} | {os.cpu_count()} cores"


def _file_id(path: Path) -> str:
    st = path.stat()
    return f"{path.name}:{st.st_size}:{st.st_mtime_ns}"


def profile_key(target: Path, drafter: Path, options: RuntimeOptions) -> str:
    parts = [
        machine_id(),
        _file_id(Path(target)),
        _file_id(Path(drafter)),
        runtime_version(),
        options.mode,
        str(options.threads),
        str(PROFILE_VERSION),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def profile_path(key: str) -> Path:
    return cache_dir() / "profiles" / f"{key}.json"


def load_profile(target: Path, drafter: Path, options: RuntimeOptions) -> BoxProfile | None:
    path = profile_path(profile_key(target, drafter, options))
    try:
        data = json.loads(path.read_text())
        return BoxProfile(**data) if data.get("version") == PROFILE_VERSION else None
    except (OSError, ValueError, TypeError):
        return None


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(
    target: Model,
    drafter: Model,
    options: RuntimeOptions,
    max_depth: int = MAX_AUTO_DEPTH,
    repeats: int = 7,
    progress=None,
) -> BoxProfile:
    """Time target passes of 1..max_depth+1 rows and drafter steps; calibrate acceptance."""
    from engine.drafters import ModelDrafter
    from engine.session import Engine, template_for, tokenize_prompt
    from engine.speculative import GenerationConfig

    say = progress or (lambda _m: None)
    template = template_for(target)
    prompt = tokenize_prompt(target, template.render([Message("user", CALIBRATION_PROMPTS[0])]))
    ctx = Context(target, options, max_rows=max_depth + 1)
    ctx.decode(prompt[:-1], all_logits=False)
    base = ctx.n_past
    filler = prompt[-(max_depth + 1) :]  # real tokens at real positions
    say(f"timing target passes of 1 to {max_depth + 1} rows")

    def one_pass(rows: int) -> float:
        t0 = time.perf_counter()
        ctx.decode(filler[:rows], all_logits=True)
        elapsed = time.perf_counter() - t0
        ctx.rewind(base)
        return elapsed

    for rows in range(1, max_depth + 2):  # warm-up: every batch shape once
        one_pass(rows)
    samples: list[list[float]] = [[] for _ in range(max_depth + 1)]
    for _ in range(repeats):  # interleaved, so a slow moment falls on every size alike
        for rows in range(1, max_depth + 2):
            samples[rows - 1].append(one_pass(rows))
    rows_s = [statistics.median(x) for x in samples]
    ctx.close()

    say("timing drafter steps")
    dctx = Context(drafter, options, max_rows=1)
    dctx.decode(prompt[:-1], all_logits=False)
    dbase = dctx.n_past

    def one_step() -> None:
        dctx.decode(prompt[-1:], all_logits=False)
        dctx.rewind(dbase)

    one_step()
    step_s = _median_time(one_step, repeats * 2)
    dctx.close()

    say("calibrating acceptance and round overhead")
    engine = Engine(target, ModelDrafter(drafter, options, max_depth=max_depth), options)
    observed: list[tuple[int, int]] = []  # (drafted, accepted) per round
    overheads: list[float] = []  # what follows the verify pass: the accept walk and the rewinds
    catch_ups: list[float] = []
    for text in CALIBRATION_PROMPTS:
        ids = engine.tokenize_prompt(engine.render([Message("user", text)]))
        for event in engine.stream(ids, GenerationConfig(max_tokens=40, depth=max_depth, ignore_eog=True)):
            if isinstance(event, RoundEvent) and not event.from_prefill:
                observed.append((event.drafted, event.accepted))
                if event.drafted:
                    catch_ups.append(event.draft_ms / 1e3 - event.drafted * step_s)
                overheads.append(event.commit_ms / 1e3)
        engine.ctx.clear()
        engine.drafter.reset()
    engine.drafter.close()
    engine.ctx.close()
    prior = conditional_acceptance(observed, max_depth)
    overhead = statistics.median(overheads) if overheads else 0.0
    return BoxProfile(
        key=profile_key(target.path, drafter.path, options),
        machine=machine_id(),
        target=target.path.name,
        drafter=drafter.path.name,
        runtime=runtime_version(),
        mode=options.mode,
        threads=options.threads,
        target_rows_s=rows_s,
        drafter_step_s=step_s,
        overhead_s=overhead,
        acceptance_prior=prior,
        drafter_catch_up_s=max(0.0, statistics.median(catch_ups)) if catch_ups else 0.0,
    )


def save_profile(profile: BoxProfile) -> Path:
    path = profile_path(profile.key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(profile), indent=1))
    os.replace(tmp, path)
    return path


def profile_for(target: Model, drafter: Model, options: RuntimeOptions, progress=None) -> BoxProfile:
    """The saved profile, or a fresh measurement (saved) if the box, models or runtime changed."""
    found = load_profile(target.path, drafter.path, options)
    if found is not None:
        return found
    profile = measure(target, drafter, options, progress=progress)
    save_profile(profile)
    return profile


# ---- deciding, round by round ----------------------------------------------------------


class AutoDepth:
    """Chooses each round's depth from the profile and the conversation's live acceptance.

    Acceptance per position is kept over a rolling window of rounds; positions not yet
    seen borrow the profile's calibration. The choice is revisited every `every` rounds
    and changes only when the new depth is predicted `margin` faster, so it does not flap.
    """

    def __init__(
        self,
        profile: BoxProfile,
        drafter_step_s: float | None = None,
        window: int = 48,
        every: int = 4,
        margin: float = 0.03,
        max_depth: int = MAX_AUTO_DEPTH,
    ) -> None:
        self.profile = profile
        self.drafter_step_s = drafter_step_s
        self.window = window
        self.every = every
        self.margin = margin
        self.max_depth = min(max_depth, len(profile.target_rows_s) - 1)
        self.rounds: deque[tuple[int, int]] = deque(maxlen=window)  # (drafted, accepted)
        self.depth, self._rates = best_depth(profile, self.acceptance(), drafter_step_s, self.max_depth)
        self._since = 0

    @classmethod
    def for_engine(cls, engine, progress=None) -> AutoDepth:
        from engine.drafters import ModelDrafter

        drafter = engine.drafter
        if isinstance(drafter, ModelDrafter):
            return cls(profile_for(engine.target, drafter.model, engine.options, progress))
        if drafter is None:
            raise DraftlightError("Auto depth needs a drafter; with none, every round is plain.")
        # a drafter with no model (n-gram) costs next to nothing: rows decide alone
        profile = profile_for_target_only(engine.target, engine.options, progress)
        return cls(profile, drafter_step_s=0.0)

    def acceptance(self) -> list[float]:
        """Conditional acceptance per position: live where seen, the calibration elsewhere."""
        return conditional_acceptance(self.rounds, self.max_depth, self.profile.acceptance_prior or [0.0], pull=2.0)

    def choose(self) -> int:
        return self.depth

    def observe(self, drafted: int, accepted: int) -> None:
        if drafted:
            self.rounds.append((drafted, accepted))
        self._since += 1
        if self._since < self.every:
            return
        self._since = 0
        best, rates = best_depth(self.profile, self.acceptance(), self.drafter_step_s, self.max_depth)
        if best != self.depth and rates[best] > rates[self.depth] * (1 + self.margin):
            self.depth = best
        self._rates = rates

    def predicted_speedup(self) -> float:
        return self._rates[self.depth] / self._rates[0]

    def explain(self) -> str:
        return explain(self.profile, self.depth, self.acceptance(), self.drafter_step_s)


def profile_for_target_only(target: Model, options: RuntimeOptions, progress=None) -> BoxProfile:
    """Row costs alone, for drafters with no model; reuses a pair profile's rows if one exists."""
    profiles = sorted((cache_dir() / "profiles").glob("*.json")) if (cache_dir() / "profiles").is_dir() else []
    for path in profiles:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if (
            data.get("target") == target.path.name
            and data.get("machine") == machine_id()
            and data.get("mode") == options.mode
        ):
            return BoxProfile(**data)
    raise DraftlightError("No box profile for this target yet: run `draftlight tune` with a drafter model first.")


def saved_plain_pass_s(target: Model, options: RuntimeOptions) -> float | None:
    """A plain round's time on this box from a saved profile for this target; None, not a measurement, without one."""
    try:
        profile = profile_for_target_only(target, options)
    except DraftlightError:
        return None
    return profile.round_cost_s(0)


# ---- command line -------------------------------------------------------------------


def cmd_tune(args) -> int:
    from engine import catalog
    from engine.cli import terminal_progress

    options = RuntimeOptions(n_ctx=args.ctx, n_threads=args.threads, exact=not args.fast)
    progress = terminal_progress()
    target_path = catalog.resolve(catalog.DEFAULT_TARGET if args.target == "default" else args.target, progress)
    drafter_path = catalog.resolve(catalog.DEFAULT_DRAFTER if args.drafter == "default" else args.drafter, progress)
    existing = None if args.force else load_profile(target_path, drafter_path, options)
    if existing is not None:
        profile, note = (
            existing,
            f"(saved {time.strftime('%Y-%m-%d %H:%M', time.localtime(existing.measured_at))}; --force measures again)",
        )
    else:
        t0 = time.perf_counter()
        target, drafter = Model(target_path, options), Model(drafter_path, options)
        profile = measure(target, drafter, options, progress=lambda m: print(f"tune: {m}", file=sys.stderr))
        save_profile(profile)
        note = f"(measured in {time.perf_counter() - t0:.1f} s)"
    print(
        f"Box profile for {profile.target} + {profile.drafter}, {profile.mode} mode, {profile.threads} threads {note}"
    )
    print(f"machine: {profile.machine}")
    print(profile.table())
    depth, rates = best_depth(profile, profile.acceptance_prior)
    print(
        "predicted tokens/s by depth at the calibration acceptance: "
        + "  ".join(f"d{k} {r:.1f}" for k, r in enumerate(rates))
    )
    print(explain(profile, depth, profile.acceptance_prior))
    return 0


def add_cli(sub) -> None:
    tune = sub.add_parser("tune", help="measure this box's cost of rows and draft steps for a model pair")
    tune.add_argument("--target", default="default")
    tune.add_argument("--drafter", default="default")
    tune.add_argument("--ctx", type=int, default=4096)
    tune.add_argument("--threads", type=int, default=0)
    tune.add_argument("--fast", action="store_true", help="profile the fast (weight repacking) mode")
    tune.add_argument("--force", action="store_true", help="measure again even if a profile is saved")
    tune.set_defaults(func=cmd_tune)
