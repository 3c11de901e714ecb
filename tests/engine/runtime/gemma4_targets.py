"""A tiny Gemma 4 target written as an MLX folder, and mlx-vlm 0.7.10's own Gemma 4 on its weights as the oracle.

Random weights; sliding and full attention, KV-shared layers, per-layer inputs and a final softcap, as
the real ones have. Our side loads the folder with MlxModel.load (mlx-lm's class). Shared by
test_mlx_assistant.py, test_mlx_dspark.py, test_mlx_vlm_ruler.py and benchmarks/mlx_ruler.py; Gemma 4's
assistant is written here too, beside the target it reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx
from mlx.utils import tree_flatten
from mlx_folders import write_tokenizer
from mlx_lm.models import gemma4_text
from mlx_targets import TOKENIZER_VOCAB, VOCAB, silenced
from mlx_vlm.models.gemma4.config import TextConfig
from mlx_vlm.models.gemma4.language import LanguageModel
from mlx_vlm.speculative.drafters.gemma4_assistant import Gemma4AssistantDraftModel
from mlx_vlm.speculative.drafters.gemma4_assistant import ModelConfig as AssistantConfig

WIDTH = 64
TARGET = {
    "model_type": "gemma4_text",
    "hidden_size": WIDTH,
    "num_hidden_layers": 4,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "head_dim": 16,
    "global_head_dim": 32,
    "num_key_value_heads": 2,
    "num_kv_shared_layers": 2,  # the last two layers read the first two's keys and values
    "hidden_size_per_layer_input": 8,
    "vocab_size": VOCAB,
    "vocab_size_per_layer_input": VOCAB,
    "sliding_window": 512,
    "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    "max_position_embeddings": 512,
    # Gemma 4's own, written out: mlx-lm and mlx-vlm default a full layer's rotary fraction differently.
    "rope_parameters": {
        "full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
        "sliding_attention": {"partial_rotary_factor": 1.0, "rope_theta": 10000.0, "rope_type": "default"},
    },
    "final_logit_softcapping": 30.0,
    "use_double_wide_mlp": False,
    "tie_word_embeddings": True,
}
SILENT = ("o_proj.weight", "down_proj.weight", "per_layer_projection.weight")  # a layer with these zero adds nothing


def config(width: int = WIDTH, layers: int = 4, vocab: int = VOCAB) -> dict:
    """TARGET `width` wide, of `layers` layers (sliding and full in turn, the last two reading the keys and
    values of the two before them) and `vocab` tokens."""
    kinds_ = ["sliding_attention", "full_attention"] * (layers // 2)
    return {**TARGET, "hidden_size": width, "intermediate_size": 2 * width, "num_hidden_layers": layers,
            "layer_types": kinds_, "vocab_size": vocab, "vocab_size_per_layer_input": vocab}  # fmt: skip


def write_gemma4(
    folder: Path,
    seed: int,
    copy: bool = False,
    tokenizer: tuple[str, ...] | None = None,
    vocab: int = TOKENIZER_VOCAB,
    width: int = WIDTH,
    layers: int = 4,
) -> Path:
    """A Gemma 4 target's MLX folder. `copy`: its layers add nothing, so its next token is a function of
    the token alone (its tied head over the token's normed embedding). `tokenizer`: a corpus that
    mlx_folders' tokenizer of `vocab` tokens (the model's vocabulary then) is trained on, the special
    tokens' rows of the tied embeddings zero (mlx_targets.silenced: no run of fixed length ends early);
    without one the vocabulary is VOCAB and the folder has no tokenizer."""
    cfg = config(width, layers, vocab if tokenizer else VOCAB)
    mx.random.seed(seed)
    module = gemma4_text.Model(gemma4_text.ModelArgs.from_dict(cfg))
    weights = dict(tree_flatten(module.parameters()))
    if copy:
        weights = {k: mx.zeros_like(v) if k.endswith(SILENT) else v for k, v in weights.items()}
    folder.mkdir(parents=True, exist_ok=True)
    if tokenizer:
        write_tokenizer(folder, vocab, tokenizer)
        embed = "model.embed_tokens.weight"  # the head is tied: its rows are these
        weights[embed] = silenced(weights[embed])
    (folder / "config.json").write_text(json.dumps(cfg))
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})
    return folder


def oracle_gemma4(folder: Path) -> tuple[LanguageModel, list]:
    """mlx-vlm's own Gemma 4 on the folder's weights, and a prompt cache for it."""
    lm = LanguageModel(TextConfig.from_dict(json.loads((folder / "config.json").read_text())))
    lm.load_weights(list(mx.load(str(folder / "model.safetensors")).items()))
    return lm, lm.make_cache()


def write_assistant(
    folder: Path,
    seed: int,
    target: Path,
    variant: str = "random",
    width: int = 32,
    backbone: int = WIDTH,
    vocab: int = VOCAB,
    centroids: bool = False,
) -> Path:
    """An assistant's MLX folder for the Gemma 4 target in `target` (`backbone` wide, of `vocab` tokens),
    random, or with `variant` "copy": as wide as the target, its layers silent, it reads the token's
    embedding alone and shares the target's embeddings, so it guesses what a copy target writes after
    the token (every draft kept), and a random target's now and then. `centroids`: its head is
    mlx-vlm's centroid-routed one (use_ordered_embeddings), a token a centroid."""
    width = backbone if variant == "copy" else width
    text = {
        **TARGET,
        "hidden_size": width,
        "num_hidden_layers": 2,
        "layer_types": ["sliding_attention", "full_attention"],
        "num_kv_shared_layers": 2,
        "hidden_size_per_layer_input": 0,
        "final_logit_softcapping": None,
        "vocab_size": vocab,
    }
    cfg = {
        "model_type": "gemma4_assistant",
        "backbone_hidden_size": backbone,
        "block_size": 4,
        "tie_word_embeddings": True,
        "text_config": text,
        "use_ordered_embeddings": centroids,
        "num_centroids": vocab,
        "centroid_intermediate_top_k": 8,
    }
    mx.random.seed(seed)
    assistant = Gemma4AssistantDraftModel(AssistantConfig.from_dict(cfg))
    weights = dict(tree_flatten(assistant.parameters()))
    if centroids:
        weights["masked_embedding.token_ordering"] = mx.random.permutation(vocab).astype(mx.int32)
    if variant == "copy":
        weights = {k: mx.zeros_like(v) if k.endswith(SILENT) else v for k, v in weights.items()}
        saved = mx.load(str(target / "model.safetensors"))
        weights["model.embed_tokens.weight"] = saved["model.embed_tokens.weight"]
        weights["pre_projection.weight"] = mx.concatenate([mx.eye(width), mx.zeros((width, width))], axis=1)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})
    return folder
