"""Our drafts against llama.cpp's, round by round, for each drafter kind that reads the target.

Writes tiny random-weight models (tests/engine/synthetic.py), runs `llama-speculative-simple -v`
(built by `make oracle`) and our round on the same flow, and prints a markdown table: rounds
compared, drafted, accepted, and whether every draft and every token agree. The same comparison
is asserted by tests/engine/drafting/test_{mtp,dflash,eagle3}.py.
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
from synthetic import dflash, eagle3, hybrid_qwen35  # noqa: E402

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


if __name__ == "__main__":
    sys.exit(main())
