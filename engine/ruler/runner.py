"""Running the ruler: every arm on every prompt, interleaved, warmed up, cooled down."""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from engine.chat import Message
from engine.depth import AUTO, Depth
from engine.drafting import Drafter, kinds
from engine.errors import DraftlightError
from engine.events import RoundEvent, RunStats
from engine.measure.costmodel import speculation_pays, why_plain
from engine.measure.profile import profile_for
from engine.measure.thermal import read_thermal, wait_until_cool
from engine.ruler.prompts import BenchPrompt
from engine.runtime import RuntimeOptions, runtime_version, system_info
from engine.session import Engine
from engine.speculative import GenerationConfig

if TYPE_CHECKING:
    from engine.ruler.oracle import OracleServer
    from engine.ruler.oracle_build import OracleBuild

Progress = Callable[[str], None]
WARMUP_TOKENS = 8


@dataclass(frozen=True)
class Arm:
    """One way of generating: an engine, a drafter, a depth (AUTO: the tuner decides)."""

    engine: str  # "ours" or "llama.cpp"
    drafter: str  # a drafter kind's name (engine.drafting.kinds)
    depth: Depth
    fast: bool = False  # ours: weight repacking allowed; llama.cpp: --repack

    @property
    def name(self) -> str:
        what = AUTO if self.depth == AUTO else f"d{self.depth}"
        if self.drafter not in (kinds.MODEL.name, kinds.NONE.name):
            what = f"{self.drafter} {what}"
        return f"{self.engine} {what}{' repack' if self.fast else ''}"


@dataclass
class RunRecord:
    """One measured run, as raw as it comes."""

    arm: str
    prompt: str
    repeat: int
    prompt_tokens: int
    generated_tokens: int
    prefill_s: float
    decode_s: float
    decode_tps: float
    end_to_end_tps: float
    rounds: int | None
    drafted: int | None
    accepted: int | None
    acceptance_per_position: list[float] = field(default_factory=list)
    draft_s: float | None = None
    verify_s: float | None = None
    commit_s: float | None = None
    rewind_s: float | None = None
    overhead_s: float | None = None
    host_syncs: int | None = None  # the eval audit (RunStats.host_syncs), where the runtime counts them
    depth_used: list[int] = field(default_factory=list)  # auto: the depth of each round
    predicted_speedup: float | None = None  # auto: what the tuner expected
    token_ids: list[int] = field(default_factory=list)
    thermal_start: str = ""
    thermal_end: str = ""
    waited_s: float = 0.0


@dataclass
class BenchConfig:
    target: Path
    drafter: Path | None  # the draft model of the "model" arms
    prompts: list[BenchPrompt]
    arms: list[Arm]
    # the other kinds' drafters: kind -> the MTP kind's name or the file (DFlash, EAGLE-3, a file of MTP heads, an assistant)
    drafters: dict[str, str] = field(default_factory=dict)
    n_tokens: int = 96
    repeats: int = 3
    threads: int = 0
    n_ctx: int = 4096
    thinking: bool = False
    cool_timeout_s: float = 120.0
    cool_pause_s: float = 2.0  # where the OS gives no thermal state


@dataclass
class BenchResult:
    config: dict
    machine: dict
    prompts: dict[str, str]  # name -> the rendered prompt text both engines received
    records: list[RunRecord]
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "config": self.config,
            "machine": self.machine,
            "prompts": self.prompts,
            "records": [asdict(r) for r in self.records],
            "notes": self.notes,
        }


def describe_machine(threads: int) -> dict:
    import os

    info: dict[str, str | int | float | None] = {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or "",
        "cpu_count": os.cpu_count(),
        "threads": threads,
        "python": platform.python_version(),
        "runtime": runtime_version(),
        "llama_cpp_system_info": system_info(),
        "thermal": read_thermal().describe(),
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["memory_gib"] = round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return info


class OursRunner:
    """Our engine's arms: one Engine per weight layout, drafters swapped per arm.

    A drafter that reads the target (an MTP head, DFlash, EAGLE-3, an assistant) watches
    every batch its target context decodes, so it gets a context of its own over the same
    loaded model: the other arms' passes stay exactly what they are without it.

    An Auto arm with a draft model runs what `draftlight chat --depth auto` runs: where the
    pair's box profile says no depth could pay, plain decoding on the fast layout.
    """

    def __init__(self, config: BenchConfig) -> None:
        from engine.drafting import ModelDrafter, NgramDrafter
        from engine.pairloading import load_drafter
        from engine.runtime import Model

        self.config = config
        self.engines: dict[bool, Engine] = {}
        self.readers: dict[tuple[bool, str], Engine] = {}  # (fast, kind) -> an engine on the shared model
        self.drafters: dict[tuple[bool, str], Drafter] = {}
        pairs: dict[bool, tuple[Model, Model]] = {}  # layout -> its target and draft model
        fast_wanted = {a.fast for a in config.arms if a.engine == "ours"} or {False}
        for fast in sorted(fast_wanted):
            options = RuntimeOptions(n_ctx=config.n_ctx, n_threads=config.threads, exact=not fast)
            target = Model(config.target, options)
            engine = Engine(target, None, options)
            self.engines[fast] = engine
            wanted = {a.drafter for a in config.arms if a.engine == "ours" and a.fast == fast}
            if kinds.MODEL.name in wanted and config.drafter is not None:
                draft_model = Model(config.drafter, options)
                self.drafters[(fast, kinds.MODEL.name)] = ModelDrafter(draft_model, options)
                pairs[fast] = (target, draft_model)
            self.drafters[(fast, kinds.NGRAM.name)] = NgramDrafter()
            for kind in sorted(wanted & set(config.drafters)):
                reader = Engine(engine.target, None, options)
                self.readers[(fast, kind)] = reader
                reader.set_drafter(*load_drafter(engine.target, config.drafters[kind], options, target_ctx=reader.ctx))
        self.plain_auto: dict[bool, str] = {}  # layout -> why its Auto arm decodes plainly on the fast one
        for fast, (target, draft_model) in pairs.items():
            if any(a.engine == "ours" and a.depth == AUTO and a.fast == fast for a in config.arms):
                # the saved profile, or one measured as Auto does
                profile = profile_for(target, draft_model, self.engines[fast].options)
                if not speculation_pays(profile):
                    self.plain_auto[fast] = why_plain(profile)
                    if True not in self.engines:
                        fast_options = RuntimeOptions(n_ctx=config.n_ctx, n_threads=config.threads, exact=False)
                        self.engines[True] = Engine(Model(config.target, fast_options), None, fast_options)
        self.notes = [f"ours {AUTO}: {why}" for why in sorted(set(self.plain_auto.values()))]

    def render(self, prompt: BenchPrompt) -> str:
        engine = next(iter(self.engines.values()))
        return engine.render([Message("user", prompt.text)], thinking=self.config.thinking)

    def run(self, arm: Arm, prompt: BenchPrompt, rendered: str, n_tokens: int) -> RunRecord:
        engine = self.readers.get((arm.fast, arm.drafter))
        plain = arm.depth == AUTO and arm.drafter == kinds.MODEL.name and arm.fast in self.plain_auto
        if plain:
            engine = self.engines[True]
            engine.swap_drafter(None)
        elif engine is None:
            engine = self.engines[arm.fast]
            engine.swap_drafter(self.drafters.get((arm.fast, arm.drafter)))  # a fresh Auto for every run
        else:
            engine.set_drafter(engine.drafter, engine.verdict)  # a fresh Auto for every run
        ids = engine.tokenize_prompt(rendered)
        engine.forget()  # every run prefills the whole prompt, as llama.cpp's does
        config = GenerationConfig(max_tokens=n_tokens, depth=0 if plain else arm.depth, ignore_eog=True)
        stats, depths = None, []
        for event in engine.stream(ids, config, source="bench"):
            if isinstance(event, RoundEvent) and not event.from_prefill:
                depths.append(event.drafted)
            stats = event
        tuner = engine.auto if arm.depth == AUTO and not plain else None
        assert isinstance(stats, RunStats)  # a stream's last event is its run's stats
        return RunRecord(
            arm=arm.name,
            prompt=prompt.name,
            repeat=0,
            prompt_tokens=stats.prompt_tokens,
            generated_tokens=stats.generated_tokens,
            prefill_s=stats.prefill_s,
            decode_s=stats.decode_s,
            decode_tps=stats.decode_tps,
            end_to_end_tps=stats.end_to_end_tps,
            rounds=stats.rounds,
            drafted=stats.drafted,
            accepted=stats.accepted,
            acceptance_per_position=list(stats.acceptance_per_position),
            draft_s=stats.draft_s,
            verify_s=stats.verify_s,
            commit_s=stats.commit_s,
            rewind_s=stats.rewind_s,
            overhead_s=stats.overhead_s,
            depth_used=depths if tuner else [],
            predicted_speedup=tuner.predicted_speedup() if tuner else None,
            token_ids=list(stats.token_ids),
        )

    def close(self) -> None:
        for d in self.drafters.values():
            d.close()
        for reader in self.readers.values():  # the model is the layout's engine's, closed below
            reader.set_drafter(None)
            reader.ctx.close()
        for e in self.engines.values():
            e.close()


class OracleRunner:
    """Stock llama.cpp's arms: one llama-server per arm, kept for the whole run."""

    def __init__(self, config: BenchConfig, build: OracleBuild) -> None:
        from engine.ruler import oracle

        self.servers: dict[str, OracleServer] = {}
        threads = config.threads or RuntimeOptions().threads
        for arm in config.arms:
            if arm.engine != "llama.cpp":
                continue
            if arm.depth == 0:
                server = oracle.serve_plain(build, config.target, threads, config.n_ctx, arm.fast)
            else:
                spec_type = kinds.KINDS[arm.drafter].spec_type
                if arm.depth == AUTO or spec_type is None:  # cli.arms_for asks for neither
                    raise DraftlightError(
                        f"Stock llama.cpp has no arm {arm.name}: it drafts a fixed depth of a kind it has."
                    )
                spec = str(config.drafter) if arm.drafter == kinds.MODEL.name else config.drafters[arm.drafter]
                server = oracle.serve_speculative(
                    build, config.target, None if spec == kinds.MTP.name else Path(spec), arm.depth, threads,
                    config.n_ctx, arm.fast, spec_type,
                )  # fmt: skip
            server.start()
            self.servers[arm.name] = server

    def run(self, arm: Arm, prompt: BenchPrompt, rendered: str, n_tokens: int) -> RunRecord:
        r = self.servers[arm.name].run(rendered, n_tokens)
        rounds = None
        if r.accepted is not None:
            rounds = (r.generated_tokens - 1) - r.accepted  # the first token comes from the prefill
        return RunRecord(
            arm=arm.name,
            prompt=prompt.name,
            repeat=0,
            prompt_tokens=r.prompt_tokens,
            generated_tokens=r.generated_tokens,
            prefill_s=r.prefill_s,
            decode_s=r.decode_s,
            decode_tps=r.decode_tps,
            end_to_end_tps=r.end_to_end_tps,
            rounds=rounds if rounds is not None else r.generated_tokens - 1,
            drafted=r.drafted,
            accepted=r.accepted,
            token_ids=list(r.token_ids or ()),
        )

    def close(self) -> None:
        for server in self.servers.values():
            server.close()


def run_bench(config: BenchConfig, oracle_build: OracleBuild | None = None, progress: Progress = print) -> BenchResult:
    """Every arm on every prompt, repeats interleaved, a warm-up and a cool-down before each run."""
    threads = config.threads or RuntimeOptions().threads
    ours = OursRunner(config)
    notes: list[str] = list(ours.notes)
    theirs = None
    if any(a.engine == "llama.cpp" for a in config.arms):
        if oracle_build is None:
            notes.append("stock llama.cpp was not available; only our arms ran")
        else:
            progress("starting stock llama.cpp (one llama-server per arm)…")
            try:
                theirs = OracleRunner(config, oracle_build)
            except Exception as exc:  # the oracle's failure must not cost our arms
                notes.append(f"stock llama.cpp could not run: {exc}")
                progress(f"stock llama.cpp could not run ({exc}); running our arms alone")
    arms = [a for a in config.arms if a.engine == "ours" or theirs is not None]
    rendered = {p.name: ours.render(p) for p in config.prompts}
    records: list[RunRecord] = []
    total = config.repeats * len(config.prompts) * len(arms)
    done, started = 0, time.monotonic()
    try:
        for repeat in range(config.repeats):
            for prompt in config.prompts:
                # rotate the arm order each repeat, so drift and heat fall on every arm alike
                shift = (repeat + config.prompts.index(prompt)) % len(arms)
                for arm in arms[shift:] + arms[:shift]:
                    runner = ours if arm.engine == "ours" else theirs
                    assert runner is not None  # llama.cpp's arms are left out above where it is not running
                    reading, waited = wait_until_cool(config.cool_timeout_s, fixed_pause_s=config.cool_pause_s)
                    runner.run(arm, prompt, rendered[prompt.name], WARMUP_TOKENS)
                    record = runner.run(arm, prompt, rendered[prompt.name], config.n_tokens)
                    record.repeat = repeat
                    record.thermal_start, record.thermal_end = reading.describe(), read_thermal().describe()
                    record.waited_s = waited
                    records.append(record)
                    done += 1
                    elapsed = time.monotonic() - started
                    left = elapsed / done * (total - done)
                    progress(
                        f"[{done}/{total}] {arm.name:18} {prompt.name:14} repeat {repeat + 1}/{config.repeats}: "
                        f"{record.decode_tps:5.1f} tok/s decode; about {left / 60:.0f} min left"
                    )
    finally:
        ours.close()
        if theirs is not None:
            theirs.close()
    cfg = {
        "target": str(config.target),
        "drafter": str(config.drafter) if config.drafter else None,
        "drafters": dict(config.drafters),
        "arms": [a.name for a in arms],
        "n_tokens": config.n_tokens,
        "repeats": config.repeats,
        "threads": threads,
        "n_ctx": config.n_ctx,
        "thinking": config.thinking,
        "oracle": getattr(oracle_build, "source", None),
    }
    return BenchResult(cfg, describe_machine(threads), rendered, records, notes)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")
