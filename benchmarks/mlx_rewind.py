"""What undoing a rejected draft costs an MLX hybrid target: a rewind against a one-row decode.

Random weights (no download here) in two shapes of mlx-lm's qwen3_5 (gated delta-net layers, one
attention layer in `interval`): `tiny`, the tests' model, and `0.8b`, the shape of Qwen3.5-0.8B
(bfloat16). For each depth d it times a verify batch of d + 1 rows and the rewind that keeps j of
them (j = 1..d: the round's rewinds after a rejection), medians of several runs after a warm-up;
with --replay, the rewinds decode the kept tokens again instead of using the batch's per-step states.

    python benchmarks/mlx_rewind.py --shape tiny
    python benchmarks/mlx_rewind.py --shape 0.8b --runs 5 [--replay]
"""

from __future__ import annotations

import argparse
import statistics
import time

import mlx.core as mx
from mlx.utils import tree_map
from mlx_lm.models import qwen3_5

from engine.runtime.mlx import MlxModel

SHAPES = {
    "tiny": dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        vocab_size=97,
        linear_num_value_heads=4,
        linear_num_key_heads=2,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        full_attention_interval=2,
    ),
    "0.8b": dict(
        hidden_size=1024,
        intermediate_size=3584,
        num_hidden_layers=24,
        num_attention_heads=8,
        num_key_value_heads=2,
        head_dim=256,
        vocab_size=248320,
        linear_num_value_heads=16,
        linear_num_key_heads=16,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        full_attention_interval=4,
        tie_word_embeddings=True,
    ),
}


def build(shape: str) -> MlxModel:
    cfg = dict(SHAPES[shape], model_type="qwen3_5", linear_conv_kernel_dim=4, rms_norm_eps=1e-6)
    cfg.setdefault("tie_word_embeddings", False)
    mx.random.seed(0)
    module = qwen3_5.Model(qwen3_5.ModelArgs.from_dict(cfg))
    if shape != "tiny":
        module.update(tree_map(lambda p: p.astype(mx.bfloat16) * 0.02, module.parameters()))
    mx.eval(module.parameters())
    return MlxModel(module, cfg["vocab_size"], f"qwen3_5 {shape}", n_ctx_train=4096)


def median_s(fn, runs: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--replay", action="store_true", help="decode the kept tokens again, per-step states unused")
    args = parser.parse_args()
    model = build(args.shape)
    prompt = [(7 * i + 3) % model.n_vocab for i in range(args.prompt)]
    ctx = model.new_context(max_rows=args.depth + 1)
    if args.replay:
        ctx.snapshots.steps = None
    how = "per-step states" if ctx.snapshots.steps is not None else "replay"
    ctx.decode(prompt, all_logits=False)
    n = len(prompt)

    def one_row() -> None:
        ctx.decode([5], all_logits=True)
        ctx.rewind(n)  # at the batch's start: the snapshot, nothing decoded again

    base = median_s(one_row, args.runs)
    print(f"{model.name}, rewinds by {how}: one-row decode {base * 1e3:.2f} ms (prompt {n} tokens)")
    batch = list(range(5, 6 + args.depth))
    verify = median_s(lambda: (ctx.decode(batch, all_logits=True), ctx.rewind(n)), args.runs)
    print(f"  verify batch of {len(batch)} rows {verify * 1e3:.2f} ms")
    for j in range(1, args.depth + 1):
        spent = []
        for _ in range(args.runs + 1):
            ctx.decode(batch, all_logits=True)
            t0 = time.perf_counter()
            ctx.rewind(n + j)
            spent.append(time.perf_counter() - t0)
            ctx.rewind(n)
        rewind = statistics.median(spent[1:])
        print(f"  rewind keeping {j} of {len(batch)}: {rewind * 1e3:.2f} ms, {rewind / base:.2%} of a one-row decode")


if __name__ == "__main__":
    main()
