"""The ruler on MLX: our MLX engine against mlx-lm's own loops, and our llama engine on the same pair.

Every prompt is rendered once by our chat template on the MLX target and tokenized once; the MLX
arms (ours and mlx-lm's) all take those token ids, and our llama arm tokenizes the same rendered
text with the GGUF's tokenizer (a conversion's vocabulary is the GGUF's, so the ids agree; a run
whose ids differ says so in a note). mlx-lm's arms run on the very modules our MLX engine loaded,
each with caches of its own. Arms are interleaved with a rotating order, each run after a warm-up.

Arm engines: "ours-mlx" (engine.speculative on the MLX runtime), "mlx-lm" (mlx_lm.generate's
generate_step and speculative_generate_step, engine.ruler.mlx_reference), "ours-llama" (our
engine on llama.cpp, where the pair exists as GGUF files).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path

from engine.chat import Message
from engine.drafting import kinds
from engine.events import RunStats
from engine.measure.thermal import read_thermal, wait_until_cool
from engine.ruler.prompts import BenchPrompt
from engine.ruler.runner import WARMUP_TOKENS, Arm, BenchResult, Progress, RunRecord, describe_machine
from engine.runtime import RuntimeOptions
from engine.session import Engine
from engine.speculative import GenerationConfig

OURS, MLX_LM, OURS_LLAMA = "ours-mlx", "mlx-lm", "ours-llama"


@dataclass
class MlxBenchConfig:
    target: Path  # an MLX folder
    drafter: Path  # an MLX folder: the draft model
    prompts: list[BenchPrompt]
    depths: list[int] = field(default_factory=lambda: [0, 2])
    target_gguf: Path | None = None  # the same pair as GGUF files: our llama arms
    drafter_gguf: Path | None = None
    n_tokens: int = 64
    repeats: int = 3
    threads: int = 0
    n_ctx: int = 4096
    thinking: bool = False
    cool_pause_s: float = 0.0


def mlx_arms(config: MlxBenchConfig) -> list[Arm]:
    """Each engine at each depth: ours on MLX, mlx-lm's, and ours on llama.cpp where GGUF files exist."""
    engines = [OURS, MLX_LM] + ([OURS_LLAMA] if config.target_gguf and config.drafter_gguf else [])
    return [Arm(e, kinds.MODEL.name if d else kinds.NONE.name, d) for e in engines for d in config.depths]


def _record(arm: Arm, prompt: BenchPrompt, stats: RunStats) -> RunRecord:
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
        token_ids=list(stats.token_ids),
    )


class OurArms:
    """One of our engines (MLX or llama.cpp) with its draft model, dropped for the depth-0 arm."""

    def __init__(self, target: Path, drafter: Path, runtime: str, options: RuntimeOptions) -> None:
        self.engine = Engine.load(target, drafter, options, runtime=runtime)
        self.drafter = self.engine.drafter

    def run(self, arm: Arm, prompt: BenchPrompt, ids: list[int], n_tokens: int) -> RunRecord:
        engine = self.engine
        engine.swap_drafter(self.drafter if arm.depth else None)
        engine.forget()  # every run prefills its whole prompt
        config = GenerationConfig(max_tokens=n_tokens, depth=arm.depth, ignore_eog=True)
        stats = None
        for event in engine.stream(ids, config):
            stats = event
        assert isinstance(stats, RunStats)
        return _record(arm, prompt, stats)

    def close(self) -> None:
        self.engine.swap_drafter(self.drafter)
        self.engine.close()


class MlxLmArms:
    """mlx-lm's own loops on the modules our MLX engine loaded."""

    def __init__(self, ours: Engine) -> None:
        self.target = ours.target
        self.drafter = ours.drafter.model if ours.drafter is not None else None

    def run(self, arm: Arm, prompt: BenchPrompt, ids: list[int], n_tokens: int) -> RunRecord:
        from engine.ruler.mlx_reference import mlx_lm_run

        drafter = self.drafter.module if self.drafter is not None else None
        banned = self.target.eog_tokens()
        r = mlx_lm_run(self.target.module, drafter, ids, n_tokens, arm.depth, self.target.n_vocab, banned)
        decoded = len(r.token_ids) - 1  # the first token is the prefill's, as in our runs
        return RunRecord(
            arm=arm.name,
            prompt=prompt.name,
            repeat=0,
            prompt_tokens=len(ids),
            generated_tokens=len(r.token_ids),
            prefill_s=r.prefill_s,
            decode_s=r.decode_s,
            decode_tps=decoded / r.decode_s if r.decode_s else 0.0,
            end_to_end_tps=len(r.token_ids) / (r.prefill_s + r.decode_s),
            rounds=r.rounds,
            drafted=r.drafted,
            accepted=r.accepted,
            acceptance_per_position=r.acceptance_per_position,
            token_ids=r.token_ids,
        )

    def close(self) -> None:
        """The modules are our engine's: it closes them."""


def run_mlx_bench(config: MlxBenchConfig, progress: Progress = print) -> BenchResult:
    """Every arm on every prompt, repeats interleaved in a rotating order, each run after a warm-up."""
    options = RuntimeOptions(n_ctx=config.n_ctx, n_threads=config.threads)
    arms = mlx_arms(config)
    ours = OurArms(config.target, config.drafter, "mlx", options)
    runners: dict[str, object] = {OURS: ours, MLX_LM: MlxLmArms(ours.engine)}
    notes: list[str] = []
    try:
        if any(a.engine == OURS_LLAMA for a in arms):
            runners[OURS_LLAMA] = OurArms(config.target_gguf, config.drafter_gguf, "llama", options)
        rendered = {
            p.name: ours.engine.render([Message("user", p.text)], thinking=config.thinking) for p in config.prompts
        }
        ids = {name: ours.engine.tokenize_prompt(text) for name, text in rendered.items()}
        llama_ids = dict(ids)
        if OURS_LLAMA in runners:
            llama_ids = {name: runners[OURS_LLAMA].engine.tokenize_prompt(text) for name, text in rendered.items()}
            notes += [
                f"{n}: the GGUF's tokenizer gives other ids than the MLX folder's"
                for n in ids
                if ids[n] != llama_ids[n]
            ]
        records = _interleaved(config, arms, runners, ids, llama_ids, progress)
    finally:
        for runner in reversed(list(runners.values())):
            runner.close()
    cfg = {
        "runtime": "mlx",
        "target": str(config.target),
        "drafter": str(config.drafter),
        "drafters": {},
        "target_gguf": str(config.target_gguf) if config.target_gguf else None,
        "drafter_gguf": str(config.drafter_gguf) if config.drafter_gguf else None,
        "arms": [a.name for a in arms],
        "n_tokens": config.n_tokens,
        "repeats": config.repeats,
        "threads": options.threads,
        "n_ctx": config.n_ctx,
        "thinking": config.thinking,
        "oracle": "mlx-lm's generate_step and speculative_generate_step",
    }
    machine = describe_machine(options.threads) | {"mlx": _mlx_versions()}
    return BenchResult(cfg, machine, rendered, records, notes)


def _interleaved(config, arms, runners, ids, llama_ids, progress: Progress) -> list[RunRecord]:
    records: list[RunRecord] = []
    total, done, started = config.repeats * len(config.prompts) * len(arms), 0, time.monotonic()
    for repeat in range(config.repeats):
        for index, prompt in enumerate(config.prompts):
            shift = (repeat + index) % len(arms)  # drift and heat fall on every arm alike
            for arm in arms[shift:] + arms[:shift]:
                runner = runners[arm.engine]
                prompt_ids = llama_ids[prompt.name] if arm.engine == OURS_LLAMA else ids[prompt.name]
                reading, waited = wait_until_cool(120.0, fixed_pause_s=config.cool_pause_s)
                runner.run(arm, prompt, prompt_ids, WARMUP_TOKENS)
                record = runner.run(arm, prompt, prompt_ids, config.n_tokens)
                record.repeat, record.waited_s = repeat, waited
                record.thermal_start, record.thermal_end = reading.describe(), read_thermal().describe()
                records.append(record)
                done += 1
                left = (time.monotonic() - started) / done * (total - done)
                progress(
                    f"[{done}/{total}] {arm.name:14} {prompt.name:14} repeat {repeat + 1}/{config.repeats}: "
                    f"{record.decode_tps:6.1f} tok/s decode; about {left / 60:.0f} min left"
                )
    return records


def _mlx_versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("mlx", "mlx-lm", "mlx-vlm"):
        with contextlib.suppress(PackageNotFoundError):  # mlx-vlm is the drafters' extra
            found.append(f"{name} {version(name)}")
    return ", ".join(found)
