"""Joined projections (engine.runtime.mlx.joined): each family's q/k/v and gate/up groups run as one
matmul in our decodes with the logits of the model's own code, the weights held once, mlx-lm's own
loops on the same module running its own code, and what cannot be joined left as it is."""

from __future__ import annotations

import pytest

mx = pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")

import mlx.nn as nn  # noqa: E402
from mlx.utils import tree_flatten  # noqa: E402
from mlx_lm.generate import generate_step  # noqa: E402
from mlx_lm.models import gemma3_text, llama, qwen2, qwen3  # noqa: E402
from mlx_lm.models.cache import make_prompt_cache  # noqa: E402
from test_mlx import PROMPT, VOCAB, build  # noqa: E402
from test_mlx_hybrid import build_qwen35  # noqa: E402

from engine.runtime.mlx import MlxModel, MlxOptions  # noqa: E402
from engine.runtime.mlx.convert import mlx_folder_for  # noqa: E402
from engine.runtime.mlx.joined import FAMILIES, join, joining  # noqa: E402

LAYERS = 2
COMMON = {"hidden_size": 64, "num_hidden_layers": LAYERS, "intermediate_size": 128, "num_attention_heads": 4}
COMMON |= {"rms_norm_eps": 1e-6, "vocab_size": VOCAB, "num_key_value_heads": 2}
FAMILY_MODELS = {
    "llama": lambda: llama.Model(llama.ModelArgs(model_type="llama", **COMMON)),
    "llama with biases": lambda: llama.Model(
        llama.ModelArgs(model_type="llama", attention_bias=True, mlp_bias=True, **COMMON)
    ),
    "qwen2": lambda: qwen2.Model(qwen2.ModelArgs(model_type="qwen2", **COMMON)),
    "qwen3": lambda: qwen3.Model(
        qwen3.ModelArgs(
            model_type="qwen3",
            max_position_embeddings=512,
            head_dim=16,
            tie_word_embeddings=True,
            rope_theta=10000.0,
            **COMMON,
        )
    ),
    "gemma3_text": lambda: gemma3_text.Model(
        gemma3_text.ModelArgs(
            model_type="gemma3_text", head_dim=16, sliding_window=8, sliding_window_pattern=2, **COMMON
        )
    ),
}


def made(family: str, bits: int | None) -> nn.Module:
    mx.random.seed(7)
    module = FAMILY_MODELS[family]()
    if bits is not None:
        nn.quantize(module, group_size=32, bits=bits)
    mx.eval(module.parameters())
    return module


def logits(module: nn.Module, batches: list[list[int]]) -> list[mx.array]:
    """Each batch's logits, decoded one after another on one cache: the prompt, then 1- and 3-row batches."""
    cache = make_prompt_cache(module)
    out = [module(mx.array(b)[None], cache=cache) for b in batches]
    mx.eval(out)
    return out


BATCHES = [PROMPT, [5], [6, 7, 8], [9], [10, 11, 12]]  # past gemma's 8-position window


@pytest.mark.parametrize("bits", [None, 4], ids=["float32", "4-bit"])
@pytest.mark.parametrize("family", list(FAMILY_MODELS))
def test_each_family_joins_and_decodes_what_its_own_code_does(family, bits):
    """Every layer's two groups joined; inside joining() the logits are the model's own, bit for bit,
    and so are they outside it (the projections' weights are slices of the joined ones), with no more
    memory held than before."""
    module = made(family, bits)
    own = logits(module, BATCHES)
    size = sum(v.nbytes for _, v in tree_flatten(module.parameters()))
    held = mx.get_active_memory()
    assert join(module) == 2 * LAYERS
    assert mx.get_active_memory() - held < size / 100  # the joined arrays replaced the separate ones
    assert sum(v.nbytes for _, v in tree_flatten(module.parameters())) == size  # the names and sizes stay
    attention, mlp = counted(module.layers[0].self_attn.q_proj), counted(module.layers[0].mlp.gate_proj)
    with joining():
        joined = logits(module, BATCHES)
    assert attention == mlp == [len(BATCHES)]  # one matmul a batch for each group, its parts handed out
    plain = logits(module, BATCHES)
    assert attention == mlp == [len(BATCHES)]  # outside joining(), the model's own projections
    for a, b, c in zip(own, joined, plain, strict=True):
        assert mx.array_equal(a, b) and mx.array_equal(a, c)
    first = module.layers[0].self_attn
    assert first.k_proj.weight.shape == first.k_proj._own["weight"].shape  # read through
    assert join(module) == 0  # once


def test_models_of_other_families_and_mixed_groups_are_left_as_they_are():
    """A hybrid Qwen 3.5 (its code is not in FAMILIES) joins nothing; a group whose projections are
    quantized differently stays separate while the rest of the model joins."""
    hybrid = build_qwen35(0)
    assert type(hybrid).__module__ not in FAMILIES and join(hybrid) == 0
    module = made("qwen2", None)
    first = module.layers[0].self_attn
    nn.quantize(module, group_size=32, bits=4, class_predicate=lambda path, m: m is first.q_proj)
    own = logits(module, BATCHES)
    assert join(module) == 2 * LAYERS - 1
    assert "q_proj" not in first.__dict__ and "q_proj" in module.layers[1].self_attn.__dict__
    with joining():
        for a, b in zip(own, logits(module, BATCHES), strict=True):
            assert mx.array_equal(a, b)


def counted(projection: object) -> list[int]:
    """Count the calls of the joined matmul `projection` (a joined projection) is a slice of."""
    group = projection._group  # type: ignore[attr-defined]
    layer, calls = group.layer, [0]

    def call(x: mx.array) -> mx.array:
        calls[0] += 1
        return layer(x)

    group.layer = call
    return calls


@pytest.mark.parametrize("options", [MlxOptions(), MlxOptions(compiled_decode=False)], ids=["compiled", "uncompiled"])
def test_our_decodes_run_the_joined_matmul_and_mlx_lms_loop_its_own(options):
    """Our context's decodes (compiled or not) go through the joined matmul; mlx-lm's generate_step on
    the same module never does; both write the same tokens, as does a model loaded unjoined."""
    target = MlxModel(build(0), VOCAB, "target", options=options)
    assert target.joined_groups == 2 * LAYERS
    calls = counted(target.module.layers[0].self_attn.q_proj)
    ctx = target.new_context()
    row, _ = ctx.prefill(PROMPT)
    ours = [int(row.argmax())]
    for _ in range(20):
        ours.append(int(ctx.decode([ours[-1]], False)[-1].argmax()))
    assert calls[0] > 0
    seen = calls[0]
    steps = generate_step(mx.array(PROMPT), target.module, max_tokens=21, prompt_cache=make_prompt_cache(target.module))
    assert [int(t) for t, _ in steps] == ours and calls[0] == seen
    unjoined = MlxModel(build(0), VOCAB, "target", options=MlxOptions(joined_projections=False))
    assert unjoined.joined_groups == 0 and "q_proj" not in unjoined.module.layers[0].self_attn.__dict__
    ctx = unjoined.new_context()
    row, _ = ctx.prefill(PROMPT)
    again = [int(row.argmax())]
    for _ in range(20):
        again.append(int(ctx.decode([again[-1]], False)[-1].argmax()))
    assert again == ours


def test_real_weights_come_out_the_same_joined(smollm_path, tmp_path_factory):
    """SmolLM2-135M's real weights, float32 and 4-bit: every logit of a prompt, plain steps and a
    verify-sized batch the same to the bit joined as not."""
    cache = tmp_path_factory.mktemp("mlx-joined")
    for mode in ("f32", "4bit-f32"):
        folder = mlx_folder_for(smollm_path, mode, cache=cache)
        apart = MlxModel.load(folder, MlxOptions(joined_projections=False))
        joined = MlxModel.load(folder)
        assert apart.joined_groups == 0 and joined.joined_groups == 2 * len(joined.module.layers)
        prompt = joined.tokenize("def fibonacci(n):\n    return")
        batches = [prompt, [prompt[-1]], [prompt[-2]], [5, 6, 7, 8]]
        with joining():
            ours = logits(joined.module, batches)
        for a, b in zip(logits(apart.module, batches), ours, strict=True):
            assert mx.array_equal(a, b)
