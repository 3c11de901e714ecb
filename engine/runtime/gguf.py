"""A small GGUF header reader: enough to validate a file before llama.cpp sees it.

It reads the key/value metadata and the tensor table, and from them the size the file
must have. A text file renamed to .gguf, a download cut short and a damaged header are
each caught here with a sentence that says which, instead of a failed load (or an abort)
deep inside llama.cpp.

Model files come from strangers, so every count, length and dimension is bounded by what
the file's size allows before anything is read or allocated: a string can be no longer
than the bytes left, an array can hold no more items than the bytes left could spell, a
tensor has at most GGML_MAX_DIMS dimensions, and its data must lie inside the file. Every
loop therefore ends within the file, and nothing read is larger than the file. A claim
past the file's end is "cut short" where an honest writer could have made it (the file
then simply ends early) and "damaged" where no writer would (a count or length past the
sanity limits below, an unknown type, an impossible shape or offset).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from engine.errors import ModelFileError

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
GGML_MAX_DIMS = 4  # ggml.h: a tensor has at most 4 dimensions
GGML_MAX_NAME = 64  # ggml.h: a tensor's name, with its terminating zero
INT64_MAX = (1 << 63) - 1
# Sanity limits: no GGUF writer makes more. A claim past one is damage, not an early end of
# the file. (llama.cpp allows strings and arrays up to 2^30; the largest vocabularies hold
# about 260,000 tokens, the largest chat templates tens of kilobytes, the largest models
# tens of thousands of tensors.)
MAX_STRING_BYTES = 16 << 20
MAX_ARRAY_ITEMS = 1 << 26
# Small arrays read even where arrays are skipped: the target layers a drafter reads (DFlash, EAGLE-3),
# which the pairing rules check against the target's depth from the header alone (engine.models.discover).
KEPT_ARRAYS = (".target_layers",)
MAX_KEPT_ITEMS = 64
# Tensors whose shapes are kept: the vocabulary an EAGLE-3 drafter writes (its output rows) and maps into the
# target's (its `d2t`), which the pairing rules check from the header alone (engine.models.rules).
KEPT_SHAPES = frozenset({"d2t", "output.weight", "token_embd.weight"})
MAX_KV_PAIRS = 1 << 20
MAX_TENSORS = 1 << 20
MAX_TENSOR_BYTES = 1 << 40  # the largest single tensors (a giant MoE's experts) hold a few GB
MAX_ALIGNMENT = 1 << 16  # writers use 32 (the default) or a page; more is a damaged field

# ggml type id -> (elements per block, bytes per block); from ggml's type traits.
_QK_K = 256
GGML_TYPE_SIZES: dict[int, tuple[int, int]] = {
    0: (1, 4),  # F32
    1: (1, 2),  # F16
    2: (32, 18),  # Q4_0
    3: (32, 20),  # Q4_1
    6: (32, 22),  # Q5_0
    7: (32, 24),  # Q5_1
    8: (32, 34),  # Q8_0
    9: (32, 36),  # Q8_1
    10: (_QK_K, 4 + _QK_K // 16 + _QK_K // 4),  # Q2_K
    11: (_QK_K, 2 + _QK_K // 4 + _QK_K // 8 + 12),  # Q3_K
    12: (_QK_K, 4 + _QK_K // 2 + 12),  # Q4_K
    13: (_QK_K, 4 + _QK_K // 2 + _QK_K // 8 + 12),  # Q5_K
    14: (_QK_K, 2 + _QK_K // 2 + _QK_K // 4 + _QK_K // 16),  # Q6_K
    15: (_QK_K, 4 + _QK_K + _QK_K // 8),  # Q8_K
    16: (_QK_K, 2 + _QK_K // 4),  # IQ2_XXS
    17: (_QK_K, 2 + _QK_K // 4 + _QK_K // 32),  # IQ2_XS
    18: (_QK_K, 2 + _QK_K // 4 + _QK_K // 8),  # IQ3_XXS
    19: (_QK_K, 2 + _QK_K // 8 + _QK_K // 16),  # IQ1_S
    20: (32, 18),  # IQ4_NL
    21: (_QK_K, 2 + _QK_K // 4 + _QK_K // 8 + _QK_K // 32 + 4),  # IQ3_S
    22: (_QK_K, 2 + _QK_K // 4 + _QK_K // 16),  # IQ2_S
    23: (_QK_K, 4 + _QK_K // 2 + _QK_K // 64),  # IQ4_XS
    24: (1, 1),  # I8
    25: (1, 2),  # I16
    26: (1, 4),  # I32
    27: (1, 8),  # I64
    28: (1, 8),  # F64
    29: (_QK_K, _QK_K // 8 + _QK_K // 16 + _QK_K // 32),  # IQ1_M
    30: (1, 2),  # BF16
    34: (_QK_K, 2 + 4 * 13),  # TQ1_0
    35: (_QK_K, 2 + 64),  # TQ2_0
    39: (32, 17),  # MXFP4
    40: (64, 36),  # NVFP4
    41: (128, 18),  # Q1_0
    42: (64, 18),  # Q2_0
}

# llama.cpp's LLAMA_FTYPE_* (general.file_type): the weights' quantization
FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
    12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K",
    19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL",
    26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0",
    37: "TQ2_0", 38: "MXFP4",
}  # fmt: skip


def file_type_name(metadata: dict[str, Any]) -> str:
    """A header's weight type as llama.cpp names it ("Q4_K_M"), or "" where it does not say."""
    file_type = metadata.get("general.file_type")
    return FILE_TYPES.get(file_type, "") if isinstance(file_type, int) and not isinstance(file_type, bool) else ""


# GGUF value types
_SCALARS = {
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
    10: "<Q", 11: "<q", 12: "<d",
}  # fmt: skip
_STRING, _ARRAY, _UINT32 = 8, 9, 4
_U64 = struct.Struct("<Q")
# The fewest bytes one item of a type takes: what bounds an array's count by the bytes left.
_MIN_BYTES = {**{t: struct.calcsize(f) for t, f in _SCALARS.items()}, _STRING: 8}
_MIN_KV_BYTES = 8 + 1 + 4 + 1  # key length, a one-byte key, value type, a one-byte value
_MIN_TENSOR_BYTES = 8 + 1 + 4 + 4 + 8  # name length, a one-byte name, n_dims, type, offset


class TruncatedModelFile(ModelFileError):
    """The file ends before its header or its data does: a download or copy that did not finish."""


class CorruptModelFile(ModelFileError):
    """The header holds what no GGUF writer makes: impossible counts, lengths, types, shapes, offsets."""


@dataclass(frozen=True)
class GGUFInfo:
    """What the header says: metadata, tensor count and the size the file must have."""

    path: Path
    version: int
    metadata: dict[str, Any]
    tensor_count: int
    expected_size: int  # bytes the file must hold for every tensor to be inside it
    actual_size: int
    tensor_names: frozenset[str] = frozenset()
    header_bytes: int = 0  # where the tensor table ends: all that llama.cpp reads before the data
    array_lengths: dict[str, int] = field(default_factory=dict)  # each array's item count, kept or skipped
    tensor_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)  # KEPT_SHAPES' dimensions (ne)

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", "unknown"))

    @property
    def name(self) -> str:
        return str(self.metadata.get("general.name", self.path.stem))

    @property
    def nextn_layers(self) -> int:
        """Multi-token-prediction (NextN) blocks the file carries for its own drafting."""
        value = self.metadata.get(f"{self.architecture}.nextn_predict_layers", 0)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    @property
    def chat_template(self) -> str | None:
        value = self.metadata.get("tokenizer.chat_template")
        return value if isinstance(value, str) else None


class _Reader:
    """Reads a header field by field, never past the file's end, never more than it holds.

    Fields are sliced from a window of the file held in memory (a vocabulary is hundreds of
    thousands of tiny fields: a system call each would cost seconds).
    """

    WINDOW = 1 << 20

    def __init__(self, f: BinaryIO, path: Path, size: int) -> None:
        self.f, self.path, self.size = f, path, size
        self.pos = f.tell()
        self.buf, self.buf_start = b"", self.pos
        self.lengths: dict[str, int] = {}

    @property
    def left(self) -> int:
        return self.size - self.pos

    def cut_short(self, what: str) -> ModelFileError:
        return TruncatedModelFile(
            f"{self.path.name} is cut short: it ends at byte {self.size:,}, inside its header ({what}); "
            "the download or copy did not finish. Fetch the file again."
        )

    def corrupt(self, what: str) -> ModelFileError:
        return CorruptModelFile(
            f"{self.path.name} has a corrupt header: {what}. The file is damaged (or was not written "
            "by a GGUF tool); fetch it again."
        )

    def read(self, n: int, what: str) -> bytes:
        if n > self.left:
            raise self.cut_short(what)
        at = self.pos - self.buf_start
        if at + n > len(self.buf):
            self.f.seek(self.pos)
            self.buf, self.buf_start, at = self.f.read(max(n, self.WINDOW)), self.pos, 0
            if len(self.buf) < n:  # the file shrank while being read
                raise self.cut_short(what)
        self.pos += n
        return self.buf[at : at + n]

    def skip(self, n: int, what: str) -> None:
        if n > self.left:
            raise self.cut_short(what)
        self.pos += n

    def unpack(self, fmt: str, what: str) -> Any:
        return struct.unpack(fmt, self.read(struct.calcsize(fmt), what))[0]

    def count(self, what: str, item_bytes: int, limit: int) -> int:
        """A count of items at least item_bytes each, bounded by the sanity limit and the bytes left."""
        n = self.unpack("<Q", what)
        if n > limit:
            raise self.corrupt(f"{what} is {n:,}, more than any model has")
        if n * item_bytes > self.left:
            raise self.cut_short(f"{what} is {n:,}, which needs more bytes than remain")
        return n

    def string_length(self, what: str) -> int:
        n = self.unpack("<Q", what)
        if n > MAX_STRING_BYTES:
            raise self.corrupt(f"{what} claims {n:,} bytes")
        if n > self.left:
            raise self.cut_short(f"{what} claims {n:,} bytes and {self.left:,} remain")
        return n

    def string(self, what: str) -> str:
        n = self.string_length(what)
        return self.read(n, what).decode("utf-8", errors="replace")

    def value(self, vtype: int, key: str, keep_arrays: bool) -> Any:
        """One metadata value; arrays are read flat (GGUF has no arrays of arrays) or skipped."""
        if vtype in _SCALARS:
            return self.unpack(_SCALARS[vtype], f"the value of {key!r}")
        if vtype == _STRING:
            return self.string(f"the value of {key!r}")
        if vtype != _ARRAY:
            raise self.corrupt(f"{key!r} has value type {vtype}, which GGUF does not define")
        item_type = self.unpack("<I", f"the item type of {key!r}")
        if item_type == _ARRAY:
            raise self.corrupt(f"{key!r} is an array of arrays, which GGUF does not allow")
        if item_type not in _MIN_BYTES:
            raise self.corrupt(f"{key!r} is an array of value type {item_type}, which GGUF does not define")
        n = self.count(f"the item count of {key!r}", _MIN_BYTES[item_type], MAX_ARRAY_ITEMS)
        self.lengths[key] = n
        if item_type in _SCALARS:
            if not keep_arrays and not (key.endswith(KEPT_ARRAYS) and n <= MAX_KEPT_ITEMS):
                self.skip(_MIN_BYTES[item_type] * n, f"the items of {key!r}")
                return None
            fmt = _SCALARS[item_type]
            data = self.read(_MIN_BYTES[item_type] * n, f"the items of {key!r}")
            return list(struct.unpack(f"<{n}{fmt[1]}", data))
        if keep_arrays:
            return [self.string(f"an item of {key!r}") for _ in range(n)]
        self.skip_strings(n, f"an item of {key!r}")
        return None

    def skip_strings(self, n: int, what: str) -> None:
        """Skip n strings (a vocabulary): the checks of string_length, in a loop tight enough for 10^5 items."""
        unpack_from, size = _U64.unpack_from, self.size
        for _ in range(n):
            at = self.pos - self.buf_start
            if at + 8 > len(self.buf):
                self.skip(self.string_length(what), what)
                continue
            length = unpack_from(self.buf, at)[0]
            self.pos += 8
            if length > MAX_STRING_BYTES or self.pos + length > size:
                self.pos -= 8
                self.string_length(what)  # raises, with the reason
            self.pos += length


def _open_checked(path: Path) -> int:
    if not path.exists():
        raise ModelFileError(f"No model file at {path}.")
    if path.is_dir():
        raise ModelFileError(f"{path} is a folder; choose a .gguf file inside it.")
    return path.stat().st_size


def read_gguf(path: str | Path, keep_arrays: bool = False) -> GGUFInfo:
    """Read and check a GGUF file's header; raise ModelFileError with a reason if it is bad.

    Arrays (the vocabulary, merges) are skipped unless keep_arrays is set. Only the header
    is read: the cost is the header's size, whatever the file's.
    """
    path = Path(path).expanduser()
    size = _open_checked(path)
    try:
        with path.open("rb") as f:
            magic = f.read(4)
            if magic != GGUF_MAGIC:
                shown = magic.decode("ascii", errors="replace") if magic else "nothing"
                raise ModelFileError(
                    f"{path.name} is not a GGUF model file (it starts with {shown!r}, "
                    "not 'GGUF'). Choose a .gguf file made for llama.cpp."
                )
            r = _Reader(f, path, size)
            version = r.unpack("<I", "the version")
            if version not in (2, 3):
                raise ModelFileError(f"{path.name} is GGUF version {version}; versions 2 and 3 are supported.")
            n_tensors = r.count("the tensor count", _MIN_TENSOR_BYTES, MAX_TENSORS)
            n_kv = r.count("the metadata count", _MIN_KV_BYTES, MAX_KV_PAIRS)
            metadata, alignment = _read_metadata(r, n_kv, keep_arrays)
            names, shapes, end = _read_tensor_table(r, n_tensors, alignment)
            header_end = r.pos
    except OSError as exc:
        raise ModelFileError(f"Cannot read {path}: {exc.strerror}.") from exc
    data_start = (header_end + alignment - 1) // alignment * alignment
    expected = data_start + end
    if size < expected:
        raise TruncatedModelFile(
            f"{path.name} is truncated: it holds {size:,} bytes but its tensors need "
            f"{expected:,} ({100 * size / expected:.1f}% present). Fetch the file again."
        )
    return GGUFInfo(path, version, metadata, n_tensors, expected, size, frozenset(names), header_end, r.lengths, shapes)


def _read_metadata(r: _Reader, n_kv: int, keep_arrays: bool) -> tuple[dict[str, Any], int]:
    """The key/value pairs (arrays skipped unless kept) and the data section's alignment."""
    metadata: dict[str, Any] = {}
    seen: set[str] = set()
    alignment = DEFAULT_ALIGNMENT
    for i in range(n_kv):
        key = r.string(f"the name of metadata key {i:,}")
        if not key:
            raise r.corrupt(f"metadata key {i:,} has an empty name")
        if key in seen:
            raise r.corrupt(f"the key {key!r} appears twice")
        seen.add(key)
        vtype = r.unpack("<I", f"the value type of {key!r}")
        value = r.value(vtype, key, keep_arrays)
        if key == "general.alignment":
            # llama.cpp requires a uint32 power of two: the data section starts at a multiple of it
            if vtype != _UINT32 or value == 0 or value & (value - 1) or value > MAX_ALIGNMENT:
                shown = repr(value)[:40] if vtype != _ARRAY else "an array"
                raise r.corrupt(
                    f"general.alignment is {shown}, not a power of two up to {MAX_ALIGNMENT:,} stored as uint32"
                )
            alignment = value
        if key.endswith("_epsilon") and isinstance(value, float) and not (value >= 0.0 and math.isfinite(value)):
            # llama.cpp's norms assert a non-negative epsilon: it would abort the process, not refuse
            raise r.corrupt(f"{key} is {value:g}; a norm's epsilon is a small positive number")
        if value is not None:
            metadata[key] = value
    return metadata, alignment


def _read_tensor_table(r: _Reader, n_tensors: int, alignment: int) -> tuple[set[str], dict[str, tuple[int, ...]], int]:
    """The tensors' names, the shapes of those in KEPT_SHAPES, and where the last one's data ends (from the
    data section's start).

    As llama.cpp requires, each tensor's data starts where the one before it ends (padded to
    the alignment): an offset elsewhere is damage, not a short file.
    """
    names: set[str] = set()
    shapes: dict[str, tuple[int, ...]] = {}
    expected_offset = end = 0
    for i in range(n_tensors):
        name = r.string(f"the name of tensor {i:,}")
        if len(name.encode("utf-8")) >= GGML_MAX_NAME:
            raise r.corrupt(
                f"tensor {i:,}'s name is {len(name):,} characters, longer than ggml allows ({GGML_MAX_NAME - 1})"
            )
        if name in names:
            raise r.corrupt(f"the tensor name {name!r} appears twice")
        names.add(name)
        n_dims = r.unpack("<I", f"the dimension count of {name!r}")
        if n_dims > GGML_MAX_DIMS:
            raise r.corrupt(f"tensor {name!r} claims {n_dims:,} dimensions (at most {GGML_MAX_DIMS})")
        dims = [r.unpack("<q", f"a dimension of {name!r}") for _ in range(n_dims)]
        if name in KEPT_SHAPES:
            shapes[name] = tuple(dims)
        n_elements = 1
        for d in dims:
            if d < 0:
                raise r.corrupt(f"tensor {name!r} has a dimension of {d:,}")
            n_elements *= d
        if n_elements > INT64_MAX:
            raise r.corrupt(f"tensor {name!r} has shape {dims}, more elements than ggml can count")
        ggml_type = r.unpack("<I", f"the type of {name!r}")
        if ggml_type not in GGML_TYPE_SIZES:
            raise r.corrupt(f"tensor {name!r} has type {ggml_type}, which ggml does not know")
        block, block_bytes = GGML_TYPE_SIZES[ggml_type]
        if dims and dims[0] % block:
            raise r.corrupt(
                f"tensor {name!r} has rows of {dims[0]:,} elements, not a multiple of its type's block ({block})"
            )
        offset = r.unpack("<Q", f"the data offset of {name!r}")
        if offset != expected_offset:
            raise r.corrupt(
                f"tensor {name!r} claims its data at offset {offset:,}, where the tensors before it end at {expected_offset:,}"
            )
        n_bytes = n_elements // block * block_bytes
        if n_bytes > MAX_TENSOR_BYTES:
            raise r.corrupt(f"tensor {name!r} has shape {dims}: {n_bytes:,} bytes, more than any model's tensor")
        end = offset + n_bytes
        expected_offset = (end + alignment - 1) // alignment * alignment
    return names, shapes, end
