"""A model's identity, read cheaply: it changes whenever a file's content does.

A multi-GB file is never read whole. A GGUF file is known by its size, its header (metadata
and tensor table) and the first bytes of every tensor's data; a safetensors file by its size,
its JSON header and the first bytes of every tensor it lists; an MLX folder by its config and
each of its weight files. A re-quantization rewrites every tensor's first block, and a tensor
changed anywhere but past its first block is the one change this misses. A file's
modification time is not part of the identity (a copy keeps its content), only the key under
which a fingerprint already made is reused.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from pathlib import Path

from engine.runtime.gguf import ModelFileError, read_gguf

SAMPLE_BYTES = 4096  # read from the start of each tensor's data
MAX_SAMPLED_TENSORS = 4096  # a file claiming more is sampled at this many, spread evenly
MAX_SAFETENSORS_HEADER = 100 << 20  # the safetensors format's own limit

_made: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns): a fingerprint already made


@dataclass(frozen=True, slots=True)
class FileIdentity:
    """What the ledger keeps of one model file or folder."""

    name: str  # the file or folder name: what the user calls it
    fingerprint: str  # "gguf:<size>:<digest>", "mlx:<size>:<digest>" or "none:<name>"
    modified: float  # seconds since the epoch, for the history's "changed on 3 Dec"


def identity(path: Path | None, kind: str = "") -> FileIdentity:
    """A file's (or an MLX folder's) identity; with no file (n-grams), the drafter kind stands for it."""
    if path is None:
        return FileIdentity(kind or "none", f"none:{kind}", 0.0)
    path = Path(path)
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _made:
        _made[key] = _folder_fingerprint(path) if path.is_dir() else _file_fingerprint(path)
    return FileIdentity(path.name, _made[key], st.st_mtime)


def _file_fingerprint(path: Path) -> str:
    digest = hashlib.sha256()
    size = path.stat().st_size
    if path.suffix == ".safetensors":
        _hash_safetensors(path, digest)
        return f"safetensors:{size}:{digest.hexdigest()[:20]}"
    try:
        info = read_gguf(path)
    except ModelFileError:  # not a GGUF file: its size and first and last blocks say what they can
        with path.open("rb") as f:
            digest.update(f.read(1 << 20))
            f.seek(max(0, size - (1 << 20)))
            digest.update(f.read(1 << 20))
        return f"file:{size}:{digest.hexdigest()[:20]}"
    alignment = info.metadata.get("general.alignment", 32)
    data_start = (info.header_bytes + alignment - 1) // alignment * alignment
    with path.open("rb") as f:
        header = f.read(info.header_bytes)
        digest.update(header)
        try:
            offsets = _gguf_offsets(header, info.tensor_count)
        except (struct.error, KeyError):  # read_gguf passed it; a header it reads another way keeps its hash
            offsets = []
        for offset in _spread(offsets):
            f.seek(data_start + offset)
            digest.update(f.read(SAMPLE_BYTES))
    return f"gguf:{size}:{digest.hexdigest()[:20]}"


def _spread(offsets: list[int]) -> list[int]:
    if len(offsets) <= MAX_SAMPLED_TENSORS:
        return offsets
    step = len(offsets) / MAX_SAMPLED_TENSORS
    return [offsets[int(i * step)] for i in range(MAX_SAMPLED_TENSORS)]


def _gguf_offsets(header: bytes, n_tensors: int) -> list[int]:
    """The tensor table's data offsets, walking the header read_gguf has already checked."""
    pos = 24  # magic, version, tensor count, metadata count
    (n_kv,) = struct.unpack_from("<Q", header, 16)
    for _ in range(n_kv):
        pos = _skip_string(header, pos)
        (vtype,) = struct.unpack_from("<I", header, pos)
        pos = _skip_value(header, pos + 4, vtype)
    offsets = []
    for _ in range(n_tensors):
        pos = _skip_string(header, pos)
        (n_dims,) = struct.unpack_from("<I", header, pos)
        pos += 4 + 8 * n_dims + 4
        (offset,) = struct.unpack_from("<Q", header, pos)
        pos += 8
        offsets.append(offset)
    return offsets


_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9


def _skip_string(b: bytes, pos: int) -> int:
    (n,) = struct.unpack_from("<Q", b, pos)
    return pos + 8 + n


def _skip_value(b: bytes, pos: int, vtype: int) -> int:
    if vtype == _STRING:
        return _skip_string(b, pos)
    if vtype == _ARRAY:
        (item, n) = struct.unpack_from("<IQ", b, pos)
        pos += 12
        if item in _SIZES:
            return pos + n * _SIZES[item]
        for _ in range(n):
            pos = _skip_value(b, pos, item)
        return pos
    return pos + _SIZES[vtype]


def _hash_safetensors(path: Path, digest) -> None:
    with path.open("rb") as f:
        raw = f.read(8)
        if len(raw) < 8:
            digest.update(raw)
            return
        (n,) = struct.unpack("<Q", raw)
        header = f.read(min(n, MAX_SAFETENSORS_HEADER))
        digest.update(header)
        try:
            tensors = json.loads(header)
        except ValueError:
            return
        starts = sorted(
            v["data_offsets"][0]
            for k, v in tensors.items()
            if k != "__metadata__" and isinstance(v, dict) and isinstance(v.get("data_offsets"), list)
        )
        for start in _spread(starts):
            f.seek(8 + n + int(start))
            digest.update(f.read(SAMPLE_BYTES))


def _folder_fingerprint(path: Path) -> str:
    digest = hashlib.sha256()
    size = 0
    for name in ("config.json", "model.safetensors.index.json"):
        if (path / name).is_file():
            digest.update((path / name).read_bytes()[: 1 << 20])
    for weights in sorted(path.glob("*.safetensors")):
        size += weights.stat().st_size
        digest.update(weights.name.encode())
        _hash_safetensors(weights, digest)
    return f"mlx:{size}:{digest.hexdigest()[:20]}"
