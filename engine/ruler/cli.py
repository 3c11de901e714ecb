"""`draftlight bench` and `draftlight oracle`: the ruler from the command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from engine.depth import AUTO, MAX_DEPTH
from engine.drafting import kinds
from engine.errors import DraftlightError
from engine.models import catalog
from engine.models.discover import drafter_kind
from engine.progress import terminal_progress
from engine.ruler.prompts import built_in, load_file
from engine.ruler.runner import Arm, BenchConfig, run_bench
from engine.runtime.loading import chosen_runtime
from engine.runtime.mlx import RUNTIME as MLX_RUNTIME


def _depths(text: str) -> list[int]:
    try:
        depths = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError("depths are whole numbers, e.g. 0,1,2,3") from None
    if not depths or depths[0] < 0 or depths[-1] > MAX_DEPTH:
        raise argparse.ArgumentTypeError(f"depths must be between 0 and {MAX_DEPTH}")
    return depths


def arms_for(args: argparse.Namespace, drafter_kinds: Sequence[str] = (kinds.MODEL.name,)) -> list[Arm]:
    """Depth 0, then every drafter kind at every depth asked for; llama.cpp's arms beside ours."""
    depths = sorted(set(args.depths) - {0})
    drafting = [Arm("ours", kind, d) for kind in drafter_kinds for d in depths]
    arms = [Arm("ours", kinds.NONE.name, 0), *drafting]  # speedups are against depth 0
    if args.ngram_depth:
        arms.append(Arm("ours", kinds.NGRAM.name, args.ngram_depth))
    if args.auto:
        arms += [Arm("ours", kind, AUTO) for kind in drafter_kinds]
    if not args.no_oracle:
        arms += [Arm("llama.cpp", kinds.NONE.name, 0), *(Arm("llama.cpp", a.drafter, a.depth) for a in drafting)]
    if args.repack:
        arms.append(Arm("ours", kinds.NONE.name, 0, fast=True))
        if not args.no_oracle:
            arms.append(Arm("llama.cpp", kinds.NONE.name, 0, fast=True))
    return arms


def cmd_bench(args: argparse.Namespace) -> int:
    from engine.ruler import report

    progress = terminal_progress()
    target = catalog.resolve(args.target if args.target != "default" else catalog.DEFAULT_TARGET, progress)
    if chosen_runtime(target, args.runtime) is MLX_RUNTIME:  # MLX's arms, round for round like mlx-vlm's
        from engine.ruler.mlx_cli import cmd_bench_mlx

        return cmd_bench_mlx(args)
    drafter, drafters = None, {}  # the draft model; the other kinds' drafters
    for spec in args.drafter or ["default"]:
        if spec not in kinds.KEYWORDS:
            spec = str(catalog.resolve(catalog.DEFAULT_DRAFTER if spec == "default" else spec, progress))
        kind = drafter_kind(target, spec)
        if kind in (kinds.NGRAM.name, kinds.NONE.name):
            continue  # the n-gram arm has its own flag; depth 0 is always there
        if kind == kinds.MODEL.name:
            drafter = Path(spec)
        else:
            drafters[kind] = spec
    prompts = load_file(args.prompts) if args.prompts else built_in(args.only.split(",") if args.only else None)
    build = None
    if not args.no_oracle:
        build = _oracle(args.build_oracle)
    config = BenchConfig(
        target=target,
        drafter=drafter,
        drafters=drafters,
        prompts=prompts,
        arms=arms_for(args, ([kinds.MODEL.name] if drafter else []) + list(drafters)),
        n_tokens=args.tokens,
        repeats=args.repeats,
        threads=args.threads,
        n_ctx=args.ctx,
        thinking=args.thinking == "on",
        cool_pause_s=args.cool_pause,
    )
    print(
        f"ruler: {len(prompts)} prompts x {len(config.arms)} arms x {args.repeats} repeats, {args.tokens} tokens each",
        file=sys.stderr,
    )
    result = run_bench(config, build, lambda line: print(line, file=sys.stderr, flush=True))
    paths = report.write(result, Path(args.out))
    print(report.markdown(result))
    print("wrote " + ", ".join(str(p) for p in paths.values()), file=sys.stderr)
    return 1 if report.mismatches(result) and args.strict else 0


def _oracle(build_if_missing: bool):
    from engine.ruler.oracle import OracleUnavailable, build_oracle, find_oracle

    found = find_oracle()
    if found is not None or not build_if_missing:
        if found is None:
            print("ruler: stock llama.cpp is not built (`make oracle`); running our arms alone", file=sys.stderr)
        return found
    try:
        return build_oracle(lambda line: print(f"oracle: {line}", file=sys.stderr, flush=True))
    except OracleUnavailable as exc:
        print(f"ruler: {exc} Running our arms alone.", file=sys.stderr)
        return None


def cmd_oracle(args: argparse.Namespace) -> int:
    from engine.ruler.oracle import build_oracle, find_oracle

    if args.action == "status":
        found = find_oracle()
        print(f"stock llama.cpp: {found.source} in {found.bin_dir}" if found else "stock llama.cpp: not built")
        return 0 if found else 1
    build = build_oracle(lambda line: print(f"oracle: {line}", file=sys.stderr, flush=True), source=args.source)
    print(f"stock llama.cpp: {build.source} in {build.bin_dir}")
    return 0


def add_cli(sub) -> None:
    bench = sub.add_parser("bench", help="the ruler: our engine and stock llama.cpp on the same prompt bytes")
    bench.add_argument("--prompts", help="JSONL of {category, prompt}, or Spec-Bench's question.jsonl")
    bench.add_argument("--only", help="built-in prompts to run, e.g. code,writing (default: all six)")
    bench.add_argument("--depths", type=_depths, default=[0, 1, 2], help="draft depths (default 0,1,2)")
    bench.add_argument("--ngram-depth", type=int, default=3, help="depth of the n-gram arm; 0 leaves it out")
    bench.add_argument("--auto", action="store_true", help="add the tuner's Auto arm")
    bench.add_argument("--tokens", type=int, default=96, help="tokens generated in every run (default 96)")
    bench.add_argument("--repeats", type=int, default=3)
    bench.add_argument("--threads", type=int, default=0)
    bench.add_argument("--ctx", type=int, default=4096)
    bench.add_argument("--thinking", choices=("on", "off"), default="off")
    bench.add_argument("--target", default="default")
    bench.add_argument(
        "--runtime",
        choices=("llama", "mlx"),
        default="llama",
        help="mlx: our MLX engine against mlx-lm's own loops (and our llama engine where the pair is GGUF)",
    )
    bench.add_argument(
        "--drafter",
        action="append",
        help="default, a catalog name, a .gguf (a draft model, DFlash, EAGLE-3, a file of MTP heads), an MLX "
        "folder, mtp, or ngram (prompt lookup alone, at --ngram-depth); "
        "repeat to measure several kinds side by side (default: the default draft model)",
    )
    bench.add_argument("--no-oracle", action="store_true", help="our arms only (with --runtime mlx: no llama.cpp arms)")
    bench.add_argument("--build-oracle", action="store_true", help="build stock llama.cpp first if it is missing")
    bench.add_argument("--repack", action="store_true", help="also run depth 0 with weight repacking in both engines")
    bench.add_argument("--cool-pause", type=float, default=2.0, help="seconds to pause where no thermal state is known")
    bench.add_argument("--out", default="bench-results", help="folder for bench.md, bench.json and plots")
    bench.add_argument("--strict", action="store_true", help="exit 1 if greedy arms disagree")
    bench.set_defaults(func=cmd_bench)

    oracle = sub.add_parser("oracle", help="build or locate stock llama.cpp (the ruler's reference)")
    oracle.add_argument("action", choices=("build", "status"))
    oracle.add_argument("--source", help="an sdist or a llama.cpp source folder instead of the pinned download")
    oracle.set_defaults(func=cmd_oracle)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="draftlight")
    add_cli(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except DraftlightError as exc:
        print(f"draftlight: {exc}", file=sys.stderr)
        return 2
