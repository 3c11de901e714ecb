"""The pairing doctor's facts and rules for MLX folders, from their headers (engine.models.vocabulary's rules).

A GGUF pair is read by llama.cpp's vocabulary loader (engine.pairdoctor); an MLX pair by its
config.json, tokenizer.json and safetensors headers: nothing is loaded to run.
"""

from __future__ import annotations

from pathlib import Path

from engine.models.compat import Rule
from engine.models.facts import ModelFacts, checked_folder, mlx_facts
from engine.models.mlx_folders import MlxFolder
from engine.models.pairing import ModelShapes, model_shapes
from engine.models.rules import made_for_rule
from engine.models.vocabulary import folder_vocabulary, vocabulary_rules


def read_folder(path: Path) -> MlxFolder:
    """The folder as the doctor reads it: what the loader would refuse, it refuses in the same sentence."""
    return checked_folder(path)


def mlx_shapes(facts: ModelFacts) -> ModelShapes:
    """A folder's shapes as the doctor reports them: every `full_attention_interval`-th layer of a hybrid
    keeps a KV cache; the rest a recurrent state."""
    return model_shapes(facts, "hybrid" if facts.attention_interval else "", facts.name)


def mlx_rules(target: MlxFolder, drafter: MlxFolder) -> tuple[Rule, ...]:
    """The vocabulary rules, and for a drafter that reads the target, whether it was made for it."""
    made_for = made_for_rule(mlx_facts(target), mlx_facts(drafter))
    vocabulary = vocabulary_rules(folder_vocabulary(target), folder_vocabulary(drafter))
    return (*vocabulary, *((made_for,) if made_for else ()))
