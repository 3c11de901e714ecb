"""A tiny Gemma 4 target written as an MLX folder, and mlx-vlm 0.7.10's own Gemma 4 on its weights as the oracle.

Random weights; sliding and full attention, KV-shared layers, per-layer inputs and a final softcap, as
the real ones have. Our side loads the folder with MlxModel.load (mlx-lm's class). Shared by
test_mlx_assistant.py and test_mlx_dspark.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx
from mlx.utils import tree_flatten
from mlx_lm.models import gemma4_text
from mlx_targets import VOCAB
from mlx_vlm.models.gemma4.config import TextConfig
from mlx_vlm.models.gemma4.language import LanguageModel

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


def write_gemma4(folder: Path, seed: int, copy: bool = False) -> Path:
    """A Gemma 4 target's MLX folder. `copy`: its layers add nothing, so its next token is a function of
    the token alone (its tied head over the token's normed embedding)."""
    mx.random.seed(seed)
    module = gemma4_text.Model(gemma4_text.ModelArgs.from_dict(TARGET))
    weights = dict(tree_flatten(module.parameters()))
    if copy:
        weights = {k: mx.zeros_like(v) if k.endswith(SILENT) else v for k, v in weights.items()}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(TARGET))
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})
    return folder


def oracle_gemma4(folder: Path) -> tuple[LanguageModel, list]:
    """mlx-vlm's own Gemma 4 on the folder's weights, and a prompt cache for it."""
    lm = LanguageModel(TextConfig.from_dict(TARGET))
    lm.load_weights(list(mx.load(str(folder / "model.safetensors")).items()))
    return lm, lm.make_cache()
