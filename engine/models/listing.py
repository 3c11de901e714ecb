"""`draftlight models --list`'s last part: the models already on this machine, as the app's pickers find
them (engine.models.local), each by the name `--target` takes, GGUF files and MLX folders in one list. Each
model is listed with the drafters that fit it beneath it (a drafter's kind read from its header or its
config.json, engine.models.facts; whether it fits by the one rule, engine.models.rules), then the drafters
that fit none of them. A folder the MLX loaders would refuse (engine.runtime.mlx_check) is listed with the
sentence saying why."""

from __future__ import annotations

from collections.abc import Callable

from engine.errors import DraftlightError
from engine.models import mlx_compat
from engine.models.facts import ModelFacts, facts_of, kind_words, mlx_facts, read_mlx
from engine.models.local import LocalModel, local_models
from engine.models.mlx_folders import MlxFolder
from engine.models.rules import fits
from engine.models.vocabulary import Vocabulary, folder_vocabulary, vocabulary_rules

PLACES = "LM Studio, Ollama, the Hugging Face cache, llama.cpp's cache"


def fit(target: ModelFacts, drafter: ModelFacts, vocabulary: Callable[[ModelFacts], Vocabulary]) -> bool:
    """Whether a drafter can draft for the target: the same runtime, what its kind needs, and the
    vocabulary rules (engine.models.vocabulary) over what each states."""
    if drafter.runtime is not target.runtime or fits(target, drafter)[1]:
        return False
    return all(r.holds for r in vocabulary_rules(vocabulary(target), vocabulary(drafter)))


def vocabularies(folders: dict[str, MlxFolder]) -> Callable[[ModelFacts], Vocabulary]:
    """Each model's vocabulary, read once when first asked: an MLX folder's from its files, a GGUF file's
    size from its header."""
    read: dict[str, Vocabulary] = {}

    def vocabulary(facts: ModelFacts) -> Vocabulary:
        key = str(facts.path)
        if key not in read:
            folder = folders.get(key)
            read[key] = folder_vocabulary(folder) if folder is not None else Vocabulary(size=facts.vocab_size)
        return read[key]

    return vocabulary


def _facts(model: LocalModel, folders: dict[str, MlxFolder]) -> ModelFacts | None:
    if model.is_folder:
        folder = read_mlx(model.path)
        if folder is None:
            return None
        folders[str(model.path)] = folder
        return mlx_facts(folder)
    try:
        return facts_of(model.path)
    except DraftlightError:
        return None


def print_local_models(say: Callable[[str], None] = print, models: list[LocalModel] | None = None) -> None:
    """The models on this machine, GGUF files and MLX folders alike, each with its drafters beneath it."""
    models = local_models() if models is None else models
    folders: dict[str, MlxFolder] = {}
    read = [(m, _facts(m, folders)) for m in models]
    described = [(m, f) for m, f in read if f is not None]
    refused = {m.path: mlx_compat.refusal(m.path) if m.is_folder else "" for m, _ in described}
    targets = [(m, f) for m, f in described if not f.kind.reads_target]
    drafters = [(m, f) for m, f in described if f.kind.reads_target]
    say(
        f"\nModels on this machine ({PLACES}, and MLX folders), by the names --target takes:"
        if described
        else f"\nNo models on this machine: none in {PLACES}."
    )
    placed: set[int] = set()
    vocabulary = vocabularies(folders)
    for m, target in targets:
        say(f"  {m.label()}: {m.path}")
        if refused[m.path]:
            say(f"    It will not load: {refused[m.path]}")
            continue
        for i, (d, drafter) in enumerate(drafters):
            if not refused[d.path] and fit(target, drafter, vocabulary):
                placed.add(i)
                say(f"    {kind_words(drafter)}, drafts for it: {d.label()}: {d.path}")
    left = [(d, f) for i, (d, f) in enumerate(drafters) if i not in placed]
    if left:
        say("Drafters that fit none of these models:")
    for d, drafter in left:
        say(f"  {kind_words(drafter)}: {d.label()}: {d.path}")
        if refused[d.path]:
            say(f"    It will not load: {refused[d.path]}")
