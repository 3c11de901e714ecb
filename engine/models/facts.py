"""One description of a model file or folder, whatever its format: what the pairing rules (engine.models.rules),
`--drafter auto`, `models --list` and the pairing doctor read.

Each format has one small reader: a GGUF file's header (engine.runtime.gguf) and an MLX folder's config.json
and safetensors headers (engine.models.mlx_folders). Both are untrusted input read within bounds; a file or
folder that is not a model gives a ModelFileError with a sentence saying why, never a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.drafting import kinds
from engine.drafting.llama.dflash import LAYER_INPUT_ARCHITECTURES
from engine.errors import ModelFileError
from engine.models.mlx_folders import DRAFTER_WORDS, MlxFolder, read_folder, read_header, text_field
from engine.runtime.gguf import GGUFInfo, file_type_name, read_gguf
from engine.runtime.llama import RUNTIME as LLAMA_RUNTIME
from engine.runtime.mlx import RUNTIME as MLX_RUNTIME
from engine.runtime.mlx_check import check_folder
from engine.runtime.runtimes import Runtime

# An MLX folder's config.json names its drafter kind in a word (engine.models.mlx_folders.drafter_of).
MLX_KINDS = {"dflash": kinds.DFLASH, "dspark": kinds.DSPARK, "eagle3": kinds.EAGLE3, "assistant": kinds.ASSISTANT,
             "mtp": kinds.MTP}  # fmt: skip
ASSISTANT_TARGETS = frozenset({"gemma4", "gemma4_text"})  # the families a Gemma 4 assistant attends to
WIDTH_KEYS = ("target_hidden_size", "backbone_hidden_size")  # an MLX drafter's word for its target's width
SAID = {
    kinds.DFLASH: "a DFlash drafter",
    kinds.DSPARK: "a DSpark drafter",
    kinds.EAGLE3: "an EAGLE-3 drafter",
    kinds.ASSISTANT: "a Gemma 4 assistant model",
}


@dataclass(frozen=True)
class ModelFacts:
    """What a model file or folder is, as its headers say, in the same words for every format."""

    path: Path
    runtime: Runtime  # the runtime whose format it is
    name: str  # how a sentence names the file or folder: "dflash.gguf", "mlx-community/Qwen3-4B-4bit"
    called: str  # how a rule's clause names it as a target: a GGUF's general.name; an MLX folder "the target"
    architecture: str
    kind: kinds.DrafterKind  # MODEL for a chat model or a draft model of its own, else the drafter it is
    said: str  # its kind in words: "a DFlash drafter", "a draft model"
    size: int  # bytes of weights
    quantization: str  # "Q4_K_M", "4-bit", "bf16", or "" where nothing says
    vocab_size: int | None
    bos: int | None
    eos: frozenset[int]
    hidden_size: int | None  # its own width
    layers: int | None  # its own layers
    mtp_heads: int  # multi-token-prediction heads it carries for drafting for itself
    reads_width: int | None = None  # the width of the target whose hidden states it reads, where it says
    target_layers: tuple[int, ...] | None = None  # the target's layers it reads; None where it names none
    tapped_layers: tuple[int, ...] = ()  # layers before those whose outputs it also taps (MLX's EAGLE-3)
    reads_final_state: bool = False  # its layer index `depth` names the target's final hidden state
    layers_handed_out: bool = True  # as a target: whether its runtime hands out its layers' hidden states
    trained_layers: int | None = None  # the depth of the target it was trained on, where it says
    trunk_layers: int | None = None  # the layers a target's pass runs, its MTP heads' blocks apart (a GGUF's
    # block_count counts them); None where that is `layers`
    made_for_family: frozenset[str] = frozenset()  # the architectures it drafts for, where it says
    cache_shape: tuple[int | None, int | None] | None = None  # its cache's (KV heads, key length); an assistant's
    # is the target's it reads; None where its runtime does not share a cache
    vocab_map: tuple[int | None, int | None, int | None] | None = None  # EAGLE-3: (full, draft, d2t) vocabularies
    base_models: tuple[str, ...] = ()  # what its makers say it was trained from, or for
    kv_heads: int | None = None  # its KV cache's shape: heads, key and value widths
    key_dim: int | None = None
    value_dim: int | None = None
    attention_interval: int | None = None  # a hybrid's every n-th layer keeps a KV cache; None where all do


def kind_words(facts: ModelFacts) -> str:
    """ "a DFlash drafter, 1 layer", "an EAGLE-3 drafter, 1 layer": its kind, and its own layers where said."""
    layers = facts.layers
    return f"{facts.said}, {layers} layer{'s' if layers != 1 else ''}" if layers else facts.said


def facts_of(path: str | Path) -> ModelFacts:
    """The facts of the GGUF file or MLX folder at path; ModelFileError with a sentence where it is neither."""
    path = Path(path).expanduser()
    if MLX_RUNTIME.owns(path):
        return mlx_facts(checked_folder(path))
    return gguf_facts(read_gguf(path))


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def gguf_facts(info: GGUFInfo) -> ModelFacts:
    """The facts of a GGUF file from its header (read by engine.runtime.gguf.read_gguf)."""
    arch, meta = info.architecture, info.metadata

    def key(name: str) -> int | None:
        return _whole(meta.get(f"{arch}.{name}"))

    kind = kinds.kind_of_file(info, arch)
    heads, width = key("attention.head_count"), key("embedding_length")
    head_dim = width // heads if heads and width else None
    value = meta.get(f"{arch}.target_layers")
    reads = tuple(i for i in value if _whole(i) is not None) if isinstance(value, list) else None
    reads_width = {kinds.EAGLE3: key("target_hidden_size"), kinds.ASSISTANT: key("embedding_length_out")}
    vocab = info.array_lengths.get("tokenizer.ggml.tokens") or key("vocab_size")
    output = info.tensor_shapes.get("output.weight", ())
    d2t = info.tensor_shapes.get("d2t", ())
    draft = output[1] if len(output) == 2 else None
    vocab_map = (None if d2t else draft, draft, d2t[0] if len(d2t) == 1 else None) if kind is kinds.EAGLE3 else None
    eos = _whole(meta.get("tokenizer.ggml.eos_token_id"))
    bases = []
    for i in range(min(_whole(meta.get("general.base_model.count")) or 0, 64)):
        base = meta.get(f"general.base_model.{i}.name") or meta.get(f"general.base_model.{i}.repo_url")
        if isinstance(base, str) and base:
            bases.append(base)
    return ModelFacts(
        path=info.path,
        runtime=LLAMA_RUNTIME,
        name=info.path.name,
        called=info.name,
        architecture=arch,
        kind=kind,
        said=SAID.get(kind, "an MTP head in a file of its own" if kind is kinds.MTP else "a draft model"),
        size=info.actual_size,
        quantization=file_type_name(meta),
        vocab_size=vocab,
        bos=_whole(meta.get("tokenizer.ggml.bos_token_id")),
        eos=frozenset({eos} if eos is not None else ()),
        hidden_size=key("embedding_length"),
        layers=key("block_count"),
        trunk_layers=(key("block_count") or 0) - info.nextn_layers if info.nextn_layers else None,
        mtp_heads=info.nextn_layers,
        reads_width=reads_width.get(kind, key("embedding_length")) if kind.reads_target else None,
        target_layers=reads,
        reads_final_state=kind is kinds.EAGLE3,
        layers_handed_out=arch in LAYER_INPUT_ARCHITECTURES,
        made_for_family=ASSISTANT_TARGETS if kind is kinds.ASSISTANT else frozenset({arch}) if kind is kinds.MTP else frozenset(),
        cache_shape=(key("attention.head_count_kv"), key("attention.key_length")),
        vocab_map=vocab_map,
        base_models=tuple(bases),
        kv_heads=key("attention.head_count_kv") or heads,  # an array per layer reads as absent: the heads
        key_dim=key("attention.key_length") or head_dim,
        value_dim=key("attention.value_length") or head_dim,
        attention_interval=_interval(key("full_attention_interval")),
    )  # fmt: skip


def own_root(folder: Path) -> Path:
    """The root a folder's files may be read inside: a Hugging Face snapshot's repository (its files are
    symlinks into ../../blobs), else the folder itself."""
    return folder.parents[1] if folder.parent.name == "snapshots" else folder


def read_mlx(path: str | Path) -> MlxFolder | None:
    """The MLX folder at path, read within its own root; None where it is not one."""
    folder = Path(path).expanduser()
    return read_folder(folder, own_root(folder))


def checked_folder(path: str | Path) -> MlxFolder:
    """A folder's description once the MLX loaders' check passes (engine.runtime.mlx_check); else
    ModelFileError with the check's sentence, or one saying the folder is not one MLX loads."""
    check_folder(path)
    folder = read_mlx(path)
    if folder is None:
        raise ModelFileError(f"{Path(path).name} is not an MLX model folder this can read.")
    return folder


def name_of(folder: MlxFolder) -> str:
    """A folder's name as `models --list` shows it: a Hugging Face cache snapshot by its repository's."""
    parts = folder.path.parts
    if folder.path.parent.name == "snapshots" and parts[-3].startswith("models--"):
        return parts[-3][len("models--") :].replace("--", "/")
    return folder.path.name


def mlx_facts(folder: MlxFolder) -> ModelFacts:
    """The facts of an MLX folder from its config.json and safetensors headers (engine.models.mlx_folders)."""
    config = folder.config
    kind = MLX_KINDS.get(folder.drafter, kinds.MODEL)
    flash = config.get("dflash_config")
    flash = flash if isinstance(flash, dict) else {}
    width = next((v for v in (_whole(config.get(k)) for k in WIDTH_KEYS) if v), None)
    if width is None and kind is not kinds.ASSISTANT:  # DFlash, DSpark and MTP heads run at the target's width
        width = folder.hidden_size
    reads: object = None
    tapped: object = None
    if kind in (kinds.DFLASH, kinds.DSPARK):
        reads = flash.get("target_layer_ids", config.get("target_layer_ids"))
    elif kind is kinds.EAGLE3:  # and the layers before them whose outputs it taps (mlx-vlm's capture_layer_ids)
        reads = config.get("target_layer_ids") or config.get("eagle_aux_hidden_state_layer_ids")
        tapped = config.get("capture_layer_ids")
    layer = config.get("transformer_layer_config")  # EAGLE-3 describes its own layers there
    layer = layer if isinstance(layer, dict) else {}
    full = _whole(layer.get("vocab_size"))
    vocab_map = (
        (full, _whole(config.get("draft_vocab_size", full)), _d2t_size(folder)) if kind is kinds.EAGLE3 else None
    )
    heads = _positive(config, "num_attention_heads")
    head_dim = _positive(config, "head_dim") or (folder.hidden_size // heads if heads and folder.hidden_size else None)
    eos_value = config.get("eos_token_id")
    eos_ids = [_whole(i) for i in (eos_value if isinstance(eos_value, list) else [eos_value])]
    eos = frozenset(i for i in eos_ids if i is not None and i >= 0)
    return ModelFacts(
        path=folder.path,
        runtime=MLX_RUNTIME,
        name=name_of(folder),
        called="the target",
        architecture=folder.architecture,
        kind=kind,
        said=DRAFTER_WORDS.get(folder.drafter, "a draft model"),
        size=folder.size,
        quantization=folder.words(),
        vocab_size=folder.vocab_size,
        bos=_whole(text_field(config, "bos_token_id")),
        eos=eos,
        hidden_size=folder.hidden_size,
        layers=folder.layers or _whole(layer.get("num_hidden_layers")),
        mtp_heads=folder.mtp_layers if folder.mtp_weights else 0,
        reads_width=width if kind.reads_target else None,
        target_layers=_layers(reads),
        tapped_layers=_layers(tapped) or (),
        trained_layers=_whole(config.get("num_target_layers", flash.get("num_target_layers"))),
        made_for_family=ASSISTANT_TARGETS if kind is kinds.ASSISTANT else frozenset(),
        vocab_map=vocab_map,
        kv_heads=_positive(config, "num_key_value_heads") or heads,
        key_dim=head_dim,
        value_dim=head_dim,
        attention_interval=_interval(_positive(config, "full_attention_interval")),
    )  # fmt: skip


def _positive(config: dict, key: str) -> int | None:
    """A count config.json (or its text_config) gives, where it is a positive whole number."""
    value = _whole(text_field(config, key))
    return value if value is not None and value > 0 else None


def _interval(value: int | None) -> int | None:
    return value if value is not None and value > 1 else None


def _layers(value: object) -> tuple[int, ...] | None:
    return tuple(i for i in value if _whole(i) is not None) if isinstance(value, list) else None


def _d2t_size(folder: MlxFolder) -> int | None:
    """The length of the folder's `d2t` tensor, from its safetensors headers; None where it has none."""
    for path in folder.weights:
        header = read_header(path)
        shape = header.tensors.get("d2t", (None, ()))[1] if header is not None else ()
        if len(shape) == 1:
            return shape[0]
    return None
