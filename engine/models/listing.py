"""`draftlight models --list`'s last part: the models already on this machine, as the app's pickers find
them (engine.models.local), each by the name `--target` takes. GGUF files first; then MLX folders,
each chat model with the drafter folders that fit it beneath it (their kind read from config.json,
engine.models.mlx_compat), and the drafter folders that fit none of them. A folder the MLX loaders would
refuse (engine.runtime.mlx_check) is listed with the sentence saying why."""

from __future__ import annotations

from collections.abc import Callable

from engine.models import mlx_compat
from engine.models.facts import mlx_facts, read_mlx
from engine.models.local import LocalModel, local_models
from engine.models.mlx_folders import MlxFolder, drafter_words
from engine.models.rules import fits

GGUF_PLACES = "LM Studio, Ollama, the Hugging Face cache, llama.cpp's cache"


def fit(target: MlxFolder, drafter: MlxFolder) -> bool:
    """Whether a drafter folder can draft for the target: what its kind needs, and the vocabularies."""
    return not fits(mlx_facts(target), mlx_facts(drafter))[1] and all(
        r.holds for r in mlx_compat.vocabulary_rules(target, drafter)
    )


def print_local_models(say: Callable[[str], None] = print, models: list[LocalModel] | None = None) -> None:
    """The models on this machine: GGUF files, then MLX folders with their drafters beneath them."""
    models = local_models() if models is None else models
    ggufs = [m for m in models if not m.is_folder]
    say(f"\nGGUF models on this machine ({GGUF_PLACES}):" if ggufs else f"\nNo GGUF models in {GGUF_PLACES}.")
    for m in ggufs:
        say(f"  {m.label()}: {m.path}")
    read = [(m, read_mlx(m.path)) for m in models if m.is_folder]
    folders = [(m, f) for m, f in read if f is not None]
    refused = {m.path: mlx_compat.refusal(m.path) for m, _ in folders}  # the loaders' own check, said here first
    targets = [(m, f) for m, f in folders if not mlx_facts(f).kind.reads_target]
    drafters = [(m, f) for m, f in folders if mlx_facts(f).kind.reads_target]
    say("\nMLX model folders on this machine:" if folders else "\nNo MLX model folders on this machine.")
    placed: set[int] = set()
    for m, target in targets:
        say(f"  {m.label()}: {m.path}")
        if refused[m.path]:
            say(f"    It will not load: {refused[m.path]}")
            continue
        for i, (d, drafter) in enumerate(drafters):
            if not refused[d.path] and fit(target, drafter):
                placed.add(i)
                say(f"    {drafter_words(drafter)}, drafts for it: {d.label()}: {d.path}")
    left = [(d, f) for i, (d, f) in enumerate(drafters) if i not in placed]
    if left:
        say("Drafter folders that fit none of these models:")
    for d, drafter in left:
        say(f"  {drafter_words(drafter)}: {d.label()}: {d.path}")
        if refused[d.path]:
            say(f"    It will not load: {refused[d.path]}")
