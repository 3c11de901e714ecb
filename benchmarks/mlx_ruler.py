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
DFlash drafter reading three of that target's layers against mlx-vlm's DFlash rounds; --kind dspark,
a random-weight DSpark drafter (DFlash with a Markov head) on those layers, against the DFlash
rounds mlx-vlm runs it with; --kind eagle3, a random-weight EAGLE-3 drafter reading the inputs of
three of its layers, against mlx-vlm's EAGLE-3 rounds. --kind assistant: a random-weight Gemma 4
target (gemma4_targets.py's writer, --hidden wide, --layers deep, sliding and full attention in
turn, the last two layers sharing keys and values) and a random-weight assistant for it, against
mlx-vlm's MTP rounds on its Gemma 4 language model. These random drafters' drafts all miss, so the
arms measure what a round costs.

    PYTHONPATH=. python benchmarks/mlx_ruler.py [--tiny | --kind mtp [--hidden 512 --layers 8 --head noisy]
        | --kind dflash|dspark|eagle3|assistant [--hidden 512 --layers 8]]
        [--tokens 64] [--repeats 3] [--depths 0,2,3] [--only code,qa]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from engine.drafting import kinds
from engine.models import catalog
from engine.models.mlx_conversions import mlx_folder_for
from engine.ruler import mlx_report
from engine.ruler.mlx_arms import MlxBenchConfig
from engine.ruler.prompts import BUILT_IN, built_in

READING = tuple(
    k.name for k in (kinds.MTP, kinds.DFLASH, kinds.DSPARK, kinds.EAGLE3, kinds.ASSISTANT)
)  # read the target


def reading_pair(args: argparse.Namespace, where: Path) -> tuple[Path, Path | None]:
    """A random-weight target of --hidden x --layers and the drafter of --kind that reads it (None: its MTP head)."""
    from gemma4_targets import write_assistant, write_gemma4
    from mlx_folders import CORPUS
    from mlx_targets import write_dflash, write_dspark, write_eagle3, write_target

    vocab, corpus = 1024, CORPUS + tuple(BUILT_IN.values())  # the prompts in words, not bytes: a short prefill
    if args.kind == kinds.ASSISTANT.name:
        target = write_gemma4(where / f"gemma4-{args.hidden}x{args.layers}", 0, tokenizer=corpus, vocab=vocab,
                              width=args.hidden, layers=args.layers)  # fmt: skip
        if args.window:  # a reply past the sliding window: its layers' window, and room for the reply
            cfg = json.loads((target / "config.json").read_text())
            cfg.update(sliding_window=args.window, max_position_embeddings=max(4096, 2 * args.tokens))
            (target / "config.json").write_text(json.dumps(cfg))
        return target, write_assistant(where / "assistant", 1, target, backbone=args.hidden, vocab=vocab)
    folder = where / f"qwen35-{args.hidden}x{args.layers}-mtp-{args.head}"
    target = write_target(
        folder, 0, args.head, args.layers, width=args.hidden, interval=4, tokenizer=corpus, vocab=vocab
    )
    layers = tuple(sorted({1, args.layers // 2, args.layers - 2}))  # up to three of its layers: DFlash, DSpark
    if args.kind == kinds.DFLASH.name:
        return target, write_dflash(where / "dflash", 1, layers, width=args.hidden, vocab=vocab)
    if args.kind == kinds.DSPARK.name:
        return target, write_dspark(where / "dspark", 1, target_layers=args.layers, vocab=vocab, width=args.hidden,
                                    reads=layers)  # fmt: skip
    if args.kind == kinds.EAGLE3.name:  # the inputs of its layers 1, L/2 and L-1
        reads = (1, args.layers // 2, args.layers - 1)
        return target, write_eagle3(where / "eagle3", 1, target_layers=reads, width=args.hidden, vocab=vocab)
    return target, None  # the target's own MTP head


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--depths", default="0,2,3")
    parser.add_argument(
        "--only", help="built-in prompts (default: code,writing,qa; with a --kind other than model: qa)"
    )
    parser.add_argument("--no-llama", action="store_true", help="leave our llama arms out")
    parser.add_argument("--tiny", action="store_true", help="a random-weight folder drafting for itself")
    parser.add_argument(
        "--kind",
        choices=(kinds.MODEL.name, *READING),
        default="model",
        help="mtp, dflash, dspark, eagle3: a Qwen 3.5 and that drafter; assistant: a Gemma 4 and its assistant",
    )
    parser.add_argument("--hidden", type=int, default=512, help="with a --kind: the target's width")
    parser.add_argument("--layers", type=int, default=8, help="with a --kind: the target's layers")
    parser.add_argument("--window", type=int, default=0, help="--kind assistant: the target's sliding window")
    parser.add_argument("--head", choices=("noisy", "copy", "random"), default="noisy", help="--kind mtp: the MTP head")
    parser.add_argument("--out", default="bench-results")
    args = parser.parse_args()
    if args.kind in READING:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "engine" / "runtime"))
        target, drafter = reading_pair(args, Path(tempfile.mkdtemp()))
        gguf = None
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
        kind=args.kind,  # the kinds' own names (engine.drafting.kinds)
        prompts=built_in((args.only or ("code,writing,qa" if args.kind == "model" else "qa")).split(",")),
        depths=sorted({int(d) for d in args.depths.split(",")}),
        target_gguf=None if args.no_llama else gguf,
        drafter_gguf=None if args.no_llama else gguf,  # the GGUF drafting for itself
        n_tokens=args.tokens,
        repeats=args.repeats,
    )
    found = mlx_report.run_and_print(config, Path(args.out))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
