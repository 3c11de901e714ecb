"""The device's softmax normaliser (DeviceGreedy's Normaliser) and the guess's row held during the
verify, each on and off; or the draft model's rows kept on the device (RowKeeper) or taken in; or
each kept row's slot found by the graph or named by the host: interleaved in one process on the
same loaded models.

  PYTHONPATH=.:.gpu-kit/py python3 benchmarks/gpu/normaliser_ab.py PAIR [REPEATS [kept|slots]]   (run.sh's "ab")

Four arms (normalisers on or off in both contexts, the guess's row held or collected when the next
round begins; with `kept`, two: the drafter's rows kept or taken in, normalisers on, the row held;
with `slots`, two: the rows kept, each one's slot read off the decode's positions in the graph, or
named by the host before each decode as for a model whose positions are not plain),
the draft model stepped as on CUDA by default, every draft accepted, the app's probabilities on;
each depth's arms in turn, REPEATS times (5 by default), medians.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import replace

import llama_cpp.llama_cpp  # before the engine, as a program that binds llama.cpp first does

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from measure import DRAFTER_STEPS, WHOLE_ROUNDS, _pair, close_all


def main() -> int:
    import engine.runtime.llama.devicegreedy as devicegreedy
    from engine import Engine, GenerationConfig, RuntimeOptions
    from engine.chat import Message
    from engine.drafting import ModelDrafter
    from engine.ruler.prompts import built_in
    from engine.runtime import Model

    pair = sys.argv[1]
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    kept, slots = sys.argv[3:] == ["kept"], sys.argv[3:] == ["slots"]
    target_path, drafter_path = _pair(pair)
    options = RuntimeOptions(n_ctx=4096)
    target, drafter_model = Model(target_path, options), Model(drafter_path, options)
    make = devicegreedy.Normaliser.make
    arms = {}
    if kept:  # (rows kept, held): the engine's defaults but the one switch
        eng = Engine(target, None, options)
        for keep in ("on", "off"):
            steps = replace(options, **DRAFTER_STEPS["guess"], keep_draft_rows=keep == "on")
            arms[keep, "on"] = (eng, ModelDrafter(drafter_model, steps))
    if slots:  # (where the slot is found, held)
        eng = Engine(target, None, options)
        steps = replace(options, **DRAFTER_STEPS["guess"])
        arms["graph", "on"] = (eng, ModelDrafter(drafter_model, steps))
        rope = llama_cpp.llama_cpp.llama_model_rope_type
        llama_cpp.llama_cpp.llama_model_rope_type = lambda _m: llama_cpp.llama_cpp.LLAMA_ROPE_TYPE_MROPE
        arms["host", "on"] = (eng, ModelDrafter(drafter_model, steps))
        llama_cpp.llama_cpp.llama_model_rope_type = rope
    for sums in () if kept or slots else ("on", "off"):
        # the contexts made here attach the normaliser, or not
        devicegreedy.Normaliser.make = make if sums == "on" else classmethod(lambda cls: None)
        eng = Engine(target, None, options)
        for held in ("on", "off"):
            drafter = ModelDrafter(drafter_model, replace(options, **DRAFTER_STEPS["guess"]))
            if held == "off":
                drafter._holds_in_time = lambda ends, took: False
            arms[sums, held] = (eng, drafter)
    devicegreedy.Normaliser.make = make
    eng = next(iter(arms.values()))[0]
    ids = eng.prompt_ids([Message("user", built_in(["code"])[0].text)])

    def once(arm, depth: int, n: int):
        eng, drafter = arms[arm]
        eng.swap_drafter(drafter if depth else None)
        eng.forget()
        *_, stats = eng.stream(ids, GenerationConfig(max_tokens=n, depth=depth, ignore_eog=True, probabilities=True))
        return stats

    print(f"[{pair}] median of {repeats}, the arms in turn; {WHOLE_ROUNDS} tokens, every draft accepted")
    switch = "rows kept" if kept else "slot found by" if slots else "normalisers"
    print(f"| pair | depth | {switch} | guess's row held | ms/round | Python ms | Python share | tok/s |")
    print("|---|---:|---|---|---:|---:|---:|---:|")
    for depth in (0, 1, 2, 3, 4):
        if not depth and (kept or slots):
            continue  # no drafter at depth 0
        turn = list(arms) if depth else [("on", "on"), ("off", "on")]  # no guess at depth 0
        for arm in turn:
            once(arm, depth, 8)  # warm-up
        runs = {arm: [] for arm in turn}
        for _ in range(repeats):
            for arm in turn:
                runs[arm].append(once(arm, depth, WHOLE_ROUNDS))
        for (sums, held), done in runs.items():
            round_s = statistics.median(s.decode_s / s.rounds for s in done)
            python_s = statistics.median(s.overhead_s / s.rounds for s in done)
            tps = statistics.median(s.decode_tps for s in done)
            print(f"| {pair} | {depth} | {sums} | {held if depth else '-'} | {round_s * 1e3:.2f} | "
                  f"{python_s * 1e3:.2f} | {python_s / round_s:.1%} | {tps:.1f} |", flush=True)  # fmt: skip
    close_all([d for _, d in arms.values()], [e for e, _ in arms.values()], [drafter_model, target])
    return 0


if __name__ == "__main__":
    sys.exit(main())
