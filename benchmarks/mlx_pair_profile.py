"""Where a speculative MLX round's time goes: our engine against mlx-lm's speculative_generate_step.

On the `--agree` pair of benchmarks/mlx_cuda.py (random bfloat16 folders of Qwen2.5 1.5B's and 0.5B's
shapes, both final norms zero: every draft accepted at each model's real cost; `--small`: tiny shapes,
a check of the script on any box; `--target` and `--drafter`: two MLX folders of your own, e.g. SmolLM2's
conversions), both loops write the same greedy ids after the same prompt (`--prompt`, a built-in's name):

1. timing: the loops alternated (ours, mlx-lm's, ours with its short decodes uncompiled where they
   are compiled, and ours with each projection its own matmul where they are joined), `--repeats` rounds at each depth, each run after a warm-up, decode only; each of ours'
   ratio to the mlx-lm run beside it and their median (the runs are seconds apart, so a card's drift
   between minutes falls on all);
2. host: our rounds' own split (draft, verify, commit, rewind, our Python) per round, from RunStats;
3. `--profile`: each loop once under cProfile, its top functions by own time (MLX's calls are
   counted in the Python function that makes them).

    PYTHONPATH=. python benchmarks/mlx_pair_profile.py [--small] [--depths 0,2,4] [--tokens 128]
        [--repeats 7] [--profile] [--target DIR --drafter DIR] [--prompt code]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "engine" / "runtime")]

from benchmarks.mlx_cuda import VOCAB, write_folder  # noqa: E402
from engine.chat import Message  # noqa: E402
from engine.events import RunStats  # noqa: E402
from engine.ruler.mlx_reference import mlx_lm_run  # noqa: E402
from engine.ruler.prompts import built_in  # noqa: E402
from engine.runtime import RuntimeOptions  # noqa: E402
from engine.session import Engine  # noqa: E402
from engine.speculative import GenerationConfig  # noqa: E402

Run = Callable[[int, int], tuple[float, list[int], RunStats | None]]  # (tokens, depth) -> tok/s, ids, stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="tiny shapes: a check of the script")
    parser.add_argument("--depths", default="0,2,4")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--profile", action="store_true", help="each loop once under cProfile, per depth")
    parser.add_argument("--top", type=int, default=18)
    parser.add_argument("--target", type=Path, help="an MLX folder instead of the random pair (with --drafter)")
    parser.add_argument("--drafter", type=Path, help="the drafter's MLX folder (with --target)")
    parser.add_argument("--prompt", default="code", help="a built-in prompt's name (engine.ruler.prompts)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as where:  # the two folders are gigabytes at the real shapes
        return measure(args, Path(where))


def compiled(ctx: object) -> int:
    """How many of a context's decodes ran compiled (engine.runtime.mlx.compiled)."""
    return int(ctx.observers.compiled.calls)  # type: ignore[attr-defined]


def measure(args: argparse.Namespace, root: Path) -> int:
    import mlx.core as mx

    print(f"mlx {mx.__version__}, default device {mx.default_device()}", flush=True)
    if (args.target is None) != (args.drafter is None):
        raise SystemExit("--target and --drafter go together")
    if args.target is not None:
        target, drafter = args.target, args.drafter
    else:
        big, little, vocab = ("small", "small", 4096) if args.small else ("1.5b", "0.5b", VOCAB)
        target = write_folder(root / "target", big, 0, "bfloat16", True, vocab)
        drafter = write_folder(root / "drafter", little, 1, "bfloat16", True, vocab)
    engine = Engine.load(target, drafter, RuntimeOptions(n_ctx=4096), runtime="mlx")
    draft = engine.drafter
    prompt = built_in([args.prompt])[0]
    ids = engine.tokenize_prompt(engine.render([Message("user", prompt.text)]))
    module = engine.target.module  # type: ignore[attr-defined]
    draft_module = draft.model.module  # type: ignore[union-attr]
    banned = engine.target.eog_tokens()

    def ours(n: int, depth: int) -> tuple[float, list[int], RunStats | None]:
        engine.swap_drafter(draft if depth else None)
        engine.forget()
        stats = None
        for event in engine.stream(ids, GenerationConfig(max_tokens=n, depth=depth, ignore_eog=True)):
            stats = event
        assert isinstance(stats, RunStats)
        return (stats.generated_tokens - 1) / stats.decode_s, list(stats.token_ids), stats

    def theirs(n: int, depth: int) -> tuple[float, list[int], RunStats | None]:
        run = mlx_lm_run(module, draft_module, ids, n, depth, engine.target.n_vocab, banned)
        return (len(run.token_ids) - 1) / run.decode_s, run.token_ids, None

    taps = [engine.ctx.observers, draft.ctx.observers]  # type: ignore[attr-defined, union-attr]

    def uncompiled(n: int, depth: int) -> tuple[float, list[int], RunStats | None]:
        """Ours with both contexts' short decodes run as the model's own code (engine.runtime.mlx.compiled)."""
        was = [t.compiled.enabled for t in taps]
        for t in taps:
            t.compiled.enabled = False
        try:
            rate, tokens, _ = ours(n, depth)
        finally:
            for t, on in zip(taps, was, strict=True):
                t.compiled.enabled = on
        return rate, tokens, None

    def unjoined(n: int, depth: int) -> tuple[float, list[int], RunStats | None]:
        """Ours with each projection run as its own matmul (engine.runtime.mlx.joined)."""
        for t in taps:
            t.joined = False
        try:
            rate, tokens, _ = ours(n, depth)
        finally:
            for t in taps:
                t.joined = True
        return rate, tokens, None

    arms: dict[str, Run] = {"ours": ours, "mlx-lm": theirs}
    if all(t.compiled.enabled for t in taps):
        arms["ours-uncompiled"] = uncompiled
    if engine.target.joined_groups:  # type: ignore[attr-defined]
        arms["ours-unjoined"] = unjoined
    for depth in [int(d) for d in args.depths.split(",")]:
        rates: dict[str, list[float]] = {name: [] for name in arms}
        ratios: dict[str, list[float]] = {name: [] for name in arms if name != "mlx-lm"}
        splits, same = [], True
        for repeat in range(args.repeats):
            order = list(arms)[repeat % len(arms) :] + list(arms)[: repeat % len(arms)]
            got: dict[str, list[int]] = {}
            for name in order:
                arms[name](8, depth)  # warm-up
                rate, tokens, stats = arms[name](args.tokens, depth)
                rates[name].append(rate)
                got[name] = tokens
                if stats is not None:
                    splits.append(stats)
            same = same and all(tokens == got["mlx-lm"] for tokens in got.values())
            for name, pairs in ratios.items():
                pairs.append(rates[name][-1] / rates["mlx-lm"][-1])
        for name, pairs in ratios.items():
            print(
                f"d{depth}: {name} {statistics.median(rates[name]):.1f} tok/s, mlx-lm "
                f"{statistics.median(rates['mlx-lm']):.1f}; pair ratios "
                + " ".join(f"{r:.3f}" for r in pairs)
                + f"; median {statistics.median(pairs):.3f}; same ids: {same}",
                flush=True,
            )
        parts = ("draft_s", "verify_s", "commit_s", "rewind_s", "overhead_s")
        per_round = {p: statistics.median(1e3 * getattr(s, p) / max(1, s.rounds) for s in splits) for p in parts}
        print(
            "  ours per round (ms, medians): "
            + ", ".join(f"{p[:-2]} {v:.3f}" for p, v in per_round.items())
            + f"; rounds {splits[-1].rounds}, syncs/round {splits[-1].syncs_per_round}"
            + f"; compiled decodes so far: target {compiled(engine.ctx)}, drafter {compiled(draft.ctx)}",
            flush=True,
        )
        if args.profile:
            for name, arm in arms.items():
                arm(8, depth)
                profiler = cProfile.Profile()
                t0 = time.perf_counter()
                profiler.enable()
                arm(args.tokens, depth)
                profiler.disable()
                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(args.top)
                lines = [ln for ln in out.getvalue().splitlines() if ln.strip()][3:]
                print(f"  {name} d{depth} under cProfile, {time.perf_counter() - t0:.3f} s:")
                print("\n".join("    " + ln for ln in lines), flush=True)
    engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
