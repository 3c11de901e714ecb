"""The one table of drafter kinds: each kind's name, its words, what it reads of the target, and its
loader on each runtime (LOADERS, a (kind, runtime) map).

As llama.cpp's `common_speculative_type` with its one from-name/to-string pair: every place that
names a kind (the loader, discovery, the pairing doctor, the ruler, the server, the app's
status bar and verdicts) asks this table. A new kind is one entry here and one module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, cast

from engine.depth import MAX_DEPTH
from engine.drafting import kindnames
from engine.drafting.base import Drafter, OwnPace
from engine.drafting.llama.dflash import DflashDrafter
from engine.drafting.llama.eagle3 import Eagle3Drafter
from engine.drafting.llama.mtp import ASSISTANT_ARCHITECTURES, MtpDrafter
from engine.drafting.model import ModelDrafter
from engine.drafting.ngram import NgramDrafter
from engine.errors import IncompatibleDrafter
from engine.runtime import Context, Model, RuntimeContext
from engine.runtime.gguf import GGUFInfo
from engine.runtime.llama import RUNTIME as LLAMA_RUNTIME
from engine.runtime.loading import runtime_named
from engine.runtime.mlx.runtime import RUNTIME as MLX_RUNTIME
from engine.runtime.protocol import RunOptions, TextModel
from engine.runtime.runtimes import Runtime

if TYPE_CHECKING:
    from engine.runtime.mlx.context import MlxContext

# (the target's context, the drafter's own file loaded or None, the options, the deepest draft); on
# MLX the drafter's own file is its folder, a Path, which the loader reads with mlx-vlm. The target's
# context is None only for a kind that does not read it (engine.pairloading passes one to every other).
Loader = Callable[[RuntimeContext | None, TextModel | Path | None, RunOptions, int], Drafter]

Mine = TypeVar("Mine", bound=OwnPace)  # a drafter in a folder of its own
Built = TypeVar("Built", bound=Drafter)


@dataclass(frozen=True)
class DrafterKind:
    """One kind of drafter."""

    name: str  # what the command line, the server, profiles and events call it
    label: str  # the status bar's words: "n-grams", "the target's MTP head"
    words: str  # what it is, in the pairing doctor's sentence: "The drafter is {words}."
    reads: str = ""  # what it reads of the target, in a sentence; "" for one that reads nothing
    spec_type: str | None = None  # stock llama.cpp's --spec-type for it, where llama.cpp has it
    keyword: bool = False  # named by its name alone (no file): "none", "ngram", "mtp"
    picked: str = ""  # a keyword kind's entry in the app's drafter picker
    chosen: str = ""  # what the app says of a keyword kind once it is loaded: its whole verdict

    @property
    def reads_target(self) -> bool:
        """Whether it reads the target's insides (hidden states, layers, memory): made for one target."""
        return bool(self.reads)


def _llama_target(target: RuntimeContext | None) -> Context:
    """The target's llama.cpp context: off MLX, a kind that reads the target is loaded beside it."""
    assert isinstance(target, Context)
    return target


def _llama_file(model: TextModel | Path | None) -> Model | None:
    """The drafter's own file off MLX: a llama.cpp model loaded by engine.pairloading, or None."""
    assert model is None or isinstance(model, Model)
    return model


def _drafter_file(model: TextModel | Path | None) -> Model:
    """A drafter's own llama.cpp file, which `load` asks for of every kind that reads the target but MTP."""
    file = _llama_file(model)
    assert file is not None
    return file


def _model(target: RuntimeContext | None, model: TextModel | Path | None, options: RunOptions, depth: int) -> Drafter:
    assert model is not None and not isinstance(model, Path)  # a draft model is loaded before its kind's loader runs
    return ModelDrafter(model, options, max_depth=depth)


def _ngram(target: RuntimeContext | None, model: TextModel | Path | None, options: RunOptions, depth: int) -> Drafter:
    return NgramDrafter()


def _mlx_target(target: RuntimeContext | None) -> MlxContext:
    """The target's MLX context: an MLX drafter's loader runs beside an MLX target (LOADERS)."""
    assert target is not None
    return cast("MlxContext", target)


def _folder(model: TextModel | Path | None) -> Path:
    """An MLX drafter's folder: the path itself, or where a loaded model came from."""
    path = model if isinstance(model, Path) else getattr(model, "path", None)
    if path is None:
        raise IncompatibleDrafter("An MLX drafter is read from its own folder: name the folder.")
    return Path(path)


def _built(folder: Path, what: str, build: Callable[[], Built]) -> Built:
    """An MLX drafter made from its folder: whatever mlx-vlm's module raises while it is bound to the target
    (a config field of the wrong kind, a shape its weights cannot take) is one sentence naming the folder."""
    from engine.runtime.mlx_check import loader_errors

    with loader_errors(folder, "mlx-vlm", IncompatibleDrafter, what):
        return build()


def _from(folder: Path, drafter: Mine) -> Mine:
    """A drafter in a folder of its own, which remembers it: the acceptance ledger fingerprints it."""
    drafter.folder = folder
    return drafter


def _llama_heads(
    target: RuntimeContext | None, model: TextModel | Path | None, options: RunOptions, depth: int
) -> Drafter:
    """The target's own MTP heads, or a file of them (or of Gemma 4's assistant) beside it, on llama.cpp."""
    return MtpDrafter(_llama_target(target), max_depth=depth, sidecar=_llama_file(model))


def _mlx_heads(
    target: RuntimeContext | None, model: TextModel | Path | None, options: RunOptions, depth: int
) -> Drafter:
    from engine.drafting.mlx.mtp import MlxMtpDrafter, load_heads

    mlx_target = _mlx_target(target)
    if model is not None:
        raise IncompatibleDrafter(
            "The MLX runtime reads MTP heads from the target's own folder, and runs no MTP heads from a "
            "file of their own: choose 'mtp' alone, a Gemma 4 assistant, EAGLE-3, DFlash or a draft model."
        )
    if mlx_target.model.path is None:
        raise IncompatibleDrafter(f"{mlx_target.model.name} was not loaded from a folder: it has no MTP head to read.")
    folder = Path(mlx_target.model.path)
    return _built(folder, "an MTP head", lambda: MlxMtpDrafter(mlx_target, load_heads(folder), max_depth=depth))


def _mlx_assistant(
    target: RuntimeContext | None, model: TextModel | Path | None, options: RunOptions, depth: int
) -> Drafter:
    from engine.drafting.mlx.assistant import MlxAssistantDrafter, load_assistant

    folder = _folder(model)
    return _from(folder, _built(folder, "a Gemma 4 assistant", lambda: MlxAssistantDrafter(
        _mlx_target(target), load_assistant(folder), max_depth=depth, source=folder.name)))  # fmt: skip


def _llama_dflash(
    target: RuntimeContext | None, model: TextModel | Path | None, options: RunOptions, depth: int
) -> Drafter:
    return DflashDrafter(_drafter_file(model), _llama_target(target), max_depth=depth)


def _mlx_dflash(
    target: RuntimeContext | None, model: TextModel | Path | None, options: RunOptions, depth: int
) -> Drafter:
    from engine.drafting.mlx.dflash import MlxDflashDrafter, load_dflash

    folder = _folder(model)
    return _from(folder, _built(folder, "a DFlash drafter", lambda: MlxDflashDrafter(
        _mlx_target(target), load_dflash(folder), max_depth=depth, source=folder.name)))  # fmt: skip


def _llama_eagle3(
    target: RuntimeContext | None, model: TextModel | Path | None, options: RunOptions, depth: int
) -> Drafter:
    return Eagle3Drafter(_drafter_file(model), _llama_target(target), max_depth=depth)


def _mlx_eagle3(
    target: RuntimeContext | None, model: TextModel | Path | None, options: RunOptions, depth: int
) -> Drafter:
    from engine.drafting.mlx.eagle3 import MlxEagle3Drafter, load_eagle3

    folder = _folder(model)
    return _from(folder, _built(folder, "an EAGLE-3 drafter", lambda: MlxEagle3Drafter(
        _mlx_target(target), load_eagle3(folder), max_depth=depth, source=folder.name)))  # fmt: skip


NONE = DrafterKind(
    kindnames.NONE,
    "no drafter",
    "no drafter: every token is a plain target pass",
    keyword=True,
    picked="None (speculation off)",
    chosen="No drafter: every token comes from a plain target pass.",
)
MODEL = DrafterKind(kindnames.MODEL, "a draft model", "a draft model of its own", spec_type="draft-simple")
NGRAM = DrafterKind(
    kindnames.NGRAM,
    "n-grams",
    "an n-gram table of the conversation's own tokens (no model)",
    keyword=True,
    picked="n-gram prompt lookup (no model)",
    chosen="The n-gram drafter needs no model: it proposes text seen earlier.",
)
MTP = DrafterKind(
    kindnames.MTP,
    "the target's MTP head",
    "the target's multi-token-prediction heads",
    reads="The target's own MTP heads, in a file of their own: they read its hidden states.",
    spec_type="draft-mtp",
    keyword=True,
    picked="The target's own MTP head (Qwen 3.5 and others)",
    chosen="The target drafts for itself with the MTP head in its own file: nothing to match.",
)
ASSISTANT = DrafterKind(
    kindnames.ASSISTANT,
    "Gemma 4's assistant",
    "a Gemma 4 assistant model, which reads the target's hidden state",
    reads="Gemma 4's assistant model: it reads the target's hidden state and attends to its memory.",
    spec_type="draft-mtp",
)
DFLASH = DrafterKind(
    kindnames.DFLASH,
    "DFlash",
    "a DFlash drafter, which reads the target's layers",
    reads="A DFlash drafter: a block of drafts in one pass, from the target's layers.",
    spec_type="draft-dflash",
)
DSPARK = DrafterKind(
    kindnames.DSPARK,
    "DSpark",
    "a DSpark drafter, which reads the target's layers",
    reads="A DSpark drafter (DFlash with a Markov head): a block of drafts from the target's layers.",
    spec_type="draft-dspark",
)
EAGLE3 = DrafterKind(
    kindnames.EAGLE3,
    "EAGLE-3",
    "an EAGLE-3 drafter, which reads three of the target's layers",
    reads="An EAGLE-3 drafter: it reads three of the target's layers.",
    spec_type="draft-eagle3",
)

DFLASH_ARCHITECTURES = frozenset({"dflash"})  # GGUF architectures of each kind's files
EAGLE3_ARCHITECTURES = frozenset({"eagle3"})
# In the order the app's picker lists the keyword kinds: no drafter last.
KINDS: dict[str, DrafterKind] = {k.name: k for k in (MODEL, NGRAM, MTP, ASSISTANT, DFLASH, DSPARK, EAGLE3, NONE)}
KEYWORDS = tuple(k.name for k in KINDS.values() if k.keyword)  # the kinds a spec names without a file
AUTO_SPEC = "auto"  # a spec that names no kind: find a drafter for the target (engine.models.discover)


def kind_named(name: str) -> DrafterKind | None:
    """The kind called `name`, or None."""
    return KINDS.get(name)


def label(name: str) -> str:
    """The status bar's words for a kind (the name itself for one this table does not know)."""
    kind = KINDS.get(name)
    return kind.label if kind is not None else name


def heads_alone(info: GGUFInfo) -> bool:
    """A file of multi-token-prediction heads without a model's layers (as llama.cpp tells them apart)."""
    return bool(info.nextn_layers) and "blk.0.attn_norm.weight" not in info.tensor_names


def kind_of_file(side: GGUFInfo, target_architecture: str) -> DrafterKind:
    """The kind of drafter a GGUF file is, from its header, for a target of `target_architecture`."""
    arch = side.architecture
    if arch in DFLASH_ARCHITECTURES:
        return DSPARK if "markov_w1.weight" in side.tensor_names else DFLASH
    if arch in EAGLE3_ARCHITECTURES:
        return EAGLE3
    if arch in ASSISTANT_ARCHITECTURES:
        return ASSISTANT
    if heads_alone(side) and arch == target_architecture:
        return MTP
    return MODEL


# Each kind's loader on each runtime: a kind a runtime cannot run has no entry ("none" has none anywhere).
LOADERS: dict[tuple[str, Runtime], Loader] = {
    **{(MODEL.name, runtime): _model for runtime in (LLAMA_RUNTIME, MLX_RUNTIME)},
    **{(NGRAM.name, runtime): _ngram for runtime in (LLAMA_RUNTIME, MLX_RUNTIME)},
    (MTP.name, LLAMA_RUNTIME): _llama_heads,
    (MTP.name, MLX_RUNTIME): _mlx_heads,
    (ASSISTANT.name, LLAMA_RUNTIME): _llama_heads,  # llama.cpp runs Gemma 4's assistant as MTP heads
    (ASSISTANT.name, MLX_RUNTIME): _mlx_assistant,
    **{(kind.name, LLAMA_RUNTIME): _llama_dflash for kind in (DFLASH, DSPARK)},
    **{(kind.name, MLX_RUNTIME): _mlx_dflash for kind in (DFLASH, DSPARK)},
    (EAGLE3.name, LLAMA_RUNTIME): _llama_eagle3,
    (EAGLE3.name, MLX_RUNTIME): _mlx_eagle3,
}


def load(
    kind: DrafterKind,
    target: RuntimeContext | None,
    model: TextModel | Path | None,
    options: RunOptions,
    max_depth: int = MAX_DEPTH,
) -> Drafter | None:
    """The drafter of `kind` on the target's context (and `model`, its own file, where it has one), by its
    loader on the runtime the options are for (LOADERS)."""
    if kind is NONE:
        return None
    if kind.reads_target and kind is not MTP and model is None:
        raise IncompatibleDrafter(f"{kind.words.capitalize()} comes in a file of its own: name the file.")
    runtime = runtime_named(options.runtime)
    loader = LOADERS.get((kind.name, runtime))
    if loader is None:
        raise IncompatibleDrafter(f"{kind.words.capitalize()} does not draft on {runtime.label}.")
    return loader(target, model, options, max_depth)
