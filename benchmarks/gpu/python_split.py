"""Where a round's Python goes: the engine's time outside llama.cpp, split by the round's phases.

  PYTHONPATH=.:.gpu-kit/py python3 benchmarks/gpu/python_split.py PAIR [--depths 1,2,3,4]   (run.sh's "split")

The same replies as `measure.py ours` (every draft accepted, the app's probabilities on, the draft
model stepped as on CUDA by default), with each phase of a round timed from the outside: its wall
time less the time inside llama.cpp in it (both contexts' decode_s). Per round, medians of the
repeats, in microseconds:
  draft      the draft model's draft(), of which `choose` is choose_draft on the critical path (the
             row copy a step's decode would overwrite, the device's token read back)
  verify     the target's verify decode, of which `exposed` is side work the device did not hide
  walk       the accept walk and the probabilities it queues
  rewind     both caches cut back, the drafter told
  provenance the round's emitted tokens named, the draft's probabilities looked up
  events     the rest of the round: depth chosen, token events, text, stops
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import replace

import llama_cpp.llama_cpp  # noqa: F401  before the engine, as a program that binds llama.cpp first does

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from measure import DRAFTER_STEPS, WHOLE_ROUNDS, _pair, close_all

PHASES = ("draft", "choose", "verify", "exposed", "walk", "rewind", "provenance", "events")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("pair")
    p.add_argument("--depths", default="1,2,3,4")
    p.add_argument("--drafters", default="guess")
    p.add_argument("--tokens", type=int, default=WHOLE_ROUNDS)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()

    import engine.drafting.model as drafting_model
    import engine.speculative as spec
    from engine import Engine, GenerationConfig, RuntimeOptions
    from engine.chat import Message
    from engine.drafting import ModelDrafter
    from engine.events import RoundEvent
    from engine.ruler.prompts import built_in
    from engine.runtime import Model
    from engine.runtime.side import SideWork

    target_path, drafter_path = _pair(args.pair)
    options = RuntimeOptions(n_ctx=4096)
    target, drafter_model = Model(target_path, options), Model(drafter_path, options)
    eng = Engine(target, None, options)
    drafters = {s: ModelDrafter(drafter_model, replace(options, **DRAFTER_STEPS[s])) for s in args.drafters.split(",")}
    ids = eng.prompt_ids([Message("user", built_in(["code"])[0].text)])

    spent: dict[str, float] = defaultdict(float)
    active: list = [None]  # the drafter of the reply under way

    def llama_s() -> float:
        d = active[0]
        return eng.ctx.decode_s + (d.ctx.decode_s if d is not None else 0.0)

    def exposed_s() -> float:
        d = active[0]
        return eng.ctx.side_exposed_s + (d.ctx.side_exposed_s if d is not None else 0.0)

    inside = [False]  # in a round: the prefill's decode and rewind are no phase of one

    def timed(name: str, fn, when=lambda: True):
        def wrapper(*a, **k):
            if not (inside[0] and when()):
                return fn(*a, **k)
            t0, l0, e0 = time.perf_counter(), llama_s(), exposed_s()
            try:
                return fn(*a, **k)
            finally:
                spent[name] += time.perf_counter() - t0 - (llama_s() - l0)
                if name == "verify":
                    spent["exposed"] += exposed_s() - e0

        return wrapper

    in_side_work = [0]  # inside SideWork.run: work beside a decode, not on the round's path
    side_run = SideWork.run

    def counted_run(self, budget_s=None):
        in_side_work[0] += 1
        try:
            return side_run(self, budget_s)
        finally:
            in_side_work[0] -= 1

    SideWork.run = counted_run

    def on_path() -> bool:  # a choice made in the round, not in side work beside a decode
        return active[0] is not None and not in_side_work[0]

    drafting_model.choose_draft = timed("choose", drafting_model.choose_draft, when=on_path)
    spec.walk = timed("walk", spec.walk)
    spec.provenance = timed("provenance", spec.provenance)
    eng.ctx.decode = timed("verify", eng.ctx.decode)
    eng.ctx.rewind = timed("rewind", eng.ctx.rewind)
    for d in drafters.values():
        d.draft = timed("draft", d.draft)
        d.verified = timed("rewind", d.verified)
        d.rewind = timed("rewind", d.rewind)
    round_fn = spec.speculative_round
    in_rounds = [0.0]

    def speculative_round(*a, **k):
        if a[7] is not None:  # the reply's first token, from the prompt's own row: no round's work
            return round_fn(*a, **k)
        t0 = time.perf_counter()
        inside[0] = True
        try:
            return round_fn(*a, **k)
        finally:
            inside[0] = False
            in_rounds[0] += time.perf_counter() - t0

    spec.speculative_round = speculative_round

    def once(depth: int, steps: str, n: int) -> dict[str, float]:
        eng.swap_drafter(drafters[steps])
        active[0] = drafters[steps]
        eng.forget()
        config = GenerationConfig(max_tokens=n, depth=depth, ignore_eog=True, probabilities=True)
        spent.clear()
        in_rounds[0] = 0.0
        events = list(eng.stream(ids, config))
        stats = events[-1]
        rounds = [e for e in events if isinstance(e, RoundEvent) and not e.from_prefill]
        wall = sum(e.round_ms for e in rounds) / 1e3
        out = {k: spent[k] / stats.rounds for k in PHASES}
        out["events"] = (wall - in_rounds[0]) / stats.rounds
        out["python"] = stats.overhead_s / stats.rounds
        out["round"] = stats.decode_s / stats.rounds
        return out

    print(f"[{args.pair}] a round's Python by phase, us per round, median of {args.repeats}; {args.tokens} tokens, "
          "every draft accepted, the app's probabilities on")  # fmt: skip
    print("| pair | depth | drafter steps | round ms | Python | draft | of it, choose | verify | of it, exposed "
          "| walk | rewind | provenance | events |")  # fmt: skip
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for depth in [int(d) for d in args.depths.split(",")]:
        for steps in drafters:
            once(depth, steps, 8)  # warm-up
            runs = [once(depth, steps, args.tokens) for _ in range(args.repeats)]
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            cells = " | ".join(f"{med[k] * 1e6:.0f}" for k in ("python", *PHASES))
            print(f"| {args.pair} | {depth} | {steps} | {med['round'] * 1e3:.2f} | {cells} |", flush=True)
    close_all(drafters.values(), [eng], [drafter_model, target])
    return 0


if __name__ == "__main__":
    sys.exit(main())
