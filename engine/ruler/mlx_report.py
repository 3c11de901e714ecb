"""The MLX ruler's report: ours against the oracle's loops at each depth, and our Python per round.

The oracle at a depth is the one arm of mlx-lm or mlx-vlm run there (engine.ruler.mlx_arms).

"Our Python per round" is a round's wall time less the time inside the runtime's decode calls
(building the model's graph, mx.eval, and the rows' copy to numpy: MlxContext.decode_s, the
drafter's context's too), the overhead each RoundEvent reports: the walk, the rewind's bookkeeping,
the drafter's host-side choices and the events. The oracles' loops have no such seam, so only ours is given.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from engine.drafting import kinds
from engine.ruler.mlx_arms import MLX_LM, MLX_VLM, ORACLES, OURS, OURS_LLAMA, MlxBenchConfig, run_mlx_bench
from engine.ruler.report import Cell, _f, summarize
from engine.ruler.runner import BenchResult, RunRecord


def oracle_of(cells: list[Cell], arm: str) -> Cell | None:
    """The oracle's cell beside one of ours (same prompt, same kind and depth): mlx-lm's or mlx-vlm's."""
    engine, depth = arm.split(" ", 1)
    if engine != OURS:
        return None
    names = {f"{oracle} {depth}" for oracle in ORACLES}
    return next((c for c in cells if c.arm in names), None)


def ratios(cells: list[Cell]) -> dict[tuple[str, str], float]:
    """(prompt, depth) -> ours-mlx decode tok/s over the oracle's, same prompt and depth."""
    out = {}
    for c in cells:
        other = oracle_of([o for o in cells if o.prompt == c.prompt], c.arm)
        if other is not None and other.decode_tps:
            out[(c.prompt, c.arm.split(" ", 1)[1])] = c.decode_tps / other.decode_tps
    return out


def python_ms(records: list[RunRecord], arm: str) -> float | None:
    """Median over runs of our Python per round (ms): overhead_s / rounds."""
    values = sorted(
        r.overhead_s / r.rounds * 1e3 for r in records if r.arm == arm and r.rounds and r.overhead_s is not None
    )
    return values[len(values) // 2] if values else None


def syncs_per_round(records: list[RunRecord], arm: str) -> float | None:
    """Median over runs of our host syncs per round (the eval audit)."""
    values = sorted(r.host_syncs / r.rounds for r in records if r.arm == arm and r.rounds and r.host_syncs is not None)
    return values[len(values) // 2] if values else None


def mismatches(result: BenchResult) -> list[str]:
    """Greedy arms agree token for token: the MLX arms with `ours-mlx d0`, the llama arms with `ours-llama d0`."""
    out = []
    firsts: dict[tuple[str, str], list[int]] = {}
    for r in result.records:
        firsts.setdefault((r.prompt, r.arm), r.token_ids)
    for (prompt, arm), ids in firsts.items():
        ref_name = f"{OURS_LLAMA} d0" if arm.startswith(OURS_LLAMA) else f"{OURS} d0"
        ref = firsts.get((prompt, ref_name))
        if ref is not None and ids != ref:
            n = next((i for i, (a, b) in enumerate(zip(ids, ref)) if a != b), min(len(ids), len(ref)))
            out.append(f"{prompt}: {arm} differs from {ref_name} at token {n}")
    return out


def markdown(result: BenchResult) -> str:
    cells, overall = summarize(result)
    cfg, machine = result.config, result.machine
    oracles = [o for o in ORACLES if any(c.arm.startswith(o + " ") for c in overall)]
    drafter = (
        Path(cfg["drafter"]).name
        if cfg.get("drafter")
        else "prompt lookup alone"
        if cfg.get("kind") == kinds.NGRAM.name
        else f"the target's own {cfg.get('kind')}"
    )
    lines = [
        "# Draftlight ruler on MLX",
        "",
        f"- Machine: {machine.get('cpu', machine.get('processor', ''))} ({machine.get('cpu_count')} cores), "
        f"{machine.get('platform')}; {machine.get('mlx', '')}",
        f"- Target {Path(cfg['target']).name}, drafter {drafter}"
        + (
            f"; GGUF {Path(cfg['target_gguf']).name} + {Path(cfg['drafter_gguf']).name}"
            if cfg.get("target_gguf")
            else ""
        )
        + f"; {cfg['n_tokens']} tokens per run (end-of-generation banned), greedy; median of {cfg['repeats']} "
        "interleaved repeats, each after a warm-up.",
        f"- Arms: `{OURS}` our engine on MLX ({cfg.get('mode', 'mlx')}), `{MLX_LM}` mlx-lm's generate_step (d0) and speculative_generate_step "
        f"(dK) on the same modules and token ids, `{MLX_VLM}` mlx-vlm's own model class and drafter on the same "
        f"folders (its run_speculative_rounds, greedy: no id banned), `{OURS_LLAMA}` our engine on llama.cpp on "
        "the GGUF pair; the oracle at a depth is the mlx-lm or mlx-vlm arm run there."
        + (
            f" `{OURS} ngram dK` is ours with prompt lookup (the n-gram drafter): mlx-lm and mlx-vlm have no "
            f"prompt-lookup loop, so it has no oracle and its comparison is `{OURS} d0` (the speedup column)."
            if any(f" {kinds.NGRAM.name} " in arm for arm in cfg.get("arms", []))
            else ""
        ),
        "- Our Python per round: round wall time less the time inside MLX decode calls (graph, mx.eval, copy).",
        "- Syncs per round: the times the host waited for MLX in a round (engine.runtime.mlx.audit).",
        "",
    ]
    lines += [f"> {note}" for note in result.notes]
    rows = [
        "| arm | decode tok/s | end-to-end tok/s | prefill ms | acceptance | tokens/round | speedup | "
        f"ours / {' or '.join(oracles)} | our Python ms/round | syncs/round |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in overall:
        engine = c.arm.split(" ", 1)[0]
        theirs = oracle_of(overall, c.arm)
        ratio = c.decode_tps / theirs.decode_tps if theirs and theirs.decode_tps else None
        acc = f"{c.acceptance[0]:.0%}" if c.acceptance else "—"
        py = python_ms(result.records, c.arm) if engine not in ORACLES else None
        syncs = syncs_per_round(result.records, c.arm) if engine not in ORACLES else None
        rows.append(
            f"| {c.arm} | {c.decode_tps:.1f} | {c.end_to_end_tps:.1f} | {c.prefill_ms:.0f} | {acc} | "
            f"{_f(c.mean_length)} | {_f(c.speedup)} | {_f(ratio)} | {_f(py)} | {_f(syncs)} |"
        )
    lines += ["## Overall", "", *rows, ""]
    by_prompt = ratios(cells)
    if by_prompt:
        depths = list(dict.fromkeys(d for _, d in by_prompt))
        lines += [f"## ours-mlx / {' or '.join(oracles)}, decode tok/s, per prompt", ""]
        lines += ["| prompt | " + " | ".join(depths) + " |", "|---|" + "---:|" * len(depths)]
        for prompt in dict.fromkeys(p for p, _ in by_prompt):
            lines.append(f"| {prompt} | " + " | ".join(_f(by_prompt.get((prompt, d))) for d in depths) + " |")
        lines.append("")
    split = [c for c in cells if c.split_ms and c.arm.startswith(OURS + " ") and not c.arm.endswith(" d0")]
    if split:
        lines += ["## Our MLX round, split (ms per round, median)", ""]
        lines += ["| prompt | arm | draft | verify | commit | Python |", "|---|---|---:|---:|---:|---:|"]
        for c in split:
            s = c.split_ms
            lines.append(
                f"| {c.prompt} | {c.arm} | {s['draft']:.2f} | {s['verify']:.2f} | {s['commit']:.2f} | "
                f"{_f(c.overhead_ms)} |"
            )
        lines.append("")
    wrong = mismatches(result)
    lines += ["## Correctness", ""]
    lines += [f"- MISMATCH {w}" for w in wrong] or [
        f"- Every MLX arm gave the token ids of `{OURS} d0` on every prompt"
        + (f"; every llama arm those of `{OURS_LLAMA} d0`." if cfg.get("target_gguf") else ".")
    ]
    lines.append("")
    return "\n".join(lines)


def write(result: BenchResult, out_dir: Path) -> dict[str, Path]:
    """bench-mlx.md and bench-mlx.json (every raw run, the summary, the mismatches)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": out_dir / "bench-mlx.md", "json": out_dir / "bench-mlx.json"}
    paths["markdown"].write_text(markdown(result), encoding="utf-8")
    cells, overall = summarize(result)
    data = result.to_json() | {"summary": [c.__dict__ for c in cells + overall], "mismatches": mismatches(result)}
    paths["json"].write_text(json.dumps(data, indent=1), encoding="utf-8")
    return paths


def run_and_print(config: MlxBenchConfig, out_dir: Path) -> list[str]:
    """Run the MLX ruler (progress on stderr), write its reports into `out_dir`, print its table; its mismatches."""
    result = run_mlx_bench(config, lambda line: print(line, file=sys.stderr, flush=True))
    paths = write(result, out_dir)
    print(markdown(result))
    print("wrote " + ", ".join(str(p) for p in paths.values()), file=sys.stderr)
    return mismatches(result)
