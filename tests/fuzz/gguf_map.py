"""Where each field of a well-formed GGUF file lies, so fuzz cases can mutate one field at a time.

`fields(data)` walks a good file (the test's own, so it trusts it) and returns every count,
length, type, dimension and offset with its byte position and width; `kv_value(data, key)`
finds one key's value. Mutations are plain byte edits of a copy.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY = 8, 9


@dataclass(frozen=True)
class Field:
    what: str  # "n_tensors", "kv 3 key length", "tensor 5 dim 1", ...
    offset: int
    width: int  # bytes: 4 or 8
    value: int


def fields(data: bytes) -> list[Field]:
    """Every structural field of a well-formed GGUF: counts, lengths, types, dims, offsets."""
    out: list[Field] = []
    pos = 4

    def take(what: str, width: int) -> int:
        nonlocal pos
        value = int.from_bytes(data[pos : pos + width], "little")
        out.append(Field(what, pos, width, value))
        pos += width
        return value

    def string(what: str) -> None:
        nonlocal pos
        length = take(what, 8)
        pos += length

    take("version", 4)
    n_tensors, n_kv = take("n_tensors", 8), take("n_kv", 8)
    for i in range(n_kv):
        string(f"kv {i} key length")
        vtype = take(f"kv {i} type", 4)
        if vtype == ARRAY:
            item, count = take(f"kv {i} item type", 4), take(f"kv {i} count", 8)
            for j in range(count):
                if item == STRING:
                    if j < 2:
                        string(f"kv {i} item {j} length")
                    else:
                        pos += 8 + int.from_bytes(data[pos : pos + 8], "little")
                else:
                    pos += SCALAR_SIZES[item]
        elif vtype == STRING:
            string(f"kv {i} length")
        else:
            if SCALAR_SIZES[vtype] in (4, 8):
                take(f"kv {i} value", SCALAR_SIZES[vtype])
            else:
                pos += SCALAR_SIZES[vtype]
    for i in range(n_tensors):
        string(f"tensor {i} name length")
        n_dims = take(f"tensor {i} n_dims", 4)
        for d in range(n_dims):
            take(f"tensor {i} dim {d}", 8)
        take(f"tensor {i} type", 4)
        take(f"tensor {i} offset", 8)
    return out


def kv_value(data: bytes, key: str) -> Field:
    """The field holding a scalar key's value (a 4- or 8-byte one)."""
    for f in fields(data):
        if f.what.endswith(" key length"):
            name = data[f.offset + 8 : f.offset + 8 + f.value].decode()
            if name == key:
                index = f.what.split()[1]
                return next(g for g in fields(data) if g.what == f"kv {index} value")
    raise KeyError(key)


def set_field(data: bytes, field: Field, value: int) -> bytes:
    """A copy of data with field set to value (wrapped to the field's width, as unsigned)."""
    raw = (value % (1 << (8 * field.width))).to_bytes(field.width, "little")
    return data[: field.offset] + raw + data[field.offset + field.width :]


def header_end(data: bytes) -> int:
    """Where the tensor table ends (the data section starts at the next aligned byte)."""
    last = fields(data)[-1]
    return last.offset + last.width


def pack_u32(value: int) -> bytes:
    return struct.pack("<I", value)


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def nested_array(key: str, depth: int) -> bytes:
    """A key/value pair whose value is an array of arrays `depth` deep around one uint32."""
    out = _string(key) + pack_u32(ARRAY)
    out += (pack_u32(ARRAY) + struct.pack("<Q", 1)) * (depth - 1)
    return out + pack_u32(4) + struct.pack("<Q", 1) + pack_u32(7)


def uint32_kv(key: str, value: int) -> bytes:
    return _string(key) + pack_u32(4) + pack_u32(value)


def string_kv(key: str, value: str) -> bytes:
    return _string(key) + pack_u32(STRING) + _string(value)


def with_kv(data: bytes, kv: bytes, alignment: int = 32) -> bytes:
    """A copy of a well-formed file with one more key/value pair; the data section re-padded to `alignment`."""
    table = fields(data)
    n_kv = next(f for f in table if f.what == "n_kv")
    first_tensor = next(f for f in table if f.what == "tensor 0 name length").offset
    old_end = header_end(data)
    data_start = (old_end + 31) // 32 * 32  # the file's own alignment: the default
    header = set_field(data, n_kv, n_kv.value + 1)[:first_tensor] + kv + data[first_tensor:old_end]
    pad = -len(header) % alignment if alignment > 0 else 0
    return header + b"\0" * pad + data[data_start:]
