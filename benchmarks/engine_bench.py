"""The engine's own table: four kinds of prompt x depth 0-4 and the n-gram drafter.

Decode tok/s, acceptance per position, mean accepted length, round cost c (round time
over a depth-0 pass) and Python's share of each round, from the ruler with our arms
only. Usage: python benchmarks/engine_bench.py [--repeats N] [--tokens N] [--out DIR]
"""

from __future__ import annotations

import sys

from engine.ruler.cli import main

if __name__ == "__main__":
    args = sys.argv[1:]
    defaults = [
        "bench",
        "--no-oracle",
        "--only",
        "code,writing,arithmetic,structured",
        "--depths",
        "0,1,2,3,4",
        "--ngram-depth",
        "3",
        "--out",
        "docs/benchmarks/engine",
    ]
    sys.exit(main(defaults + args))
