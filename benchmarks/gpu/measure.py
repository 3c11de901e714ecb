"""GPU measurements of our engine against CUDA llama.cpp, driven by benchmarks/gpu/run.sh.

  measure.py floor ROWS.jsonl PAIR          c_floor(k) = rows(k+1) + k x drafter step, from llama-bench
  measure.py ours PAIR [--depths 0,1,2,3,4] [--argmax host,device]
                                            our engine alone: c, the floor's ratio, Python's share, per depth
  measure.py ruler PAIR OUT                  ours against llama-server, interleaved (the ruler's machinery)
  measure.py exact MODEL                     a random-weight model drafting for itself: what stays exact
  measure.py tuner PAIR                      the tuner's predicted speedup per depth against the measured

PAIR is "small" (the default pair's shapes) or "7b" (a Qwen2.5-7B-class target with the 0.5B drafter),
both zero-weight copies in $MODELS whose greedy choice is token 0 everywhere: every draft is accepted in
both engines (patch_models.py). The engine is the repository's (PYTHONPATH), the llama.cpp library the
CUDA build in $LLAMA_CPP_LIB_PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import llama_cpp.llama_cpp  # before the engine, as a program that binds llama.cpp first does
import llama_cpp.llama_cpp_ext

MODELS = Path(os.environ.get("MODELS", "/tmp/models"))
BIN = Path(os.environ.get("LLAMA_BIN", "/tmp/llb/bin"))
PAIRS = {"small": ("target.gguf", "drafter.gguf"), "7b": ("target7b.gguf", "drafter.gguf")}
FLOOR_FILE = "/tmp/gpu-floor-{}.json"
# A reply whose rounds are all whole when every draft is kept: the prefill's token, then 120,
# which rounds of 2, 3, 4, 5 and 6 tokens divide. At 128 a depth-4 reply ends with a round of two
# tokens: 26 rounds for 127 tokens, 4.88 a round where the round yields 5 (the reply's length,
# not the round's cost).
WHOLE_ROUNDS = 121
WHOLE = "the prefill's token and 120 decoded: whole rounds at depths 1-5"
# How a draft model steps (RuntimeOptions): its last draft taken in while the target verifies and
# its guess of the verify's outcome decoded beside it (the default on CUDA); the last draft alone;
# every step the last two tokens; or one row a step and a two-row catch-up after a round whose
# drafts were all kept.
DRAFTER_STEPS = {
    "guess": {"overlap_drafter": True, "guess_outcome": True},
    "overlap": {"overlap_drafter": True, "guess_outcome": False},
    "2": {"overlap_drafter": False, "steady_draft_shape": True},
    "1": {"overlap_drafter": False, "steady_draft_shape": False},
}


def _pair(name: str) -> tuple[Path, Path]:
    target, drafter = PAIRS[name]
    return MODELS / target, MODELS / drafter


def close_all(drafters, engines, models) -> None:
    """A measurement's drafters, its engines' target contexts, then the models under them (each once)."""
    for drafter in {id(d): d for d in drafters}.values():
        drafter.close()
    for eng in {id(e): e for e in engines}.values():
        eng.ctx.close()
    for model in models:
        model.close()


def cmd_floor(args) -> int:
    """Row costs in target passes and the drafter's step, from llama-bench's jsonl (q8_0 cache, depth 256)."""
    target, drafter = (str(p) for p in _pair(args.pair))
    runs = [json.loads(line) for line in Path(args.rows).read_text().splitlines() if line.startswith("{")]

    def seconds(model: str, n_prompt: int, n_gen: int) -> float:
        for r in runs:
            if r["model_filename"] == model and r["n_prompt"] == n_prompt and r["n_gen"] == n_gen:
                return (n_prompt or 1) / r["avg_ts"]  # a batch of n_prompt rows; or one generated token
        raise SystemExit(f"no llama-bench run of {model} with -p {n_prompt} -n {n_gen}")

    one = seconds(target, 0, 64)
    rows = [one] + [seconds(target, k, 0) for k in range(2, 7)]
    step = seconds(drafter, 0, 64) / one
    floor = {k: rows[k] / one + k * step for k in range(0, 5)}
    Path(FLOOR_FILE.format(args.pair)).write_text(json.dumps({"pass_s": one, "rows": [r / one for r in rows],
                                                              "step": step, "floor": floor}))  # fmt: skip
    print(f"[{args.pair}] target pass {one * 1e3:.2f} ms; rows 1-6 in passes: "
          + " ".join(f"{r / one:.2f}" for r in rows) + f"; drafter step {step:.2f} of a pass")  # fmt: skip
    print(f"[{args.pair}] c_floor(k) = rows(k+1) + k x step: " + "  ".join(f"d{k} {c:.2f}" for k, c in floor.items()))
    return 0


def cmd_ours(args) -> int:
    """Our engine alone, every draft accepted: a round's cost c, against the floor, and Python's share."""
    from engine import Engine, GenerationConfig, RuntimeOptions
    from engine.chat import Message
    from engine.drafting import ModelDrafter
    from engine.ruler.prompts import built_in
    from engine.runtime import Model
    from engine.runtime.llama.context import Context as LlamaContext

    target, drafter_path = _pair(args.pair)
    floor = (
        json.loads(Path(FLOOR_FILE.format(args.pair)).read_text())
        if Path(FLOOR_FILE.format(args.pair)).exists()
        else None
    )
    options = RuntimeOptions(n_ctx=4096, exact=not args.fast)
    target_model, drafter_model = Model(target, options), Model(drafter_path, options)
    # One engine per place the greedy argmax is taken (the device's backend sampler, or numpy
    # on the host), on the same loaded models: "--argmax host,device" is an A/B in one process.
    # And one draft model per way of stepping it (--drafters), each on its own context.
    arms = {}
    for where in args.argmax.split(","):  # device, host; or target (its verify rows) or drafter alone
        opts = replace(options, argmax_on_device=where in ("device", "target"))
        arms[where] = (Engine(target_model, None, opts), {})
        opts = replace(options, argmax_on_device=where in ("device", "drafter"))
        for steps in args.drafters.split(","):
            arms[where][1][steps] = ModelDrafter(drafter_model, replace(opts, **DRAFTER_STEPS[steps]))
    eng = next(iter(arms.values()))[0]
    ids = eng.prompt_ids([Message("user", built_in(["code"])[0].text)])

    # "on": the app's probabilities, computed while the next decode runs (the default on a GPU);
    # "eager": computed in the round, as on a CPU; "off": none (the ruler, --json-less runs)
    settings = {"on": (True, True), "eager": (True, False), "off": (False, True)}
    modes = {m: settings[m] for m in args.modes.split(",")}

    def once(where: str, depth: int, mode: str, n: int, steps: str):
        eng, drafters = arms[where]
        probabilities, overlap = modes[mode]
        eng.swap_drafter(drafters[steps] if depth else None)
        eng.forget()
        saved = eng.ctx.acceleration
        eng.ctx.acceleration = replace(saved, overlap_probabilities=overlap)
        config = GenerationConfig(max_tokens=n, depth=depth, ignore_eog=True, probabilities=probabilities)
        launched[:] = [0.0, 0.0]
        *_, stats = eng.stream(ids, config)
        eng.ctx.acceleration = saved
        return stats, launched[0] / stats.rounds, launched[1] / stats.rounds

    first = next(iter(next(iter(arms.values()))[1]))  # the drafter stepped as --drafters names first
    # The time inside llama_decode calls (the launch: graph building and, on a CPU, the compute)
    # apart from the wait for the device's results, which the engine counts with it; and of
    # that, the draft model's decode of its last draft during the verify (Context.feed).
    launched = [0.0, 0.0]
    decode, feed = llama_cpp.llama_cpp.llama_decode, LlamaContext.feed

    def timed_decode(ctx, batch):
        t0 = time.perf_counter()
        try:
            return decode(ctx, batch)
        finally:
            if batch.n_tokens <= 8:  # a round's batch, not the prompt's
                launched[0] += time.perf_counter() - t0

    def timed_feed(ctx, tokens, side=None):
        t0 = time.perf_counter()
        try:
            return feed(ctx, tokens, side)
        finally:
            launched[1] += time.perf_counter() - t0

    llama_cpp.llama_cpp.llama_decode, LlamaContext.feed = timed_decode, timed_feed

    def taken() -> str:
        def place(ctx) -> str:
            return "device" if ctx.device_argmax else "host"

        return ", ".join(
            f"{where}: target {place(e.ctx)}, drafter {place(next(iter(d.values())).ctx)}"
            for where, (e, d) in arms.items()
        )

    print(f"[{args.pair}] {options.mode} mode, {args.tokens} tokens, median of {args.repeats}; every draft accepted;"
          f" argmax taken ({taken()}); by default the drafter overlaps the verify: {options.acceleration().overlap_drafter}")  # fmt: skip
    print(
        "| pair | depth | drafter steps | probabilities | argmax | tok/s | ms/round | c | c_floor | c / c_floor "
        "| Python ms/round | Python share | speedup over plain | of the ideal (k+1)/c_floor | launch ms/round | of it, the drafter's feed |"
    )
    print("|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    plain: dict[tuple[str, str], tuple[float, float]] = {}  # per mode and argmax: a plain round's s, tok/s
    try:
        for depth in [int(d) for d in args.depths.split(",")]:
            for mode in modes:
                # every argmax place with every drafter, in turn (depth 0: no drafter, one arm each)
                turn = [(where, steps) for where in arms for steps in arms[where][1] if depth or steps == first]
                runs: dict[tuple[str, str], list] = {arm: [] for arm in turn}
                for where, steps in turn:
                    once(where, depth, mode, 8, steps)  # warm-up
                for _ in range(args.repeats):
                    for where, steps in turn:
                        runs[where, steps].append(once(where, depth, mode, args.tokens, steps))
                for (where, steps), results in runs.items():
                    done = [stats for stats, _, _ in results]
                    launch_s = statistics.median(t for _, t, _ in results)
                    feed_s = statistics.median(t for _, _, t in results)
                    round_s = statistics.median(s.decode_s / s.rounds for s in done)
                    python_s = statistics.median(s.overhead_s / s.rounds for s in done)
                    tps = statistics.median(s.decode_tps for s in done)
                    if depth == 0:
                        plain[mode, where] = (round_s, tps)
                    base = plain.get((next(iter(modes)), where))
                    c = round_s / base[0] if base else float("nan")
                    cf = floor["floor"][str(depth)] if floor else float("nan")
                    speedup = tps / plain[mode, where][1] if (mode, where) in plain else float("nan")
                    print(
                        f"| {args.pair} | {depth} | {steps if depth else '-'} | {mode} | {where} | {tps:.1f} "
                        f"| {round_s * 1e3:.2f} | {c:.2f} | {cf:.2f} | {c / cf:.2f} | {python_s * 1e3:.2f} "
                        f"| {python_s / round_s:.0%} | {speedup:.2f} | {speedup / ((depth + 1) / cf):.2f} "
                        f"| {launch_s * 1e3:.2f} | {feed_s * 1e3:.2f} |",
                        flush=True,
                    )
    finally:
        llama_cpp.llama_cpp.llama_decode, LlamaContext.feed = decode, feed
    print(f"[{args.pair}] argmax after every run ({taken()})")
    close_all(
        [d for _, ds in arms.values() for d in ds.values()],
        [e for e, _ in arms.values()],
        [drafter_model, target_model],
    )
    return 0


def cmd_exact(args) -> int:
    """A random-weight model drafting for itself: where rows are batch-invariant, every draft is accepted."""
    from engine import Engine, GenerationConfig, RuntimeOptions

    contexts = {"short": list(range(1, 33)), "long": [1 + (i * 37) % 127 for i in range(1500)]}
    print(
        "| cache | context | rows equal (probe) | max logit diff | " + " | ".join(f"d{d}" for d in range(1, 7)) + " |"
    )
    print("|---|---|---|---:|" + "---|" * 6)
    for exact in (True, False):
        options = RuntimeOptions(n_ctx=4096, n_batch=512, exact=exact, steady_draft_shape=False)
        eng = Engine.load(args.model, args.model, options)
        for name, prompt in contexts.items():
            probe = eng.probe_batch_invariance(prompt)
            plain = list(eng.stream(prompt, GenerationConfig(max_tokens=48, depth=0, ignore_eog=True)))[-1]
            cells = []
            for depth in range(1, 7):
                s = list(eng.stream(prompt, GenerationConfig(max_tokens=48, depth=depth, ignore_eog=True)))[-1]
                same = "same text" if s.token_ids == plain.token_ids else "TEXT DIFFERS"
                cells.append(f"{s.accepted}/{s.drafted} accepted, {same}")
            print(f"| {options.kv_type} | {name} ({len(prompt)} tokens) | {probe.argmax_equal}/{probe.rows_compared} | "
                  f"{probe.max_logit_diff:.2e} | " + " | ".join(cells) + " |", flush=True)  # fmt: skip
        eng.close()
    return 0


def cmd_tuner(args) -> int:
    """The tuner's predicted speedup per depth (its box profile at the measured 100% acceptance) against the
    measured: the median ratio of replies at that depth and plain ones, in turn."""
    from engine import Engine, GenerationConfig, RuntimeOptions
    from engine.chat import Message
    from engine.drafting import ModelDrafter
    from engine.measure.costmodel import best_depth
    from engine.measure.profile import measure
    from engine.ruler.prompts import built_in
    from engine.runtime import Model

    target, drafter_path = _pair(args.pair)
    options = RuntimeOptions(n_ctx=4096)
    eng = Engine(Model(target, options), None, options)
    drafter = ModelDrafter(Model(drafter_path, options), options)
    t0 = time.perf_counter()
    profile = measure(eng.target, drafter.model, options)  # what `draftlight tune` measures
    print(f"[{args.pair}] tuned in {time.perf_counter() - t0:.1f} s; calibration acceptance "
          + " ".join(f"{a:.0%}" for a in profile.acceptance_prior))  # fmt: skip
    print("```\n" + profile.table() + "\n```")
    _, rates = best_depth(profile, profile.acceptance_prior)
    ids = eng.prompt_ids([Message("user", built_in(["code"])[0].text)])

    def tps(depth: int, n: int) -> float:
        eng.swap_drafter(drafter if depth else None)
        eng.forget()
        *_, stats = eng.stream(ids, GenerationConfig(max_tokens=n, depth=depth, ignore_eog=True))
        return stats.decode_tps

    print("| pair | depth | predicted speedup | measured speedup | predicted / measured |")
    print("|---|---:|---:|---:|---:|")
    for depth in [int(d) for d in args.depths.split(",")]:
        tps(0, 8), tps(depth, 8)  # warm-up
        # plain and this depth in turn, each pair of replies a ratio: the box's drift cancels
        ratios = [tps(depth, args.tokens) / tps(0, args.tokens) for _ in range(args.repeats)]
        predicted, measured = rates[depth] / rates[0], statistics.median(ratios)
        print(f"| {args.pair} | {depth} | {predicted:.2f} | {measured:.2f} | {predicted / measured:.2f} |", flush=True)
    drafter.close()
    drafter.model.close()
    eng.close()
    return 0


def cmd_ruler(args) -> int:
    from engine.ruler import report
    from engine.ruler.oracle import OracleBuild
    from engine.ruler.prompts import built_in
    from engine.ruler.runner import Arm, BenchConfig, run_bench

    target, drafter = _pair(args.pair)
    depths = [int(d) for d in args.depths.split(",")]
    arms = [Arm("ours", "model" if d else "none", d) for d in depths]
    arms += [Arm("llama.cpp", "model" if d else "none", d) for d in depths]
    config = BenchConfig(
        target=target, drafter=drafter, prompts=built_in(["code"]), arms=arms, n_tokens=args.tokens,
        repeats=args.repeats, n_ctx=4096, cool_timeout_s=1.0, cool_pause_s=0.0,
    )  # fmt: skip
    build = OracleBuild("llama.cpp vendored in llama-cpp-python 0.3.36 (ggml-org/llama.cpp@0c1e57098), CUDA sm_90", BIN)
    t0 = time.perf_counter()
    result = run_bench(config, build, lambda line: print(line, file=sys.stderr, flush=True))
    print(f"ruler took {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    _, overall = report.summarize(result)
    print(f"[{args.pair}] ours against llama-server (q8_0 cache, every draft accepted), decode tok/s:")
    print("| arm | ours | llama-server | ours / llama-server | c ours | c llama-server |")
    print("|---|---:|---:|---:|---:|---:|")
    index = {c.arm: c for c in overall}
    for c in overall:
        if c.arm.startswith("ours"):
            theirs = index[c.arm.replace("ours", "llama.cpp", 1)]
            print(f"| {c.arm.removeprefix('ours ')} | {c.decode_tps:.1f} | {theirs.decode_tps:.1f} | "
                  f"{c.decode_tps / theirs.decode_tps:.2f} | {c.round_cost or 1:.2f} | {theirs.round_cost or 1:.2f} |")  # fmt: skip
    sys.stdout.flush()
    report.write(result, Path(args.out))  # after the table: its plots need matplotlib, which a GPU box may lack
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("floor")
    a.add_argument("rows")
    a.add_argument("pair", choices=PAIRS)
    a.set_defaults(func=cmd_floor)
    a = sub.add_parser("ours")
    a.add_argument("pair", choices=PAIRS)
    a.add_argument("--depths", default="0,1,2,3,4")
    a.add_argument("--tokens", type=int, default=WHOLE_ROUNDS, help=f"the reply's length ({WHOLE_ROUNDS}: {WHOLE})")
    a.add_argument("--repeats", type=int, default=3)
    a.add_argument("--fast", action="store_true")
    a.add_argument(
        "--drafters",
        default="guess",
        help="the draft model's steps, ',' between, in turn: guess (the default on CUDA: overlap, and the "
        "verify's outcome guessed beside it), overlap (one row; the last draft taken in during the verify), "
        "2 (two rows a step), 1 (one row, and a catch-up batch)",
    )
    a.add_argument("--argmax", default="device", help="where greedy argmaxes are taken: device, host, or both in turn")
    a.add_argument(
        "--modes",
        default="on,eager,off",
        help="the probabilities' settings, ',' between: on, eager (in the round), off",
    )
    a.set_defaults(func=cmd_ours)
    a = sub.add_parser("tuner")
    a.add_argument("pair", choices=PAIRS)
    a.add_argument("--depths", default="1,2,3,4")
    a.add_argument("--tokens", type=int, default=WHOLE_ROUNDS, help=f"the reply's length ({WHOLE_ROUNDS}: {WHOLE})")
    a.add_argument("--repeats", type=int, default=5, help="pairs of replies, plain and the depth in turn, per depth")
    a.set_defaults(func=cmd_tuner)
    a = sub.add_parser("exact")
    a.add_argument("model")
    a.set_defaults(func=cmd_exact)
    a = sub.add_parser("ruler")
    a.add_argument("pair", choices=PAIRS)
    a.add_argument("out")
    a.add_argument("--depths", default="0,1,2,3,4")
    a.add_argument("--tokens", type=int, default=128)
    a.add_argument("--repeats", type=int, default=3)
    a.set_defaults(func=cmd_ruler)
    args = p.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
