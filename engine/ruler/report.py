"""From raw runs to the figures worth acting on: tables, JSON and plots."""

from __future__ import annotations

import contextlib
import json
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from engine.drafting import kinds
from engine.ruler.runner import BenchResult, RunRecord


@dataclass
class Cell:
    """One arm on one prompt (or overall): medians over the repeats."""

    arm: str
    prompt: str
    runs: int
    decode_tps: float
    end_to_end_tps: float
    prefill_ms: float
    generated: int
    rounds: int | None
    acceptance: list[float] = field(default_factory=list)
    mean_length: float | None = None
    speedup: float | None = None  # against depth 0 of the same engine and weight layout
    round_cost: float | None = None  # c = round time / plain pass time
    round_cost_from_speedup: float | None = None  # depth 1: c = (1 + a) / speedup
    vs_llama: float | None = None  # ours / llama.cpp, same depth and layout
    split_ms: dict[str, float] = field(default_factory=dict)  # ours: draft, verify, commit, rewind per round
    overhead_ms: float | None = None
    predicted_speedup: float | None = None
    depth_used: str = ""


def _med(values: Iterable[float | None]) -> float:
    """The median, None and NaN left out; NaN where nothing is left."""
    kept = [v for v in values if v is not None and not math.isnan(v)]
    return statistics.median(kept) if kept else float("nan")


def _engine(arm: str) -> str:
    return arm.split(" ", 1)[0]


def _depth(arm: str) -> str:
    return arm.split(" ", 1)[1]


def _plain_of(arm: str) -> str:
    return f"{_engine(arm)} d0{' repack' if arm.endswith(' repack') else ''}"


def _pass_s(records: list[RunRecord]) -> float:
    """Seconds per target pass in plain runs (llama.cpp's first token comes from the prefill)."""
    return _med([r.decode_s / r.rounds for r in records if r.rounds])


def summarize(result: BenchResult) -> tuple[list[Cell], list[Cell]]:
    """Cells per (prompt, arm), and overall per arm."""
    by: dict[tuple[str, str], list[RunRecord]] = {}
    for r in result.records:
        by.setdefault((r.prompt, r.arm), []).append(r)
    arms = list(dict.fromkeys(r.arm for r in result.records))
    prompts = list(dict.fromkeys(r.prompt for r in result.records))
    cells: list[Cell] = []
    for prompt in prompts:
        for arm in arms:
            runs = by.get((prompt, arm))
            if runs:
                cells.append(_cell(arm, prompt, runs, by.get((prompt, _plain_of(arm)), [])))
    index = {(c.prompt, c.arm): c for c in cells}
    for c in cells:
        if _engine(c.arm) == "ours":
            other = index.get((c.prompt, "llama.cpp " + _depth(c.arm)))
            if other and other.decode_tps:
                c.vs_llama = c.decode_tps / other.decode_tps
    overall = []
    for arm in arms:
        runs = [r for r in result.records if r.arm == arm]
        plain = [r for r in result.records if r.arm == _plain_of(arm)]
        overall.append(_overall(arm, runs, plain))
    o_index = {c.arm: c for c in overall}
    for c in overall:
        if _engine(c.arm) == "ours":
            other = o_index.get("llama.cpp " + _depth(c.arm))
            if other and other.decode_tps:
                c.vs_llama = c.decode_tps / other.decode_tps
    return cells, overall


def _drafters(cfg: dict) -> str:
    """The drafters in words: "drafter x.gguf", "mtp: the target's own heads", "dflash: y.gguf"."""
    said = [f"drafter {Path(cfg['drafter']).name}"] if cfg.get("drafter") else []
    for kind, spec in cfg.get("drafters", {}).items():
        said.append(f"{kind}: " + ("the target's own heads" if spec == kinds.MTP.name else Path(spec).name))
    return ", ".join(said) or "no drafter"


def _cell(arm: str, prompt: str, runs: list[RunRecord], plain: list[RunRecord]) -> Cell:
    first = runs[0]
    c = Cell(
        arm=arm,
        prompt=prompt,
        runs=len(runs),
        decode_tps=_med([r.decode_tps for r in runs]),
        end_to_end_tps=_med([r.end_to_end_tps for r in runs]),
        prefill_ms=_med([r.prefill_s * 1e3 for r in runs]),
        generated=first.generated_tokens,
        rounds=first.rounds,
    )
    if first.drafted:
        c.acceptance = [_med([r.acceptance_per_position[i] for r in runs if i < len(r.acceptance_per_position)])
                        for i in range(max(len(r.acceptance_per_position) for r in runs))]  # fmt: skip
        if not c.acceptance and first.accepted is not None:
            c.acceptance = [_med([r.accepted / r.drafted for r in runs if r.drafted and r.accepted is not None])]
    if first.rounds:  # both engines write the first token from the prefill: decode rounds write the rest
        c.mean_length = (first.generated_tokens - 1) / first.rounds
    if plain and not arm.endswith("d0") and not arm.endswith("d0 repack"):
        plain_tps = _med([r.decode_tps for r in plain])
        c.speedup = c.decode_tps / plain_tps if plain_tps else None
        pass_s = _pass_s(plain)
        round_s = _med([r.decode_s / r.rounds for r in runs if r.rounds])
        c.round_cost = round_s / pass_s if pass_s else None
        if _depth(arm) in ("d1", "d1 repack") and c.acceptance and c.speedup:
            c.round_cost_from_speedup = (1 + c.acceptance[0]) / c.speedup
    elif arm.endswith("d0") or arm.endswith("d0 repack"):
        c.speedup, c.round_cost = 1.0, 1.0
    if first.draft_s is not None and first.rounds:
        splits = [s for s in map(_split_ms, runs) if s is not None]
        c.split_ms = {part: _med([s[part] for s in splits]) for part in ("draft", "verify", "commit", "rewind")}
        c.overhead_ms = _med([s["overhead"] for s in splits])
    if first.predicted_speedup is not None:
        c.predicted_speedup = _med([r.predicted_speedup for r in runs])
        depths = [d for r in runs[:1] for d in r.depth_used]
        if depths:
            counts = {d: depths.count(d) for d in sorted(set(depths))}
            c.depth_used = " ".join(f"{d}:{n}" for d, n in counts.items())
    return c


def _split_ms(r: RunRecord) -> dict[str, float] | None:
    """Our round split into its parts, in ms per round; None for a run that has none (llama.cpp's)."""
    draft, verify, commit, rewind, overhead = r.draft_s, r.verify_s, r.commit_s, r.rewind_s, r.overhead_s
    if not r.rounds or draft is None or verify is None or commit is None or rewind is None or overhead is None:
        return None
    return {
        "draft": draft / r.rounds * 1e3,
        "verify": verify / r.rounds * 1e3,
        "commit": (commit - rewind) / r.rounds * 1e3,
        "rewind": rewind / r.rounds * 1e3,
        "overhead": overhead / r.rounds * 1e3,
    }


def _median_runs(runs: list[RunRecord]) -> dict[str, RunRecord]:
    """Each prompt's median run by decode speed."""
    per_prompt: dict[str, list[RunRecord]] = {}
    for r in runs:
        per_prompt.setdefault(r.prompt, []).append(r)
    return {p: sorted(rs, key=lambda r: r.decode_tps)[len(rs) // 2] for p, rs in per_prompt.items()}


def _overall(arm: str, runs: list[RunRecord], plain: list[RunRecord]) -> Cell:
    """Totals over prompts: tokens over time, each prompt's median run."""
    chosen = list(_median_runs(runs).values())
    tokens = sum(r.generated_tokens for r in chosen)
    decode = sum(r.decode_s for r in chosen)
    prefill = sum(r.prefill_s for r in chosen)
    emitted = sum(r.generated_tokens - 1 for r in chosen)  # the first token of each run is the prefill's
    c = Cell(
        arm=arm,
        prompt="overall",
        runs=len(runs),
        decode_tps=emitted / decode if decode else float("nan"),
        end_to_end_tps=tokens / (decode + prefill) if decode + prefill else float("nan"),
        prefill_ms=prefill / len(chosen) * 1e3,
        generated=tokens,
        rounds=sum(r.rounds or 0 for r in chosen) or None,
    )
    drafted = sum(r.drafted or 0 for r in chosen)
    if drafted:
        c.acceptance = [sum(r.accepted or 0 for r in chosen) / drafted]
    if c.rounds:
        c.mean_length = emitted / c.rounds
    if plain:
        p_chosen = _median_runs(plain)
        p_decode = sum(p_chosen[r.prompt].decode_s for r in chosen if r.prompt in p_chosen)
        p_emitted = sum(p_chosen[r.prompt].rounds or 0 for r in chosen if r.prompt in p_chosen)
        if p_decode and p_emitted:
            c.speedup = c.decode_tps / (p_emitted / p_decode)
            if c.rounds:
                c.round_cost = (decode / c.rounds) / (p_decode / p_emitted)
    return c


# ---- output -----------------------------------------------------------------------------


def _f(value: float | None, fmt: str = "{:.2f}") -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else fmt.format(value)


def mismatches(result: BenchResult) -> list[str]:
    """Greedy arms must agree token for token: across our depths, and with llama.cpp."""
    out = []
    by_prompt: dict[str, dict[str, list[int]]] = {}
    for r in result.records:
        if r.token_ids:
            by_prompt.setdefault(r.prompt, {}).setdefault(r.arm, r.token_ids)
    for prompt, arms in by_prompt.items():
        for layout in ("", " repack"):
            ref_name = f"ours d0{layout}"
            ref = arms.get(ref_name)
            if ref is None:
                continue
            for arm, ids in arms.items():
                if arm == ref_name or not arm.endswith(layout) or (not layout and arm.endswith(" repack")):
                    continue
                if ids != ref:
                    n = next((i for i, (a, b) in enumerate(zip(ids, ref)) if a != b), min(len(ids), len(ref)))
                    out.append(
                        f"{prompt}: {arm} differs from {ref_name} at token {n} "
                        f"({ids[n] if n < len(ids) else 'end'} vs {ref[n] if n < len(ref) else 'end'})"
                    )
    return out


def markdown(result: BenchResult) -> str:
    cells, overall = summarize(result)
    cfg, machine = result.config, result.machine
    lines = ["# Draftlight ruler", ""]
    lines += [
        f"- Machine: {machine.get('cpu', machine.get('processor', ''))} ({machine.get('cpu_count')} cores, "
        f"{machine.get('memory_gib', '?')} GiB), {machine.get('platform')}",
        f"- Runtime: {machine.get('runtime')}; llama.cpp: `{machine.get('llama_cpp_system_info')}`",
        f"- Reference: {cfg.get('oracle') or 'none (our arms only)'}",
        f"- Target {Path(cfg['target']).name}, {_drafters(cfg)}; {cfg['n_tokens']} tokens per run "
        f"(end-of-generation banned in both engines), greedy, {cfg['threads']} threads, context {cfg['n_ctx']}, "
        f"thinking {'on' if cfg['thinking'] else 'off'}; median of {cfg['repeats']} interleaved repeats, "
        "each after a warm-up and a cool-down.",
        f"- Thermal at start: {machine.get('thermal')}",
        "- Arms: `d0` is speculation off; `dK` drafts K tokens a round with the drafter model; `mtp dK`, "
        "`dflash dK`, `eagle3 dK`, `assistant dK` with that kind of drafter (llama.cpp's arm runs the same "
        "`--spec-type`); `ngram` uses prompt lookup; `repack` allows CPU weight repacking (llama.cpp's `--repack`, our fast mode); the rest "
        "run without it (our exact mode, `--no-repack`).",
        "",
    ]
    for note in result.notes:
        lines.append(f"> {note}")
    lines += ["", "## Overall", "", _table(overall, overall=True), ""]
    lines += ["## Per prompt", ""]
    for prompt in dict.fromkeys(c.prompt for c in cells):
        lines += [f"### {prompt}", "", _table([c for c in cells if c.prompt == prompt]), ""]
    split = [c for c in cells if c.split_ms]
    if split:
        lines += ["## Our round, split (ms per round, median)", ""]
        lines += [
            "| prompt | arm | draft | verify | accept+commit | rewind | Python overhead |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for c in split:
            s = c.split_ms
            lines.append(
                f"| {c.prompt} | {c.arm} | {s['draft']:.1f} | {s['verify']:.1f} | {s['commit']:.2f} | "
                f"{s['rewind']:.3f} | {_f(c.overhead_ms, '{:.2f}')} |"
            )
        lines.append("")
    auto = [(c, c.predicted_speedup) for c in cells if c.predicted_speedup is not None]
    if auto:
        lines += ["## Auto depth: predicted vs measured speedup", ""]
        lines += ["| prompt | depths used (depth:rounds) | predicted | measured | error |", "|---|---|---:|---:|---:|"]
        for c, predicted in auto:
            err = (predicted / c.speedup - 1) * 100 if c.speedup else None
            lines.append(f"| {c.prompt} | {c.depth_used} | {predicted:.2f} | {_f(c.speedup)} | {_f(err, '{:+.1f}%')} |")
        lines.append("")
    wrong = mismatches(result)
    lines += ["## Correctness", ""]
    oracle = any(_engine(arm) == "llama.cpp" for arm in result.config.get("arms", []))
    repack = any(arm.endswith(" repack") for arm in result.config.get("arms", []))
    agreed = "- Every greedy arm produced the same token ids as `ours d0` on every prompt"
    if oracle:
        agreed += ", llama.cpp's arms included"
    if repack:
        agreed += " (repacked arms are compared with `ours d0 repack`: repacking changes the arithmetic)"
    lines += [f"- MISMATCH {w}" for w in wrong] or [agreed + "."]
    lines.append("")
    return "\n".join(lines)


def _table(cells: list[Cell], overall: bool = False) -> str:
    head = (
        "| arm | decode tok/s | end-to-end tok/s | prefill ms | acceptance per position | tokens/round | "
        "speedup | c | c = (1+a)/s | ours / llama.cpp |"
    )
    rows = [head, "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    for c in cells:
        acc = " ".join(f"{a:.0%}" for a in c.acceptance) or "—"
        rows.append(
            f"| {c.arm} | {c.decode_tps:.2f} | {c.end_to_end_tps:.2f} | {c.prefill_ms:.0f} | {acc} | "
            f"{_f(c.mean_length)} | {_f(c.speedup)} | {_f(c.round_cost)} | {_f(c.round_cost_from_speedup)} | "
            f"{_f(c.vs_llama)} |"
        )
    return "\n".join(rows)


def write(result: BenchResult, out_dir: Path) -> dict[str, Path]:
    """bench.md, bench.json (every raw run) and, where matplotlib is installed, PNG plots."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": out_dir / "bench.md", "json": out_dir / "bench.json"}
    paths["markdown"].write_text(markdown(result), encoding="utf-8")
    cells, overall = summarize(result)
    data = result.to_json() | {"summary": [c.__dict__ for c in cells + overall], "mismatches": mismatches(result)}
    paths["json"].write_text(json.dumps(data, indent=1), encoding="utf-8")
    with contextlib.suppress(ImportError):  # plots need the bench extra (matplotlib); tables stand alone
        paths |= plots(cells, out_dir)
    return paths


def plots(cells: list[Cell], out_dir: Path) -> dict[str, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    prompts = list(dict.fromkeys(c.prompt for c in cells))
    arms = list(dict.fromkeys(c.arm for c in cells))
    index = {(c.prompt, c.arm): c for c in cells}
    # One hue per arm kind (d0, d1, ..., ngram, repack), dark for ours, light for llama.cpp.
    hues = list(dict.fromkeys(_depth(arm) for arm in arms))
    palette = plt.get_cmap("tab20")  # 20 colors: an integer picks one (RGBA, opaque)
    fig, ax = plt.subplots(figsize=(max(8, len(prompts) * 1.8), 5.5))
    width = 0.8 / len(arms)
    for i, arm in enumerate(arms):
        ys = [index[(p, arm)].decode_tps if (p, arm) in index else 0 for p in prompts]
        color = palette((2 * hues.index(_depth(arm)) + (_engine(arm) != "ours")) % palette.N)
        ax.bar([j + i * width for j in range(len(prompts))], ys, width, label=arm, color=color)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(prompts))], prompts)
    ax.set_ylabel("decode tok/s")
    ax.set_title("Decode speed by arm and prompt")
    ax.legend(fontsize=7, ncol=min(len(arms), 6), loc="upper center", bbox_to_anchor=(0.5, -0.08), frameon=False)
    fig.tight_layout()
    tps = out_dir / "tokens_per_second.png"
    fig.savefig(tps, dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    deepest = max(
        (c for c in cells if c.arm.startswith("ours d") and c.acceptance), key=lambda c: len(c.acceptance), default=None
    )
    if deepest is not None:
        for p in prompts:
            c = index.get((p, deepest.arm))
            if c and c.acceptance:
                ax.plot(range(1, len(c.acceptance) + 1), c.acceptance, marker="o", label=p)
        ax.set_title(f"Acceptance per draft position ({deepest.arm})")
        ax.set_xticks(range(1, len(deepest.acceptance) + 1))
    ax.set_xlabel("draft position")
    ax.set_ylabel("accepted")
    ax.set_ylim(0, 1.05)
    if ax.get_lines():
        ax.legend(fontsize=8)
    else:  # depth 0 alone, or no draft verified: an empty chart would look like a broken one
        ax.text(0.5, 0.5, "No draft was verified in these runs.", ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    acc = out_dir / "acceptance.png"
    fig.savefig(acc, dpi=120)
    plt.close(fig)
    return {"tokens_per_second": tps, "acceptance": acc}
