"""An MLX folder is checked here before mlx-lm or mlx-vlm sees it (and by the pairing doctor); no mlx import.

The folder is untrusted (a broken download, LM Studio's or the Hugging Face cache's files from
anyone). Its JSON files are read below a size cap and must be objects (the JSON parser's own
nesting limit bounds their depth); every number the model's construction depends on is an int
within bounds, and the layer count agrees with the weights; every safetensors file is a regular
file whose header is whole (dtypes known, shape x dtype = byte range, ranges inside the file and
not overlapping, the file exactly as long as the header says), a bounded number of them; the
memory the weights take is compared with what this process may use; a tokenizer module mlx-lm
would import by name must be one mlx-lm ships. Each fault is one ModelFileError sentence naming
the folder.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import resource
import stat
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from engine.errors import DraftlightError, ModelFileError

MAX_HEADER_BYTES = 16 << 20  # a shard of thousands of tensors needs well under 1 MB
MAX_SHARDS = 512
# The files mlx-lm, mlx-vlm and transformers read from a folder, and the most each may hold.
JSON_CAPS = {
    "config.json": 1 << 20,
    "generation_config.json": 1 << 20,
    "tokenizer_config.json": 8 << 20,  # a chat template may be inline
    "special_tokens_map.json": 1 << 20,
    "chat_template.json": 8 << 20,
    "tokenizer.json": 64 << 20,  # Gemma's 262,144-token tokenizer.json is about 32 MB
    "preprocessor_config.json": 1 << 20,
    "processor_config.json": 1 << 20,
}
OTHER_CAPS = {
    "chat_template.jinja": 8 << 20,
    "tokenizer.model": 64 << 20,
    "vocab.json": 64 << 20,
    "merges.txt": 64 << 20,
}
DTYPE_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1,
}  # fmt: skip
# (least, most) for each number a model's construction reads, wherever it stands in config.json.
BOUNDS = {
    "num_hidden_layers": (1, 1024),
    "num_layers": (1, 1024),
    "num_attention_heads": (1, 1024),
    "num_key_value_heads": (1, 1024),
    "hidden_size": (1, 1 << 17),
    "intermediate_size": (1, 1 << 20),
    "moe_intermediate_size": (1, 1 << 20),
    "vocab_size": (1, 1 << 22),
    "head_dim": (1, 1 << 14),
    "num_experts": (0, 4096),
    "num_local_experts": (0, 4096),
    "n_routed_experts": (0, 4096),
    "n_shared_experts": (0, 4096),
    "num_experts_per_tok": (0, 4096),
    "mtp_num_hidden_layers": (0, 64),
    "num_nextn_predict_layers": (0, 64),
    "block_size": (1, 1024),
    "max_position_embeddings": (1, 1 << 24),
    "sliding_window": (0, 1 << 24),
}
# The numbers no model is built without: present as null, they are damage, not a default.
BUILT_FROM = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads")
LAYER_LISTS = ("target_layer_ids", "layer_ids", "eagle_aux_hidden_state_layer_ids", "aux_hidden_state_layer_ids")
LAYER_NAME = re.compile(r"(?:^|\.)layers\.(\d+)\.")
MODULE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
MEMORY_HEADROOM = 512 << 20  # the interpreter, MLX and the KV cache's first pages beside the weights


@dataclass(frozen=True)
class Tensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


@dataclass(frozen=True)
class CheckedFolder:
    """What the check read: config.json, the tensors of every shard, and their bytes together."""

    path: Path
    config: dict
    tensors: tuple[Tensor, ...]
    weight_bytes: int


def check_folder(folder: str | Path, kind: str = "", error: type[DraftlightError] = ModelFileError) -> CheckedFolder:
    """The folder's config and tensors, once every check passes; else `error`, one sentence. `kind`
    names what the folder should be ("a DFlash drafter") where it is not a model of its own."""
    folder = Path(folder).expanduser()
    try:
        if not (folder / "config.json").is_file():
            what = f"{kind}'s" if kind else "an MLX model"
            raise ModelFileError(f"{folder} is not {what} folder: it has no config.json.")
        files = {name: _json_file(folder, name) for name in JSON_CAPS}
        for name, cap in OTHER_CAPS.items():
            _regular(folder, folder / name, cap)
        config = files["config.json"]
        _check_numbers(folder.name, config, "config.json")
        _check_tokenizer_modules(folder.name, files["tokenizer_config.json"])
        tensors, weight_bytes = _weights(folder)
        _check_layers(folder.name, config, tensors)
        _check_memory(folder.name, weight_bytes)
    except ModelFileError as e:
        if error is ModelFileError:
            raise
        raise error(str(e)) from None
    return CheckedFolder(folder, config, tuple(tensors), weight_bytes)


def _regular(folder: Path, path: Path, cap: int) -> int | None:
    """path's size where it is a regular file (links followed) of at most cap bytes; None where absent."""
    try:
        if not path.exists() and not path.is_symlink():
            return None
        info = path.resolve(strict=True).stat()
    except (OSError, RuntimeError):
        raise ModelFileError(
            f"{folder.name}'s {path.name} cannot be opened: it is a broken link or a link loop."
        ) from None
    if not stat.S_ISREG(info.st_mode):
        raise ModelFileError(f"{folder.name}'s {path.name} is not a regular file (a device, a folder or a pipe).")
    if info.st_size > cap:
        raise ModelFileError(
            f"{folder.name}'s {path.name} holds {info.st_size:,} bytes, past the {cap:,} such a file may hold."
        )
    return info.st_size


def _json_file(folder: Path, name: str) -> dict:
    cap = JSON_CAPS[name]
    if _regular(folder, folder / name, cap) is None:
        return {}
    try:
        with (folder / name).open("rb") as f:
            data = f.read(cap + 1)
        value = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise ModelFileError(f"{folder.name}'s {name} is nested too deep to be a real one.") from None
    except (OSError, ValueError, MemoryError) as e:
        raise ModelFileError(f"{folder.name}'s {name} is not JSON ({type(e).__name__}).") from None
    if not isinstance(value, dict):
        raise ModelFileError(f"{folder.name}'s {name} is a JSON {type(value).__name__}, not an object.")
    return value


def _check_numbers(folder: str, config: object, where: str, depth: int = 0) -> None:
    """Every bounded number, in config.json and in each object nested in it (text_config, dflash_config)."""
    if depth > 8:
        return  # no construction number lies this deep
    items = config.items() if isinstance(config, dict) else enumerate(config) if isinstance(config, list) else ()
    for key, value in items:
        if isinstance(value, (dict, list)):
            _check_numbers(folder, value, where, depth + 1)
        if depth == 0 and key in BUILT_FROM and value is None:
            raise ModelFileError(f"{folder}'s {where} gives {key} as null: no model can be built without it.")
        if not isinstance(key, str) or value is None:
            continue
        if key in BOUNDS:
            least, most = BOUNDS[key]
            numbers = value if isinstance(value, list) and 0 < len(value) <= 1024 else [value]  # per layer
            if not all(isinstance(n, int) and not isinstance(n, bool) for n in numbers):
                raise ModelFileError(f"{folder}'s {where} gives {key} as {_shown(value)}, not a whole number.")
            wrong = next((n for n in numbers if not least <= n <= most), None)
            if wrong is not None:
                raise ModelFileError(
                    f"{folder}'s {where} says {key} is {wrong:,}, outside {least:,} to {most:,}: not a real model."
                )
        elif key in LAYER_LISTS and not (
            isinstance(value, list) and len(value) <= 1024 and all(map(_layer_index, value))
        ):
            raise ModelFileError(f"{folder}'s {where} gives {key} as {_shown(value)}, not a list of layer numbers.")
    if isinstance(config, dict):
        heads, kv = config.get("num_attention_heads"), config.get("num_key_value_heads")
        if isinstance(heads, int) and isinstance(kv, int) and kv > heads:
            raise ModelFileError(f"{folder}'s {where} says {kv} key-value heads for {heads} attention heads.")
        layers = config.get("num_hidden_layers")
        for key in BOUNDS:  # a number given per layer gives one for each layer
            value = config.get(key)
            if isinstance(value, list) and isinstance(layers, int) and len(value) != layers:
                raise ModelFileError(
                    f"{folder}'s {where} gives {key} for {_count(len(value), 'layer')}, and the model has "
                    f"{_count(layers, 'layer')}."
                )
        tied = config.get("tie_word_embeddings")
        if tied is not None and not isinstance(tied, bool):
            raise ModelFileError(f"{folder}'s {where} gives tie_word_embeddings as {_shown(tied)}, not true or false.")
        value = config.get("model_type")
        if value is not None and (not isinstance(value, str) or not MODULE_NAME.fullmatch(value)):
            raise ModelFileError(f"{folder}'s {where} gives model_type as {_shown(value)}, not a name.")


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}" if n == 1 else f"{n:,} {what}s"


def _layer_index(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -1024 <= value <= 1024


def _shown(value: object) -> str:
    text = json.dumps(value) if isinstance(value, (str, int, float, bool)) else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def _check_tokenizer_modules(folder: str, config: dict) -> None:
    """mlx-lm imports mlx_lm.chat_templates.<chat_template_type> and mlx_lm.tool_parsers.<tool_parser_type>."""
    for key, package in (("chat_template_type", "chat_templates"), ("tool_parser_type", "tool_parsers")):
        name = config.get(key)
        if name is not None and (not isinstance(name, str) or name not in _shipped(package)):
            raise ModelFileError(
                f"{folder}'s tokenizer_config.json names a {key} mlx-lm does not have: {_shown(name)}."
            )


def _shipped(package: str) -> set[str]:
    """The modules of mlx_lm.<package>, from its folder (nothing imported)."""
    spec = importlib.util.find_spec("mlx_lm")
    if spec is None or not spec.submodule_search_locations:
        return set()
    found = set()
    for location in spec.submodule_search_locations:
        try:
            found |= {p.stem for p in (Path(location) / package).glob("*.py") if not p.stem.startswith("_")}
        except OSError:
            continue
    return found


def _weights(folder: Path) -> tuple[list[Tensor], int]:
    try:
        shards = []
        for path in folder.iterdir():
            if path.name.endswith(".safetensors"):
                shards.append(path)
                if len(shards) > MAX_SHARDS:
                    raise ModelFileError(
                        f"{folder.name} holds more than {MAX_SHARDS} safetensors files: not a model's weights."
                    )
    except OSError as e:
        raise ModelFileError(f"{folder.name} cannot be listed: {e.strerror or e}.") from None
    if not any(p.name.startswith("model") for p in shards):
        raise ModelFileError(f"{folder} has no model*.safetensors: convert the model to MLX first (mlx_lm.convert).")
    tensors: list[Tensor] = []
    total = 0
    for shard in sorted(shards):
        _regular(folder, shard, 1 << 50)
        found, size = _shard(folder.name, shard)
        tensors += found
        total += size
    return tensors, total


def _shard(folder: str, path: Path) -> tuple[list[Tensor], int]:
    """One safetensors file's tensors, checked whole, and the bytes of its data."""
    where = f"{folder}'s {path.name}"
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            start = f.read(8)
            if len(start) < 8:
                raise ModelFileError(f"{where} is cut short: {size} bytes, not even a safetensors header.")
            (length,) = struct.unpack("<Q", start)
            if length < 2 or length > MAX_HEADER_BYTES or 8 + length > size:
                raise ModelFileError(
                    f"{where} says its header is {length:,} bytes, and the file holds {size:,}: it is damaged."
                )
            raw = f.read(length)
        header = json.loads(raw.decode("utf-8"))
    except ModelFileError:
        raise
    except RecursionError:
        raise ModelFileError(f"{where}'s header is nested too deep to be a real one.") from None
    except (OSError, ValueError, MemoryError) as e:
        raise ModelFileError(f"{where}'s header is not JSON ({type(e).__name__}): the file is damaged.") from None
    if not isinstance(header, dict):
        raise ModelFileError(f"{where}'s header is not a JSON object: the file is damaged.")
    data_bytes = size - 8 - length
    tensors = []
    for name, entry in header.items():
        if name == "__metadata__":
            if entry is not None and not isinstance(entry, dict):
                raise ModelFileError(f"{where}'s header metadata is not an object: the file is damaged.")
            continue
        tensors.append(_tensor(where, name, entry, data_bytes))
    tensors.sort(key=lambda t: (t.begin, t.end))
    end = 0
    for tensor in tensors:
        if tensor.begin < end:
            raise ModelFileError(f"{where}'s tensor {tensor.name!r} overlaps the one before it: the file is damaged.")
        end = tensor.end
    if end != data_bytes:
        raise ModelFileError(
            f"{where}'s header accounts for {end:,} bytes of data and the file holds {data_bytes:,}: "
            "it is cut short or damaged."
        )
    return tensors, data_bytes


def _tensor(where: str, name: str, entry: object, data_bytes: int) -> Tensor:
    shown = name if len(name) <= 60 else name[:57] + "..."
    if not isinstance(entry, dict):
        raise ModelFileError(f"{where}'s tensor {shown!r} is not described by an object: the file is damaged.")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in DTYPE_BYTES:
        raise ModelFileError(f"{where}'s tensor {shown!r} has dtype {_shown(dtype)}, which no loader knows.")
    if not isinstance(shape, list) or len(shape) > 8 or not all(_whole(d) for d in shape):
        raise ModelFileError(f"{where}'s tensor {shown!r} has shape {_shown(shape)}, not a list of sizes.")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_whole(o) for o in offsets):
        raise ModelFileError(f"{where}'s tensor {shown!r} has offsets {_shown(offsets)}, not two byte positions.")
    begin, end = offsets
    if not begin <= end <= data_bytes:
        raise ModelFileError(
            f"{where}'s tensor {shown!r} lies at bytes {begin:,} to {end:,} of {data_bytes:,}: the file is cut short "
            "or damaged."
        )
    needed = math.prod(shape) * DTYPE_BYTES[dtype]
    if needed != end - begin:
        raise ModelFileError(
            f"{where}'s tensor {shown!r} of shape {shape} in {dtype} needs {needed:,} bytes and has {end - begin:,}."
        )
    return Tensor(name, dtype, tuple(shape), begin, end)


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 53


def _check_layers(folder: str, config: dict, tensors: list[Tensor]) -> None:
    """config.json's layer count no larger than the weights hold (mlx-lm builds every layer it is told of)."""
    # An MTP head's own layers (mtp.layers.N) are no layers of the model's trunk: its count is mtp_num_hidden_layers.
    trunk = [t for t in tensors if not t.name.startswith(("mtp.", "model.mtp.", "language_model.mtp."))]
    indices = [int(m.group(1)) for t in trunk if (m := LAYER_NAME.search(t.name))]
    text = found if isinstance(found := config.get("text_config"), dict) else {}
    claimed = [v for v in (config.get("num_hidden_layers"), text.get("num_hidden_layers")) if isinstance(v, int)]
    if indices and claimed and max(claimed) > max(indices) + 1:
        raise ModelFileError(
            f"{folder}'s config.json says {max(claimed):,} layers and its weights hold {max(indices) + 1:,}: "
            "the folder is incomplete or its config is wrong."
        )


def memory_limit() -> int:
    """Bytes this process may still take: the machine's memory, or less under an address-space cap."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        physical = 1 << 62
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return physical
    try:
        used = int(Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        used = 0
    return min(physical, soft - used)


def _check_memory(folder: str, weight_bytes: int) -> None:
    limit = memory_limit()
    if weight_bytes + MEMORY_HEADROOM > limit:
        raise ModelFileError(
            f"{folder}'s weights take {weight_bytes / 2**30:.1f} GiB and this process may use "
            f"{max(limit, 0) / 2**30:.1f} GiB here: pick a smaller or more quantized build."
        )


@contextmanager
def loader_errors(
    folder: Path, loader: str, error: type[DraftlightError] = ModelFileError, kind: str = ""
) -> Iterator[None]:
    """Whatever mlx-lm, mlx-vlm or MLX raise inside becomes one sentence naming the folder."""
    try:
        yield
    except DraftlightError:
        raise
    except Exception as e:  # a loader's failure of any kind is the folder's fault, said in a sentence
        raise error(f"{loader} could not load {folder.name}{' as ' + kind if kind else ''}: {one_line(e)}") from e


def one_line(e: BaseException) -> str:
    """An exception's message as one short line (its type's name where it says nothing)."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    text = lines[0] if lines else type(e).__name__
    return text if len(text) <= 200 else text[:197] + "..."
