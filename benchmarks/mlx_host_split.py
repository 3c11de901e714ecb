"""Where a plain MLX reply's host time goes: our engine, our context alone, bare MLX, mlx-lm.

Four arms write the same greedy tokens after the same prompt on one random-weight folder, each
timed over its decode only, interleaved in a rotating order after a warm-up; the medians are
given as ratios to mlx-lm's generate_step:

- engine: `Engine.stream` at depth 0 (the round, the events, detokenizing, the stats); engine-uncompiled:
  that with the short decodes run as the model's own code (engine.runtime.mlx.compiled), not compiled;
- context: our MlxContext's pipelined decode (`pipeline_greedy`, `ban_in_rows`, then `decode`) in a
  bare loop, the argmax taken on the host as the round does on a CPU; context-dev: the device's argmax
  read instead, as the round does on a GPU;
- bare: the same pipelined step in plain MLX (the row, the ban added on the device, the guess
  launched on its own before the step it feeds, one wait a token), none of our code; bare-lean: that
  with only the device's argmax read, the row never copied to the host; bare-late: the
  row sliced only at the wait, the guess launched with its step and the ban written into the row on
  the host, as our decode and round did before (engine.runtime.mlx.ahead says why each makes the
  wait last the next step too);
- mlx-lm: its `generate_step` (engine.ruler.mlx_reference).

engine / context is what our loop above the decode costs; context / bare what our decode's own
bookkeeping costs; bare / mlx-lm what is left to the step itself. It prints what writing the
ban into a row MLX handed back costs the host (bare-late), the first touch of that memory.

    PYTHONPATH=. python benchmarks/mlx_host_split.py [--kind hybrid|qwen2] [--tokens 64] [--repeats 9]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import mlx.core as mx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "engine" / "runtime")]

from engine.chat import Message  # noqa: E402
from engine.events import RunStats  # noqa: E402
from engine.ruler.mlx_reference import _prefill, mlx_lm_run  # noqa: E402
from engine.ruler.prompts import BUILT_IN  # noqa: E402
from engine.runtime import RuntimeOptions  # noqa: E402
from engine.runtime.mlx.compiled import CompiledForward  # noqa: E402
from engine.session import Engine  # noqa: E402
from engine.speculative import GenerationConfig  # noqa: E402

Arm = Callable[[], tuple[float, list[int]]]


def folder(kind: str, where: Path) -> Path:
    """A 128-wide 4-layer random-weight folder: a hybrid Qwen 3.5 (three gated delta-net layers, one
    attention) or a qwen2, as benchmarks/mlx_ruler.py writes them; `gpu`, a bfloat16 qwen2 of Qwen2.5
    1.5B's shape (benchmarks/mlx_cuda.py), for MLX's CUDA build."""
    if kind == "gpu":
        from benchmarks.mlx_cuda import VOCAB, write_folder

        return write_folder(where / "gpu", "1.5b", seed=0, dtype="bfloat16", agree=False, vocab=VOCAB)
    if kind == "qwen2":
        from mlx_folders import write_qwen2_folder

        return write_qwen2_folder(where / "qwen2", seed=0, layers=4, hidden=128)
    from mlx_folders import CORPUS
    from mlx_targets import write_target

    corpus = CORPUS + tuple(BUILT_IN.values())
    return write_target(where / "qwen35", 0, "noisy", 4, width=128, interval=4, tokenizer=corpus, vocab=1024)


FIRST_TOUCH: list[float] = []  # seconds: bare-late's ban written into each row MLX handed back


def arms(engine: Engine, ids: list[int], n: int) -> dict[str, Arm]:
    module, n_vocab, banned = engine.target.module, engine.target.n_vocab, engine.target.eog_tokens()
    ban = mx.zeros((n_vocab,), dtype=mx.float32)
    if banned:
        ban[mx.array(list(banned))] = -mx.inf

    def ours() -> tuple[float, list[int]]:
        engine.forget()
        stats = None
        for event in engine.stream(ids, GenerationConfig(max_tokens=n, depth=0, ignore_eog=True)):
            stats = event
        assert isinstance(stats, RunStats)
        return stats.decode_s, list(stats.token_ids)

    def uncompiled(arm: Arm) -> Arm:
        """`arm` with the context's short decodes run as the model's own code (engine.runtime.mlx.compiled)."""

        def run() -> tuple[float, list[int]]:
            taps = engine.ctx.observers  # type: ignore[attr-defined]
            kept, taps.compiled = taps.compiled, CompiledForward(module, enabled=False)
            try:
                return arm()
            finally:
                taps.compiled = kept

        return run

    def context(device: bool = False) -> tuple[float, list[int]]:
        engine.forget()
        ctx = engine.ctx
        with ctx.observers_paused():
            row, _ = ctx.prefill(ids)
            row[list(banned)] = -np.inf
            chosen = [int(row.argmax())]
            t0 = time.perf_counter()
            for i in range(n - 1):
                if i < n - 2:
                    ctx.pipeline_greedy(banned)
                ctx.ban_in_rows(banned)
                rows = ctx.decode([chosen[-1]], all_logits=True)
                on_device = device and ctx.argmax is not None  # the device's argmax, as the round reads it
                chosen.append(ctx.argmax[0] if on_device else int(rows[0].argmax()))
            seconds = time.perf_counter() - t0
        engine.forget()
        return seconds, chosen

    def bare(late: bool = False, lean: bool = False) -> tuple[float, list[int]]:
        cache, row = _prefill(module, ids)
        first = np.array(row.astype(mx.float32))  # a bfloat16 model's row: numpy has no bfloat16
        first[list(banned)] = -np.inf
        chosen = [int(first.argmax())]
        t0 = time.perf_counter()
        logits = module(mx.array([chosen]), cache=cache)
        waited = logits[0, -1:] + ban
        for _ in range(n - 1):
            guess = mx.argmax(logits[0, -1] + ban, axis=-1)
            if not late:  # a launch of its own: a launch's arrays are signalled when all of it is done
                mx.async_eval(waited, guess)
            step = module(guess.reshape(1, 1), cache=cache)
            following = step[0, -1:] + ban
            if late:  # the row sliced at the wait, the guess launched with its step: the wait lasts that step too
                mx.async_eval(guess, step)
                waited = logits[0, -1:].astype(mx.float32)
            else:
                mx.async_eval(step, following)
            if lean:  # the device's argmax alone read: the row never reaches the host
                chosen.append(int(guess.item()))
                logits, waited = step, following
                continue
            mx.eval(waited, guess)
            rows = np.asarray(waited)
            if late:
                t1 = time.perf_counter()
                rows[:, list(banned)] = -np.inf  # the first touch of the row's memory on the host
                FIRST_TOUCH.append(time.perf_counter() - t1)
            chosen.append(int(rows[0].argmax()))
            logits, waited = step, following
        return time.perf_counter() - t0, chosen

    def mlx_lm() -> tuple[float, list[int]]:
        run = mlx_lm_run(module, None, ids, n, 0, n_vocab, banned)
        return run.decode_s, list(run.token_ids)

    return {
        "engine": ours,
        "engine-uncompiled": uncompiled(ours),
        "context": context,
        "context-dev": lambda: context(device=True),
        "bare": bare,
        "bare-late": lambda: bare(late=True),
        "bare-lean": lambda: bare(lean=True),
        "mlx-lm": mlx_lm,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=("hybrid", "qwen2", "gpu"), default="hybrid")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as where:  # a GPU-shaped folder is gigabytes: none left behind
        return measure(args, Path(where))


def measure(args: argparse.Namespace, where: Path) -> int:
    target = folder(args.kind, where)
    drafter = "mtp" if args.kind == "hybrid" else None
    engine = Engine.load(target, drafter, RuntimeOptions(n_ctx=4096), runtime="mlx")
    ids = engine.tokenize_prompt(engine.render([Message("user", BUILT_IN["qa"])]))
    runs = arms(engine, ids, args.tokens)
    names = list(runs)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    written: dict[str, list[int]] = {}
    for name in names:  # warm-up
        runs[name]()
    for repeat in range(args.repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            s, tokens = runs[name]()
            seconds[name].append(s)
            written[name] = tokens
    reference = statistics.median(seconds["mlx-lm"])
    print(f"{args.kind}, {args.tokens} tokens, medians of {args.repeats} interleaved runs:")
    for name in names:
        median = statistics.median(seconds[name])
        same = "same ids" if written[name] == written["mlx-lm"] else "OTHER IDS"
        print(f"  {name:9} {(args.tokens - 1) / median:7.1f} tok/s  {reference / median:.3f} of mlx-lm  ({same})")
    fresh = np.zeros((1, engine.target.n_vocab), dtype=np.float32)  # pages not yet touched
    t0 = time.perf_counter()
    fresh[:, 0] = -np.inf
    t1 = time.perf_counter()
    fresh[:, 1] = -np.inf  # the same row again: touched
    t2 = time.perf_counter()
    print(
        f"the ban written into a row MLX handed back: {statistics.median(FIRST_TOUCH) * 1e6:.1f} us a token "
        f"(median); into a fresh numpy row {(t1 - t0) * 1e6:.1f} us, the same row again {(t2 - t1) * 1e6:.1f} us"
    )
    return 0 if all(written[name] == written["mlx-lm"] for name in names) else 1


if __name__ == "__main__":
    sys.exit(main())
