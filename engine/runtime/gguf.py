"""A small GGUF header reader: enough to validate a file before llama.cpp sees it.

It reads the key/value metadata and the tensor table, and from them the size the file
must have. A text file renamed to .gguf or a download cut short is caught here with a
sentence that says which, instead of a failed load deep inside llama.cpp.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from engine.errors import ModelFileError

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32

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

# GGUF value types
_SCALARS = {
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
    10: "<Q", 11: "<q", 12: "<d",
}  # fmt: skip
_STRING, _ARRAY = 8, 9


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
    def __init__(self, f: BinaryIO, path: Path, size: int) -> None:
        self.f, self.path, self.size = f, path, size

    def read(self, n: int) -> bytes:
        data = self.f.read(n)
        if len(data) != n:
            raise ModelFileError(
                f"{self.path} is cut short: its header ends at byte {self.size:,}; "
                "the download or copy did not finish. Fetch the file again."
            )
        return data

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.read(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        n = self.unpack("<Q")
        if n > self.size:
            raise ModelFileError(f"{self.path} has a corrupt header (a string of {n:,} bytes).")
        return self.read(n).decode("utf-8", errors="replace")

    def value(self, vtype: int, keep_arrays: bool) -> Any:
        if vtype in _SCALARS:
            return self.unpack(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            item_type, count = self.unpack("<I"), self.unpack("<Q")
            if item_type in _SCALARS and not keep_arrays:
                self.f.seek(struct.calcsize(_SCALARS[item_type]) * count, 1)
                return None
            items = [self.value(item_type, keep_arrays) for _ in range(count)]
            return items if keep_arrays else None
        raise ModelFileError(f"{self.path} has a corrupt header (value type {vtype}).")


def read_gguf(path: str | Path, keep_arrays: bool = False) -> GGUFInfo:
    """Read and check a GGUF file's header; raise ModelFileError with a reason if it is bad.

    Arrays (the vocabulary, merges) are skipped unless keep_arrays is set.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise ModelFileError(f"No model file at {path}.")
    if path.is_dir():
        raise ModelFileError(f"{path} is a folder; choose a .gguf file inside it.")
    size = path.stat().st_size
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
            version = r.unpack("<I")
            if version not in (2, 3):
                raise ModelFileError(f"{path.name} is GGUF version {version}; versions 2 and 3 are supported.")
            n_tensors, n_kv = r.unpack("<Q"), r.unpack("<Q")
            metadata: dict[str, Any] = {}
            for _ in range(n_kv):
                key = r.string()
                vtype = r.unpack("<I")
                value = r.value(vtype, keep_arrays)
                if value is not None:
                    metadata[key] = value
            end = 0
            names: set[str] = set()
            for _ in range(n_tensors):
                names.add(r.string())
                n_dims = r.unpack("<I")
                n_elements = 1
                for _ in range(n_dims):
                    n_elements *= r.unpack("<Q")
                ggml_type, offset = r.unpack("<I"), r.unpack("<Q")
                block, block_bytes = GGML_TYPE_SIZES.get(ggml_type, (0, 0))
                if block:
                    end = max(end, offset + n_elements // block * block_bytes)
            alignment = int(metadata.get("general.alignment", DEFAULT_ALIGNMENT))
            header_end = f.tell()
            data_start = (header_end + alignment - 1) // alignment * alignment
    except OSError as exc:
        raise ModelFileError(f"Cannot read {path}: {exc.strerror}.") from exc
    expected = data_start + end
    if size < expected:
        raise ModelFileError(
            f"{path.name} is truncated: it holds {size:,} bytes but its tensors need "
            f"{expected:,} ({100 * size / expected:.1f}% present). Fetch the file again."
        )
    return GGUFInfo(path, version, metadata, n_tensors, expected, size, frozenset(names))
