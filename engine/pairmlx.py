"""The pairing doctor's facts and rules for MLX folders, from their headers (engine.models.mlx_compat).

A GGUF pair is read by llama.cpp's vocabulary loader (engine.pairdoctor); an MLX pair by its
config.json, tokenizer.json and safetensors headers: nothing is loaded to run.
"""

from __future__ import annotations

from pathlib import Path

from engine.models import mlx_compat
from engine.models.compat import Rule
from engine.models.facts import checked_folder, mlx_facts, name_of
from engine.models.mlx_folders import MlxFolder, text_field
from engine.models.pairing import ModelShapes
from engine.models.rules import made_for_rule


def read_folder(path: Path) -> MlxFolder:
    """The folder as the doctor reads it: what the loader would refuse, it refuses in the same sentence."""
    return checked_folder(path)


def _count(config: dict, key: str) -> int | None:
    value = text_field(config, key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def mlx_shapes(folder: MlxFolder) -> ModelShapes:
    """A folder's shapes as the doctor reports them: its KV cache from config.json's heads and widths.
    Every `full_attention_interval`-th layer of a hybrid keeps a KV cache; the rest a recurrent state."""
    config = folder.config
    layer = config.get("transformer_layer_config")  # EAGLE-3's own layers are described there
    layers = folder.layers or (_count(layer, "num_hidden_layers") if isinstance(layer, dict) else None) or 0
    heads = _count(config, "num_attention_heads") or 0
    kv_heads = _count(config, "num_key_value_heads") or heads
    width = folder.hidden_size or 0
    head_dim = _count(config, "head_dim") or (width // heads if heads else 0)
    interval = _count(config, "full_attention_interval")
    interval = interval if interval is not None and interval > 1 else None
    hybrid = interval is not None
    return ModelShapes(
        path=str(folder.path),
        name=name_of(folder),
        architecture=folder.architecture,
        file_bytes=folder.size,
        state_kind="hybrid" if hybrid else "",
        layers=layers,
        kv_layers=layers // interval if interval is not None else layers,
        kv_heads=kv_heads,
        key_dim=head_dim,
        value_dim=head_dim,
        mtp_heads=folder.mtp_layers if folder.mtp_weights else 0,
        base_models=(),
    )


def mlx_rules(target: MlxFolder, drafter: MlxFolder) -> tuple[Rule, ...]:
    """The vocabulary rules, and for a drafter that reads the target, whether it was made for it."""
    made_for = made_for_rule(mlx_facts(target), mlx_facts(drafter))
    return (*mlx_compat.vocabulary_rules(target, drafter), *((made_for,) if made_for else ()))
