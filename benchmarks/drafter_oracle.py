"""Our drafts against llama.cpp's, round by round, for each drafter kind that reads the target.

Writes tiny models (tests/engine/synthetic*.py: random weights, and variants whose drafts are
known by construction), runs `llama-speculative-simple -v` (built by `make oracle`) and our
round on the same flow, and prints a markdown table: rounds compared, drafted, accepted, and
whether every draft and every token agree (llama.cpp does not log DFlash2's drafts: for it the
draft counts and acceptances are compared). The same comparisons are asserted by the tests in
tests/engine/drafting/.
Usage: python benchmarks/drafter_oracle.py [--tokens N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "engine"), str(ROOT / "tests" / "engine" / "drafting")]

from speculative_simple import before_the_end, ours, theirs  # noqa: E402
from synthetic import N_VOCAB, dflash, eagle3, hybrid_qwen35  # noqa: E402
from synthetic_gemma4 import gemma4, gemma4_assistant  # noqa: E402
from synthetic_gemma4 import known_tables as gemma4_tables  # noqa: E402
from synthetic_variants import CYCLE, cycle_table, dflash2, dspark, known_tables, step35_mtp  # noqa: E402

from engine import Engine, RuntimeOptions  # noqa: E402

PROMPT = "the mill on the river turned; the mill on the river"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=24)
    args = parser.parse_args()
    options = RuntimeOptions(n_ctx=256, n_batch=256)
    folder = Path(tempfile.mkdtemp(prefix="draftlight-oracle-"))
    target = hybrid_qwen35(folder / "hybrid.gguf")
    cases = [
        ("mtp (in the target's file)", hybrid_qwen35(folder / "hybrid-mtp.gguf", nextn=True), "mtp", "draft-mtp"),
        ("dflash (random)", target, dflash(folder / "dflash.gguf"), "draft-dflash"),
        (
            "dflash (drafts 43, 97, 58 only)",
            target,
            dflash(folder / "dflash-n.gguf", vocab=(43, 97, 58)),
            "draft-dflash",
        ),
        ("eagle3 (random)", target, eagle3(folder / "eagle3.gguf"), "draft-eagle3"),
        ("eagle3 (drafts 97, 58 only)", target, eagle3(folder / "eagle3-n.gguf", vocab=(97, 58)), "draft-eagle3"),
        *more_cases(folder, target),
    ]
    print("| drafter | depth | rounds compared | drafted | accepted | drafts equal | tokens equal |")
    print("|---|---:|---:|---:|---:|---|---|")
    for name, model, drafter, spec in cases:
        engine = Engine.load(model, drafter, options)
        for depth in (1, 2, 3):
            draft = None if drafter == "mtp" else drafter
            reference = before_the_end(
                theirs(model, spec, depth, PROMPT, args.tokens, options.threads, draft=draft), depth, args.tokens
            )
            mine = ours(engine, depth, PROMPT, args.tokens)[: len(reference)]
            if "dflash2" in name:  # its drafts are not logged: their number and fate are
                mine = [([None] * len(d), a, last) for d, a, last in mine]
                reference = [([None] * len(m[0]), a, last) for m, (_, a, last) in zip(mine, reference)]
            same_drafts = [(d, a) for d, a, _ in mine] == [(d, a) for d, a, _ in reference]

            def tokens(rounds):
                return [t for drafts, kept, last in rounds for t in (*drafts[:kept], last)]

            print(
                f"| {name} | {depth} | {len(reference)} | {sum(len(r[0]) for r in reference)} | "
                f"{sum(r[1] for r in reference)} | {'yes' if same_drafts else 'NO'} | "
                f"{'yes' if tokens(mine) == tokens(reference) else 'NO'} |"
            )
        engine.close()
    return 0


def more_cases(folder: Path, target: Path) -> list[tuple[str, Path, str | Path, str]]:
    """Gemma 4's assistant, chained heads, DFlash2 and DSpark: random, and known by construction."""
    f, g = gemma4_tables()
    t = known_tables()
    heads = [[t[x] if x % m else (t[x] + 1) % N_VOCAB for x in range(N_VOCAB)] for m in (2, 3, 4)]
    h = [t[x] if x % 3 else (t[x] + 1) % N_VOCAB for x in range(N_VOCAB)]
    f_cycle = cycle_table(CYCLE)
    choice = [CYCLE.index(f_cycle[x]) for x in range(N_VOCAB)]
    choice[CYCLE[1]] = 6
    k = [(3 * x + 1) % 11 + 40 for x in range(N_VOCAB)]  # as tests/engine/drafting/test_known_readers.py
    k[41] = k[47] = 47
    drafts = [k[x] if x % 3 else (k[x] + 1) % N_VOCAB for x in range(N_VOCAB)]
    settles = hybrid_qwen35(folder / "settles.gguf", known=(k, k))
    gemma = gemma4(folder / "gemma4.gguf")
    known_gemma = gemma4(folder / "gemma4-known.gguf", known=(f, g))
    return [
        ("dflash (known)", settles, dflash(folder / "dflash-k.gguf", known=[47] * N_VOCAB), "draft-dflash"),
        ("eagle3 (known)", settles, eagle3(folder / "eagle3-k.gguf", known=drafts), "draft-eagle3"),
        ("assistant (random)", gemma, gemma4_assistant(folder / "mtp-gemma4.gguf"), "draft-mtp"),
        ("assistant (known)", known_gemma, gemma4_assistant(folder / "mtp-k.gguf", known=(f, g)), "draft-mtp"),
        (
            "assistant (known, reads the state)",
            known_gemma,
            gemma4_assistant(folder / "mtp-kh.gguf", known=(f, g), reads="hidden"),
            "draft-mtp",
        ),
        ("mtp, 3 chained heads (random)", step35_mtp(folder / "step35.gguf"), "mtp", "draft-mtp"),
        ("mtp, 3 chained heads (known)", step35_mtp(folder / "step35-k.gguf", known=(t, heads)), "mtp", "draft-mtp"),
        (
            "mtp, 3 chained heads (known + noise)",
            step35_mtp(folder / "step35-n.gguf", known=(t, heads), noise=0.05),
            "mtp",
            "draft-mtp",
        ),
        ("dflash2 (random)", target, dflash2(folder / "dflash2.gguf"), "draft-dflash"),
        (
            "dflash2 (known)",
            hybrid_qwen35(folder / "cycle.gguf", known=(f_cycle, f_cycle)),
            dflash2(folder / "dflash2-k.gguf", top_k=len(CYCLE), known=(CYCLE, choice)),
            "draft-dflash",
        ),
        ("dspark (random)", target, dspark(folder / "dspark.gguf"), "draft-dspark"),
        (
            "dspark (known)",
            hybrid_qwen35(folder / "known.gguf", known=(t, t)),
            dspark(folder / "dspark-k.gguf", known=h),
            "draft-dspark",
        ),
    ]


if __name__ == "__main__":
    sys.exit(main())
