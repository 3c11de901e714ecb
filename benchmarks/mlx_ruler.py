"""The ruler on MLX with small models: our MLX round against mlx-lm's and mlx-vlm's own loops on this box.

SmolLM2-135M converted from its GGUF (engine.models.mlx_conversions): float32 the target, its own
4-bit conversion the drafter (as tests/engine/runtime/test_mlx_convert.py's real-weights test), and
the GGUF itself on llama.cpp drafting for itself (our llama arms: the same model in both formats).

With --tiny, a random-weight qwen2 folder written into a temporary folder drafts for itself (every
draft kept): seconds a run, where the loops' own costs (Python, host syncs) weigh the most.

With --kind mtp, a random-weight Qwen 3.5 folder with its own MTP head (tests/engine/runtime/
mlx_targets.py's writer: --hidden wide, --layers deep, every fourth layer attention and the rest
gated delta-net as in Qwen 3.5, a tokenizer) drafts for itself: our MLX MTP round against mlx-vlm's
(`mlx-vlm mtp dK`), and mlx-lm's plain loop at depth 0. --head noisy (the default) keeps some drafts
and refuses others; copy keeps every one; random almost none. With --kind dflash, a random-weight
DFlash drafter reading three of that target's layers against mlx-vlm's DFlash rounds: its drafts
all miss, so the arms measure what a round costs.

    PYTHONPATH=. python benchmarks/mlx_ruler.py [--tiny | --kind mtp [--hidden 512 --layers 8 --head noisy]]
        [--tokens 64] [--repeats 3] [--depths 0,2,3] [--only code,qa]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from engine.drafting import kinds
from engine.models import catalog
from engine.models.mlx_conversions import mlx_folder_for
from engine.ruler import mlx_report
from engine.ruler.mlx_arms import MlxBenchConfig, run_mlx_bench
from engine.ruler.prompts import BUILT_IN, built_in


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--depths", default="0,2,3")
    parser.add_argument("--only", help="built-in prompts (default: code,writing,qa; with --kind mtp or dflash: qa)")
    parser.add_argument("--no-llama", action="store_true", help="leave our llama arms out")
    parser.add_argument("--tiny", action="store_true", help="a random-weight folder drafting for itself")
    parser.add_argument(
        "--kind", choices=("model", "mtp", "dflash"), default="model", help="mtp, dflash: a Qwen 3.5 and that drafter"
    )
    parser.add_argument("--hidden", type=int, default=512, help="--kind mtp: the target's width")
    parser.add_argument("--layers", type=int, default=8, help="--kind mtp: the target's layers")
    parser.add_argument("--head", choices=("noisy", "copy", "random"), default="noisy", help="--kind mtp: the MTP head")
    parser.add_argument("--out", default="bench-results")
    args = parser.parse_args()
    if args.kind in ("mtp", "dflash"):
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "engine" / "runtime"))
        from mlx_folders import CORPUS
        from mlx_targets import write_dflash, write_target

        where, vocab = Path(tempfile.mkdtemp()), 1024
        corpus = CORPUS + tuple(BUILT_IN.values())  # the prompts in words, not bytes: a short prefill
        folder = where / f"qwen35-{args.hidden}x{args.layers}-mtp-{args.head}"
        target = write_target(
            folder, 0, args.head, args.layers, width=args.hidden, interval=4, tokenizer=corpus, vocab=vocab
        )
        drafter, gguf = None, None
        if args.kind == "dflash":  # random weights reading three of the target's layers: its drafts all miss
            layers = (1, args.layers // 2, args.layers - 2)
            drafter = write_dflash(where / "dflash", 1, layers, width=args.hidden, vocab=vocab)
    elif args.tiny:
        from tests.engine.runtime.mlx_folders import write_qwen2_folder

        target = drafter = write_qwen2_folder(Path(tempfile.mkdtemp()) / "tiny", seed=0, layers=4, hidden=128)
        gguf = None
    else:
        gguf = catalog.resolve(catalog.SMOLLM2_135M, download=False)
        target, drafter = mlx_folder_for(gguf, "f32"), mlx_folder_for(gguf, "4bit-f32")
    config = MlxBenchConfig(
        target=target,
        drafter=drafter,
        kind={"mtp": kinds.MTP.name, "dflash": kinds.DFLASH.name}.get(args.kind, kinds.MODEL.name),
        prompts=built_in((args.only or ("code,writing,qa" if args.kind == "model" else "qa")).split(",")),
        depths=sorted({int(d) for d in args.depths.split(",")}),
        target_gguf=None if args.no_llama else gguf,
        drafter_gguf=None if args.no_llama else gguf,  # the GGUF drafting for itself
        n_tokens=args.tokens,
        repeats=args.repeats,
    )
    result = run_mlx_bench(config, lambda line: print(line, file=sys.stderr, flush=True))
    paths = mlx_report.write(result, Path(args.out))
    print(mlx_report.markdown(result))
    print("wrote " + ", ".join(str(p) for p in paths.values()), file=sys.stderr)
    return 1 if mlx_report.mismatches(result) else 0


if __name__ == "__main__":
    sys.exit(main())
