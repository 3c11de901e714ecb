"""Our MLX reply with its short decodes compiled against the same reply uncompiled (MlxOptions.compiled_decode).

One random-weight target loaded twice, once each way; each arm's reply (our round's loop, greedy) timed
from after the prompt to its last token, the arms alternated run by run after a warm-up, medians. The
targets: a 128-wide 4-layer all-attention Qwen 3.5 with its MTP head (what a drafter reading the target's
last layer costs: the verify compiled with the layer as an output), drafting at each depth asked, and
depth 0 with nothing attached (a plain reply's pipelined step); `--layers`, `--width` change the shape.

    PYTHONPATH=. python benchmarks/mlx_compiled.py [--depths 0,1,2,3] [--tokens 128] [--repeats 9]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "engine" / "runtime")]

from mlx_targets import PROMPT, load_target, write_target  # noqa: E402

from engine.depth import FixedDepth  # noqa: E402
from engine.drafting import kinds  # noqa: E402
from engine.drafting.base import Drafter  # noqa: E402
from engine.events import TokenEvent  # noqa: E402
from engine.rounds import GenerationConfig, Prefill  # noqa: E402
from engine.runtime.mlx import MlxContext, MlxOptions  # noqa: E402
from engine.speculative import generate  # noqa: E402

MODES = {"compiled": True, "uncompiled": False}


def reply(context: tuple[MlxContext, Drafter | None], depth: int, tokens: int) -> tuple[float, list[int]]:
    """One greedy reply after PROMPT on `context` (the context, its drafter): its seconds and its ids."""
    ctx, drafter = context
    ctx.rewind(0)
    row, prefilled = ctx.prefill(PROMPT)
    if drafter is not None:
        drafter.prefill(PROMPT)
    cfg = GenerationConfig(max_tokens=tokens, depth=depth)
    t0 = time.perf_counter()
    events = list(generate(ctx, drafter, FixedDepth(depth), list(PROMPT), cfg, prefill=Prefill(prefilled, 0.0, row)))
    return time.perf_counter() - t0, [e.token_id for e in events if isinstance(e, TokenEvent)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", default="0,1,2,3")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=128)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = write_target(Path(tmp) / "target", 7, "noisy", layers=args.layers, width=args.width, interval=1)
        models = {name: load_target(folder, MlxOptions(compiled_decode=on)) for name, on in MODES.items()}
        print(f"all-attention Qwen 3.5, {args.width} x {args.layers}, {args.tokens} tokens, medians of {args.repeats}")
        for depth in [int(d) for d in args.depths.split(",")]:
            contexts: dict[str, tuple[MlxContext, Drafter | None]] = {}
            for name, model in models.items():
                ctx = model.new_context(max_rows=depth + 1)
                drafter = kinds.load(kinds.MTP, ctx, None, model.options, max_depth=max(1, depth)) if depth else None
                contexts[name] = (ctx, drafter)

            seconds: dict[str, list[float]] = {name: [] for name in models}
            written: dict[str, list[int]] = {}
            for name in models:
                reply(contexts[name], depth, args.tokens)  # warm-up: its traces
            for repeat in range(args.repeats):
                for name in list(models) if repeat % 2 == 0 else list(models)[::-1]:
                    took, written[name] = reply(contexts[name], depth, args.tokens)
                    seconds[name].append(took)
            on, off = (statistics.median(seconds[name]) for name in models)
            compiled_calls = contexts["compiled"][0].observers.compiled.calls  # type: ignore[attr-defined]
            print(
                f"d{depth}: compiled {args.tokens / on:.1f} tok/s, uncompiled {args.tokens / off:.1f}: "
                f"{off / on:.3f}x; same ids: {written['compiled'] == written['uncompiled']}; "
                f"{compiled_calls} decodes compiled",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
