"""The ruler for every drafter kind on this box: our engine against stock llama.cpp's same `--spec-type`.

No model that drafts for itself can be downloaded here, so the pairs are the tiny files the
tests write (tests/engine/synthetic*.py), in their known-by-construction variants, whose drafts
land and fail in a fixed pattern: both engines draft the same tokens, so acceptance is equal
by construction and the speeds compare the engines' rounds. These models are 128-256 wide:
a target pass takes about a millisecond, so the table measures per-round overhead (ours in
Python, theirs in C++), not what a real model would gain. Each pair runs `draftlight bench`'s
machinery (same rendered prompt bytes, interleaved arms, warm-ups, medians); the reports go
to --out, one folder per pair, and the overall rows are printed as one markdown table.
Usage: python benchmarks/ruler_kinds.py [--tokens 64] [--repeats 3] [--out bench-kinds]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "engine")]

from synthetic import N_VOCAB, dflash, eagle3, hybrid_qwen35  # noqa: E402
from synthetic_gemma4 import gemma4, gemma4_assistant  # noqa: E402
from synthetic_gemma4 import known_tables as gemma4_tables  # noqa: E402
from synthetic_variants import CYCLE, cycle_table, dflash2, dspark, known_tables, step35_mtp  # noqa: E402

from engine.ruler import report  # noqa: E402
from engine.ruler.oracle import find_oracle  # noqa: E402
from engine.ruler.prompts import built_in  # noqa: E402
from engine.ruler.runner import Arm, BenchConfig, run_bench  # noqa: E402


def pairs(folder: Path) -> list[tuple[str, Path, dict[str, str]]]:
    """(name, target, {kind: drafter}) for every kind, known by construction."""
    f = [(5 * x + 3) % N_VOCAB for x in range(N_VOCAB)]  # as tests/engine/ruler/test_ruler_kinds.py
    g = [f[x] if x % 3 else (f[x] + 1) % N_VOCAB for x in range(N_VOCAB)]
    qwen = hybrid_qwen35(folder / "qwen35-mtp.gguf", nextn=True, known=(f, g))
    settles = [(3 * x + 1) % 11 + 40 for x in range(N_VOCAB)]  # as tests/engine/drafting/test_known_readers.py
    settles[41] = settles[47] = 47
    reads = [settles[x] if x % 3 else (settles[x] + 1) % N_VOCAB for x in range(N_VOCAB)]
    ft, gt = gemma4_tables()
    t = known_tables()
    heads = [[t[x] if x % m else (t[x] + 1) % N_VOCAB for x in range(N_VOCAB)] for m in (2, 3, 4)]
    f_cycle = cycle_table(CYCLE)
    choice = [CYCLE.index(f_cycle[x]) for x in range(N_VOCAB)]
    choice[CYCLE[1]] = 6
    return [
        (
            "qwen35 hybrid",
            qwen,
            {
                "mtp": "mtp",
                "dspark": str(dspark(folder / "dspark.gguf", known=g)),
            },
        ),
        (  # known DFlash and EAGLE-3 drafters repeat one token a round: a target that settles on one
            "qwen35 hybrid, settles",
            hybrid_qwen35(folder / "settles.gguf", known=(settles, settles)),
            {
                "dflash": str(dflash(folder / "dflash.gguf", known=[47] * N_VOCAB)),
                "eagle3": str(eagle3(folder / "eagle3.gguf", known=reads)),
            },
        ),
        (
            "gemma4",
            gemma4(folder / "gemma4.gguf", known=(ft, gt)),
            {"assistant": str(gemma4_assistant(folder / "mtp-gemma4.gguf", known=(ft, gt)))},
        ),
        ("step35, 3 chained heads", step35_mtp(folder / "step35.gguf", known=(t, heads)), {"mtp": "mtp"}),
        (
            "qwen35 hybrid, cycle",
            hybrid_qwen35(folder / "cycle.gguf", known=(f_cycle, f_cycle)),
            {"dflash": str(dflash2(folder / "dflash2.gguf", top_k=len(CYCLE), known=(CYCLE, choice)))},
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--depths", default="1,2,3")
    parser.add_argument("--out", default="bench-kinds")
    args = parser.parse_args()
    depths = [int(d) for d in args.depths.split(",")]
    build = find_oracle()
    if build is None:
        print("stock llama.cpp is not built: run `make oracle` first", file=sys.stderr)
        return 1
    folder = Path(tempfile.mkdtemp(prefix="draftlight-kinds-"))
    rows = []
    for name, target, drafters in pairs(folder):
        drafting = [(kind, d) for kind in drafters for d in depths]
        arms = [Arm("ours", "none", 0), *(Arm("ours", k, d) for k, d in drafting)]
        arms += [Arm("llama.cpp", "none", 0), *(Arm("llama.cpp", k, d) for k, d in drafting)]
        config = BenchConfig(
            target, None, built_in(["code", "writing"]), arms, drafters=drafters, n_tokens=args.tokens,
            repeats=args.repeats, n_ctx=512, cool_pause_s=0.2,
        )  # fmt: skip
        print(f"{name}: {len(arms)} arms", file=sys.stderr)
        result = run_bench(config, build, lambda line: print(line, file=sys.stderr, flush=True))
        report.write(result, Path(args.out) / name.replace(" ", "-").replace(",", ""))
        _, overall = report.summarize(result)
        index = {c.arm: c for c in overall}
        for c in overall:
            if not c.arm.startswith("ours"):
                continue
            theirs = index.get(c.arm.replace("ours", "llama.cpp", 1))
            label = c.arm.removeprefix("ours ")
            variant = {"qwen35 hybrid, cycle": "dflash2"}.get(name)
            label = label.replace("dflash", variant) if variant else label
            rows.append((name, label, c, theirs, report.mismatches(result)))

    def fmt(value: float | None) -> str:
        return "—" if value is None else f"{value:.2f}"

    print("| target | arm | acceptance | decode tok/s ours | llama.cpp | ours / llama.cpp | c ours | c llama.cpp |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for name, label, c, theirs, _ in rows:
        acc = " ".join(f"{a:.0%}" for a in c.acceptance) or "—"
        print(
            f"| {name} | {label} | {acc} | {c.decode_tps:.0f} | {theirs.decode_tps:.0f} | "
            f"{c.decode_tps / theirs.decode_tps:.2f} | {fmt(c.round_cost)} | {fmt(theirs.round_cost)} |"
        )
    same = all(not m for *_, m in rows)
    print(f"\nEvery greedy arm wrote the same tokens in both engines: {'yes' if same else 'NO'}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
