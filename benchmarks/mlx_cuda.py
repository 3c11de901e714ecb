"""The MLX ruler at the default pair's shapes on random weights: for a machine with no hub (MLX's CUDA build).

Writes qwen2 MLX folders with the shapes of Qwen2.5 1.5B (the target) and 0.5B (the drafter), random
weights in bfloat16 and the tiny tokenizer of tests/engine/runtime/mlx_folders.py, then runs
engine.ruler.mlx_arms.run_mlx_bench: our MLX round against mlx-lm's speculative_generate_step on the
same modules and token ids, interleaved, medians.

    --pair self    the 1.5B shape drafting for itself: every draft is accepted, by construction
    --pair 0.5b    the 0.5B shape drafting for the 1.5B shape; with --agree both models' final norms are
                   zero, so every logit is 0 and both models pick the same (first unbanned) token:
                   every draft is accepted while each model's cost is its shape's
    --small        hidden 128, 4 layers, vocab 4096: a check of the script itself in seconds, on any box

    PYTHONPATH=. python benchmarks/mlx_cuda.py --pair self [--tokens 128] [--repeats 3] [--depths 0,1,2,3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from engine.ruler import mlx_report
from engine.ruler.mlx_arms import MlxBenchConfig
from engine.ruler.prompts import built_in

# hidden, layers, heads, kv heads, intermediate: Qwen2.5 1.5B and 0.5B (both vocab 151936, tied embeddings)
SHAPES = {
    "1.5b": (1536, 28, 12, 2, 8960),
    "0.5b": (896, 24, 14, 2, 4864),
    "small": (128, 4, 4, 2, 256),
}
VOCAB = 151936


def write_folder(folder: Path, shape: str, seed: int, dtype: str, agree: bool, vocab: int) -> Path:
    """A qwen2 MLX folder of `shape` with random weights in `dtype` (the final norm zero with `agree`)."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.models import qwen2

    from tests.engine.runtime.mlx_folders import write_tokenizer

    hidden, layers, heads, kv, inter = SHAPES[shape]
    args = qwen2.ModelArgs(
        model_type="qwen2",
        hidden_size=hidden,
        num_hidden_layers=layers,
        intermediate_size=inter,
        num_attention_heads=heads,
        rms_norm_eps=1e-6,
        vocab_size=vocab,
        num_key_value_heads=kv,
        max_position_embeddings=32768,
        rope_theta=1000000.0,
        tie_word_embeddings=True,
    )
    mx.random.seed(seed)
    module = qwen2.Model(args)
    module.set_dtype(getattr(mx, dtype))
    if agree:
        module.model.norm.weight = mx.zeros_like(module.model.norm.weight)
    mx.eval(module.parameters())
    folder.mkdir(parents=True, exist_ok=True)
    weights = dict(tree_flatten(module.parameters()))
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})
    (folder / "config.json").write_text(json.dumps(asdict(args) | {"torch_dtype": dtype}))
    write_tokenizer(folder)
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", choices=["self", "0.5b"], default="self")
    parser.add_argument("--agree", action="store_true", help="zero final norms: every draft accepted")
    parser.add_argument("--small", action="store_true", help="tiny shapes, a check of the script")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--depths", default="0,1,2,3")
    parser.add_argument("--only", default="code,qa")
    parser.add_argument("--models", default=None, help="where to write the folders (default: a temporary one)")
    parser.add_argument("--out", default="bench-results")
    args = parser.parse_args()
    import mlx.core as mx

    print(f"mlx {mx.__version__}, default device {mx.default_device()}", file=sys.stderr, flush=True)
    root = Path(args.models or tempfile.mkdtemp())
    big, little = ("small", "small") if args.small else ("1.5b", "0.5b")
    vocab = 4096 if args.small else VOCAB
    target = write_folder(root / f"target-{big}", big, 0, args.dtype, args.agree, vocab)
    drafter = target
    if args.pair == "0.5b":
        drafter = write_folder(root / f"drafter-{little}", little, 1, args.dtype, args.agree, vocab)
    config = MlxBenchConfig(
        target=target,
        drafter=drafter,
        prompts=built_in(args.only.split(",")),
        depths=sorted({int(d) for d in args.depths.split(",")}),
        n_tokens=args.tokens,
        repeats=args.repeats,
    )
    found = mlx_report.run_and_print(config, Path(args.out))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
