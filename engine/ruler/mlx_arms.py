"""The ruler on MLX: our MLX engine against mlx-lm's and mlx-vlm's own loops, and our llama engine on the same pair.

Every prompt is rendered once by our chat template on the MLX target and tokenized once; the MLX
arms (ours and mlx-lm's) all take those token ids, and our llama arm tokenizes the same rendered
text with the GGUF's tokenizer (a conversion's vocabulary is the GGUF's, so the ids agree; a run
whose ids differ says so in a note). mlx-lm's arms run on the very modules our MLX engine loaded,
each with caches of its own. Arms are interleaved with a rotating order, each run after a warm-up.

Arm engines: "ours-mlx" (engine.speculative on the MLX runtime), "mlx-lm" (mlx_lm.generate's
generate_step and speculative_generate_step, engine.ruler.mlx_reference), "mlx-vlm" (mlx-vlm's own
speculative rounds for a drafter that reads the target, engine.ruler.mlx_vlm_reference: its model
class and drafter module on the same folders), "ours-llama" (our engine on llama.cpp, where the pair
exists as GGUF files). The drafter's kind (config.kind) decides the oracles: with a draft model
mlx-lm at every depth; with one that reads the target (an MTP head, EAGLE-3, DFlash, an assistant)
mlx-lm's plain loop at depth 0 and mlx-vlm's rounds at the others. Ours with prompt lookup (the
n-gram drafter, `--ngram-depth`) has no oracle: neither mlx-lm nor mlx-vlm has such a loop.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path

from engine.chat import Message
from engine.drafting import NgramDrafter, kinds
from engine.events import RunStats
from engine.measure.thermal import read_thermal, wait_until_cool
from engine.ruler.oracle_arms import OracleArms, ReferenceRun
from engine.ruler.prompts import BenchPrompt
from engine.ruler.runner import WARMUP_TOKENS, Arm, BenchResult, Progress, RunRecord, describe_machine
from engine.runtime import RuntimeOptions
from engine.session import Engine
from engine.speculative import GenerationConfig

OURS, MLX_LM, MLX_VLM, OURS_LLAMA = "ours-mlx", "mlx-lm", "mlx-vlm", "ours-llama"
ORACLES = (MLX_LM, MLX_VLM)


@dataclass
class MlxBenchConfig:
    target: Path  # an MLX folder
    drafter: Path | None  # an MLX folder: the draft model, or the drafter of `kind`; None for MTP heads or n-gram
    prompts: list[BenchPrompt]
    kind: str = kinds.MODEL.name  # the drafter's kind (engine.drafting.kinds)
    depths: list[int] = field(default_factory=lambda: [0, 2])
    target_gguf: Path | None = None  # the same pair as GGUF files: our llama arms
    drafter_gguf: Path | None = None
    ngram_depth: int = 0  # our arm with prompt lookup (the n-gram drafter) at this depth; 0 leaves it out
    n_tokens: int = 64
    repeats: int = 3
    threads: int = 0
    n_ctx: int = 4096
    thinking: bool = False
    cool_pause_s: float = 0.0


def mlx_arms(config: MlxBenchConfig) -> list[Arm]:
    """Each engine at each depth: ours on MLX, the oracle's (mlx-lm's, or mlx-vlm's where the drafter reads
    the target: mlx-lm's plain loop at depth 0), and ours on llama.cpp where GGUF files exist. Ours with
    prompt lookup where `ngram_depth` asks for it: no oracle has such a loop, its depth-0 row is its reference."""
    ngram = [Arm(OURS, kinds.NGRAM.name, config.ngram_depth)] if config.ngram_depth else []
    if config.kind == kinds.NGRAM.name:  # prompt lookup alone (--drafter ngram): no other drafter's depths
        return [Arm(OURS, kinds.NONE.name, 0), *ngram, Arm(MLX_LM, kinds.NONE.name, 0)]
    ours = [Arm(OURS, config.kind if d else kinds.NONE.name, d) for d in config.depths] + ngram
    if config.kind != kinds.MODEL.name:
        return ours + [Arm(MLX_VLM, config.kind, d) if d else Arm(MLX_LM, kinds.NONE.name, 0) for d in config.depths]
    engines = [MLX_LM] + ([OURS_LLAMA] if config.target_gguf and config.drafter_gguf else [])
    return ours + [Arm(e, kinds.MODEL.name if d else kinds.NONE.name, d) for e in engines for d in config.depths]


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
        host_syncs=stats.host_syncs,
        token_ids=list(stats.token_ids),
    )


class OurArms:
    """One of our engines (MLX or llama.cpp) with its drafter (a path, or a kind's name such as "mtp").

    A draft model is dropped for the depth-0 arm. A drafter that reads the target stays: a depth-0
    reply pauses its watch on the target's batches (Engine.stream), as any plain reply of that pair.
    The n-gram arm swaps in prompt lookup, which needs no model and so runs on either runtime."""

    def __init__(self, target: Path, drafter: Path | str, runtime: str, options: RuntimeOptions) -> None:
        """The drafter's kind is read from its folder by the engine's own load (engine.pairloading)."""
        self.engine = Engine.load(target, drafter, options, runtime=runtime)
        self.drafter = self.engine.drafter
        self.ngram = NgramDrafter()
        self.engine.ledger_source = "bench"

    def run(self, arm: Arm, prompt: BenchPrompt, ids: list[int], n_tokens: int) -> RunRecord:
        engine = self.engine
        reads_target = self.drafter is not None and self.drafter.needs_hidden_states
        if arm.drafter == kinds.NGRAM.name:
            engine.swap_drafter(self.ngram)
        else:
            engine.swap_drafter(self.drafter if arm.depth or reads_target else None)
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


class MlxLmArms(OracleArms):
    """mlx-lm's own loops on the modules our MLX engine loaded (a draft model's, where it drafts)."""

    def __init__(self, ours: Engine) -> None:
        from engine.runtime.mlx.model import MlxModel

        assert isinstance(ours.target, MlxModel)  # run_mlx_bench loads `ours` on the "mlx" runtime
        self.target = ours.target
        drafter = getattr(ours.drafter, "model", None)  # a draft model's; a drafter reading the target has none
        self.drafter = drafter.module if drafter is not None else None

    def generate(self, ids: list[int], n_tokens: int, depth: int) -> ReferenceRun:
        from engine.ruler.mlx_reference import mlx_lm_run

        banned = self.target.eog_tokens()
        return mlx_lm_run(self.target.module, self.drafter, ids, n_tokens, depth, self.target.n_vocab, banned)


class MlxVlmArms(OracleArms):
    """mlx-vlm's own speculative rounds: its model class on the target's folder, its drafter module of
    `kind` from the drafter's folder (for an MTP head, the target's own), loaded beside our engine's."""

    def __init__(self, target: Path, drafter: Path | None, kind: str) -> None:
        from engine.ruler.mlx_vlm_reference import load_drafter, load_target

        self.kind = kind
        self.model = load_target(target, kind)
        self.drafter = load_drafter(drafter or target, kind)

    def generate(self, ids: list[int], n_tokens: int, depth: int) -> ReferenceRun:
        from engine.ruler.mlx_vlm_reference import mlx_vlm_run

        return mlx_vlm_run(self.model, self.drafter, self.kind, ids, n_tokens, depth)


def run_mlx_bench(config: MlxBenchConfig, progress: Progress = print) -> BenchResult:
    """Every arm on every prompt, repeats interleaved in a rotating order, each run after a warm-up."""
    options = RuntimeOptions(n_ctx=config.n_ctx, n_threads=config.threads)
    arms = mlx_arms(config)
    reads_target = config.kind not in (kinds.MODEL.name, kinds.NGRAM.name)
    ours = OurArms(config.target, config.drafter or config.kind, "mlx", options)
    runners: dict[str, OurArms | OracleArms] = {OURS: ours, MLX_LM: MlxLmArms(ours.engine)}
    llama: OurArms | None = None
    notes: list[str] = []
    try:
        if reads_target:
            runners[MLX_VLM] = MlxVlmArms(config.target, config.drafter, config.kind)
        if config.target_gguf and config.drafter_gguf and any(a.engine == OURS_LLAMA for a in arms):
            llama = runners[OURS_LLAMA] = OurArms(config.target_gguf, config.drafter_gguf, "llama", options)
        rendered = {
            p.name: ours.engine.render([Message("user", p.text)], thinking=config.thinking) for p in config.prompts
        }
        ids = {name: ours.engine.tokenize_prompt(text) for name, text in rendered.items()}
        llama_ids = dict(ids)
        if llama is not None:
            llama_ids = {name: llama.engine.tokenize_prompt(text) for name, text in rendered.items()}
            notes += [
                f"{n}: the GGUF's tokenizer gives other ids than the MLX folder's"
                for n in ids
                if ids[n] != llama_ids[n]
            ]
        records = _interleaved(config, arms, runners, ids, llama_ids, progress)
    finally:
        for runner in reversed(list(runners.values())):
            runner.close()
    cfg: dict[str, object] = {
        "runtime": "mlx",
        "mode": ours.engine.target.options.mode,  # "mlx cpu compiled joined" (MlxOptions.mode)
        "target": str(config.target),
        "drafter": str(config.drafter) if config.drafter else None,
        "kind": config.kind,
        "drafters": {},
        "target_gguf": str(config.target_gguf) if config.target_gguf else None,
        "drafter_gguf": str(config.drafter_gguf) if config.drafter_gguf else None,
        "arms": [a.name for a in arms],
        "n_tokens": config.n_tokens,
        "repeats": config.repeats,
        "threads": options.threads,
        "n_ctx": config.n_ctx,
        "thinking": config.thinking,
        "oracle": (
            "mlx-lm's generate_step (d0), mlx-vlm's run_speculative_rounds"
            if reads_target
            else "mlx-lm's generate_step (d0); prompt lookup has none"
            if config.kind == kinds.NGRAM.name
            else "mlx-lm's generate_step and speculative_generate_step"
        ),
    }
    machine = describe_machine(options.threads) | {"mlx": _mlx_versions()}
    return BenchResult(cfg, machine, rendered, records, notes)


def _interleaved(
    config: MlxBenchConfig,
    arms: list[Arm],
    runners: dict[str, OurArms | OracleArms],
    ids: dict[str, list[int]],
    llama_ids: dict[str, list[int]],
    progress: Progress,
) -> list[RunRecord]:
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
