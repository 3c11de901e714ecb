"""What an MLX model folder is, read from its config.json and its safetensors headers alone (no mlx import).

A folder counts as an MLX model when it holds a config.json and *.safetensors weights, and one of:
  1. config.json carries a `quantization` object with integer `bits` and `group_size` (mlx_lm.convert
     writes it; transformers never does: its quantized checkpoints say `quantization_config`);
  2. a safetensors header's `__metadata__` says `"format": "mlx"` (every file mlx_lm saves, quantized
     or not; PyTorch writes "pt");
  3. the weights come in MLX's quantized triplets: `X.weight` beside `X.scales` and `X.biases`;
  4. config.json describes a drafter that MLX runtimes load as published (DFlash, DSpark, EAGLE-3, a
     Gemma 4 assistant, a Qwen MTP head), whatever its header's format.
A transformers/PyTorch checkpoint (format "pt" or none, no `quantization`) is not one: it is left out.

Every file here is untrusted: config.json is read only below a size cap and must be a JSON object
whose fields have the types expected; a safetensors header is its 8-byte little-endian length, then
JSON of that length, refused past a cap or past the file's end. Files are read only where their
real path (symlinks resolved: the Hugging Face cache's snapshots point into blobs/) lies inside the
root being searched. A folder that fails any of this is None, never an exception.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from engine.runtime.mlx_check import MAX_HEADER_BYTES, MAX_SHARDS

MAX_CONFIG_BYTES = 1 << 20  # a real config.json is a few kB
MAX_TOKENIZER_BYTES = 64 << 20  # Gemma's 262,144-token tokenizer.json is about 32 MB
MAX_COUNT = 1 << 40  # a layer count, a width or a vocabulary size past this is not a real one
DRAFTER_ARCHITECTURES = {"DFlashDraftModel": "dflash", "DSparkDraftModel": "dspark"}
DRAFTER_MODEL_TYPES = {
    "dflash": "dflash",
    "dspark": "dspark",
    "gemma4_assistant": "assistant",
    "gemma4_unified_assistant": "assistant",
    "eagle3": "eagle3",
}
MTP_KEYS = ("mtp_num_hidden_layers", "num_nextn_predict_layers")
DRAFTER_WORDS = {"dflash": "a DFlash drafter", "dspark": "a DSpark drafter", "eagle3": "an EAGLE-3 drafter",
                 "assistant": "a Gemma 4 assistant model", "mtp": "an MTP head in a folder of its own"}  # fmt: skip


@dataclass(frozen=True)
class Quantization:
    bits: int
    group_size: int
    mode: str = "affine"

    def words(self) -> str:
        """ "4-bit" for affine quantization, else the mode's name ("mxfp4")."""
        return f"{self.bits}-bit" if self.mode == "affine" else self.mode


@dataclass(frozen=True)
class MlxFolder:
    """An MLX model folder, as its headers describe it."""

    path: Path
    architecture: str  # config.json's model_type, or its text_config's
    quantization: Quantization | None
    weights: tuple[Path, ...]  # the safetensors files, real paths
    size: int  # their bytes together
    vocab_size: int | None
    hidden_size: int | None
    layers: int | None
    mtp_layers: int  # multi-token-prediction layers config.json declares
    mtp_weights: bool  # whether the weights carry them (mlx-community's conversions leave them out)
    drafter: str  # "dflash", "dspark", "eagle3", "assistant", "mtp" (heads alone) or "" for a model of its own
    config: dict
    packed: bool = False  # quantized weights (scales and biases beside them), whether config.json says so or not

    def words(self) -> str:
        """ "4-bit", "mxfp4", "bf16" (unquantized, as config.json's dtype says), or "" where nothing says."""
        if self.quantization is not None:
            return self.quantization.words()
        if self.packed:
            return ""  # quantized, to a width nothing states
        dtype = self.config.get("torch_dtype") or self.config.get("dtype")
        return {"bfloat16": "bf16", "float16": "f16", "float32": "f32"}.get(dtype, "") if isinstance(dtype, str) else ""


@dataclass(frozen=True)
class Header:
    metadata: dict[str, str]
    tensors: dict[str, tuple[str, tuple[int, ...]]]  # name -> (dtype, shape)


def inside(path: Path, root: Path) -> Path | None:
    """path's real location if it lies inside root (itself resolved), else None."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError):
        return None
    return real if real.is_relative_to(root) and real.is_file() else None


def read_json(path: Path, cap: int) -> dict | None:
    """The JSON object in path, or None: larger than cap, not UTF-8, not JSON, too deep, not an object."""
    try:
        with path.open("rb") as f:
            if os.fstat(f.fileno()).st_size > cap:
                return None
            data = f.read(cap + 1)
        if len(data) > cap:
            return None
        value = json.loads(data.decode("utf-8"))
    except (OSError, ValueError, RecursionError, MemoryError):
        return None
    return value if isinstance(value, dict) else None


def read_header(path: Path) -> Header | None:
    """A safetensors file's header, or None where it is not one a loader would accept."""
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            start = f.read(8)
            if len(start) < 8:
                return None
            (length,) = struct.unpack("<Q", start)
            if length < 2 or length > MAX_HEADER_BYTES or 8 + length > size:
                return None
            raw = f.read(length)
        if len(raw) != length:
            return None
        value = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(value, dict):
        return None
    data_bytes = size - 8 - length
    metadata: dict[str, str] = {}
    tensors: dict[str, tuple[str, tuple[int, ...]]] = {}
    for name, entry in value.items():
        if name == "__metadata__":
            if isinstance(entry, dict):
                metadata = {k: v for k, v in entry.items() if isinstance(k, str) and isinstance(v, str)}
            elif entry is not None:
                return None
            continue
        if not isinstance(entry, dict):
            return None
        dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if not isinstance(dtype, str) or not isinstance(shape, list) or not isinstance(offsets, list):
            return None
        if not all(_count(d, zero=True) is not None for d in shape) or len(offsets) != 2:
            return None
        first, last = (_count(o, zero=True) for o in offsets)
        if first is None or last is None or not first <= last <= data_bytes:
            return None
        tensors[name] = (dtype, tuple(shape))
    return Header(metadata, tensors)


def _count(value: object, zero: bool = False) -> int | None:
    """value where it is a plain int in a sane range (positive, or also 0 where `zero`), else None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if (0 if zero else 1) <= value < MAX_COUNT else None


def text_field(config: dict, key: str) -> object:
    """A field of config.json, or of its text_config (a vision-language model's language half)."""
    if key in config:
        return config[key]
    text = config.get("text_config")
    return text.get(key) if isinstance(text, dict) else None


def quantization_of(config: dict) -> Quantization | None:
    """config.json's `quantization` {bits, group_size, mode}, or None where absent or malformed."""
    q = config.get("quantization")
    if not isinstance(q, dict):
        return None
    bits, group = _count(q.get("bits")), _count(q.get("group_size"))
    mode = q.get("mode", "affine")
    if bits is None or group is None or bits > 16 or group > 1 << 16 or not isinstance(mode, str) or len(mode) > 32:
        return None
    return Quantization(bits, group, mode)


def drafter_of(config: dict, names: set[str]) -> str:
    """What kind of drafter config.json and the tensor names say the folder is; "" for a model of its own."""
    architectures = config.get("architectures")
    for name in architectures if isinstance(architectures, list) else ():
        if isinstance(name, str) and name in DRAFTER_ARCHITECTURES:
            return "dspark" if any("markov" in n for n in names) else DRAFTER_ARCHITECTURES[name]
    model_type = config.get("model_type")
    if isinstance(model_type, str):
        if model_type in DRAFTER_MODEL_TYPES:
            return DRAFTER_MODEL_TYPES[model_type]
        if model_type.endswith("_mtp"):
            return "mtp"
    if isinstance(config.get("dflash_config"), dict):
        return "dspark" if any("markov" in n for n in names) else "dflash"
    if names and all(n.startswith("mtp.") for n in names):
        return "mtp"
    return ""


def weight_bits(headers: list[Header], group_size: int | None) -> int | None:
    """The width the packed weights have (the most common, where layers differ), from their shapes: a
    uint32 row of c words packs 32*c bits for s groups of `group_size` values (64, 32 or 128 tried
    where none is given); None where nothing is packed as an affine triplet."""
    tensors = {name: entry for h in headers for name, entry in h.tensors.items()}
    counts: dict[int, int] = {}
    for name, (dtype, shape) in tensors.items():
        if not name.endswith(".scales") or dtype == "U8":  # mxfp4's scales are uint8 and it has no biases
            continue
        weight = tensors.get(name[: -len(".scales")] + ".weight")
        if weight is None or weight[0] != "U32" or not weight[1] or not shape or shape[-1] == 0:
            continue
        for group in (group_size,) if group_size else (64, 32, 128):
            bits, rest = divmod(32 * weight[1][-1], shape[-1] * group)
            if not rest and bits in (1, 2, 3, 4, 5, 6, 8):
                counts[bits] = counts.get(bits, 0) + 1
                break
    return max(counts, key=lambda b: counts[b]) if counts else None


def _quantized_triplets(names: set[str]) -> bool:
    return any(n.endswith(".scales") and n[: -len(".scales")] + ".biases" in names for n in names)


def read_folder(folder: Path, root: Path) -> MlxFolder | None:
    """The MLX model in folder (see the module's rule), reading only files whose real path is inside root."""
    try:
        root = root.resolve()
        config_path = inside(folder / "config.json", root)
        shards = sorted(p for p in folder.glob("*.safetensors"))
    except (OSError, RuntimeError):
        return None
    if config_path is None or not shards or len(shards) > MAX_SHARDS:
        return None
    config = read_json(config_path, MAX_CONFIG_BYTES)
    if config is None:
        return None
    weights: list[Path] = []
    headers: list[Header] = []
    for shard in shards:
        real = inside(shard, root)
        header = read_header(real) if real is not None else None
        if real is None or header is None:
            return None  # a shard missing, outside the root or damaged: not a model MLX could load
        weights.append(real)
        headers.append(header)
    names = {name for h in headers for name in h.tensors}
    quantization = quantization_of(config)
    drafter = drafter_of(config, names)
    packed = _quantized_triplets(names)
    stated = quantization.group_size if quantization is not None and quantization.mode == "affine" else None
    bits = weight_bits(headers, stated) if packed and stated else None
    if bits is not None:  # the weights' own width, whatever config.json claims (mlx-lm builds from it)
        quantization = Quantization(bits, stated or 64)
    is_mlx = (
        quantization is not None or any(h.metadata.get("format") == "mlx" for h in headers) or packed or bool(drafter)
    )
    if not is_mlx:
        return None
    architecture = text_field(config, "model_type")
    if not isinstance(architecture, str) or not architecture or len(architecture) > 128:
        return None
    try:
        size = sum(p.stat().st_size for p in dict.fromkeys(weights))
    except OSError:
        return None
    mtp = next((n for n in (_count(text_field(config, k)) for k in MTP_KEYS) if n is not None), 0)
    return MlxFolder(
        path=folder,
        architecture=architecture,
        quantization=quantization,
        weights=tuple(weights),
        size=size,
        vocab_size=_count(text_field(config, "vocab_size")),
        hidden_size=_count(text_field(config, "hidden_size")),
        layers=_count(text_field(config, "num_hidden_layers")),
        mtp_layers=mtp if mtp <= 64 else 0,
        mtp_weights=any(n.startswith("mtp.") or ".mtp." in n for n in names),
        drafter=drafter,
        config=config,
        packed=packed,
    )


def folders_under(root: Path, max_depth: int = 6) -> list[Path]:
    """Folders under root (root itself included) holding a config.json, a few levels deep; a folder
    symlink is followed only where it leads inside root; hidden folders (.git, .locks) are skipped."""
    try:
        real_root = root.resolve()
        if not real_root.is_dir():
            return []
    except (OSError, RuntimeError):
        return []
    found: list[Path] = []
    stack, seen = [(root, 0)], {real_root}
    while stack:
        folder, depth = stack.pop()
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            continue
        if any(e.name == "config.json" for e in entries):
            found.append(folder)
        if depth >= max_depth:
            continue
        for entry in entries:
            if entry.name.startswith(".") or entry.name == "blobs":
                continue
            try:
                real = entry.resolve()
                if not entry.is_dir() or real in seen or not real.is_relative_to(real_root):
                    continue
            except (OSError, RuntimeError):
                continue
            seen.add(real)
            stack.append((entry, depth + 1))
    return sorted(found)
