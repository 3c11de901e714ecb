"""Write the header of a 7B-class target with Qwen2.5-7B's dimensions: every key and the tokenizer of a real
Qwen2.5 GGUF, its tensor table scaled to 3584 wide, 28 layers, 28 query and 4 key/value heads, FFN 18944.

  make_7b_header.py REAL_QWEN25.gguf OUT.hdr      prints the size the full file must have

Tensor types follow the real file, role by role and layer by layer (its Q4_K_M mix). Only the header is
written; patch_models.py makes the file: the header, zeros, and three tensors filled so that token 0 is
every model's greedy choice. The vocabulary stays the real file's (151,936 rows; Qwen2.5-7B pads to
152,064), so the 0.5B drafter's vocabulary matches.
"""

from __future__ import annotations

import os
import sys

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter
from gguf.constants import GGML_QUANT_SIZES

DIMS = {
    "embedding_length": 3584,
    "feed_forward_length": 18944,
    "attention.head_count": 28,
    "attention.head_count_kv": 4,
}


def shape_7b(name: str, shape: list[int], src: dict[str, int]) -> list[int]:
    """A tensor's ggml shape (ne0 first) scaled from the real file's dimensions to the 7B's."""
    width, ff = src["embedding_length"], src["feed_forward_length"]
    kv = src["embedding_length"] // src["attention.head_count"] * src["attention.head_count_kv"]
    head = 3584 // 28
    table = {width: 3584, ff: 18944, kv: head * 4}
    return [table.get(d, d) for d in shape]


def main() -> int:
    real, out = sys.argv[1], sys.argv[2]
    r = GGUFReader(real)
    arch = str(bytes(r.fields["general.architecture"].parts[-1]), "utf-8")
    src = {k: int(r.fields[f"{arch}.{k}"].parts[-1][0]) for k in DIMS}
    w = GGUFWriter(out, arch)
    for key, field in r.fields.items():
        if key.startswith("GGUF.") or key in ("general.architecture", "general.name"):
            continue
        if key.removeprefix(f"{arch}.") in DIMS:
            w.add_uint32(key, DIMS[key.removeprefix(f"{arch}.")])
            continue
        kind = field.types[0]
        if kind == GGUFValueType.ARRAY:
            sub = field.types[1]
            values = [field.parts[i] for i in field.data]
            if sub == GGUFValueType.STRING:
                w.add_array(key, [bytes(v).decode("utf-8", "replace") for v in values])
            else:
                w.add_array(key, [v[0].item() for v in values])
        elif kind == GGUFValueType.STRING:
            w.add_string(key, bytes(field.parts[-1]).decode("utf-8", "replace"))
        else:
            w.add_key_value(key, field.parts[-1][0].item(), kind)
    w.add_name("Qwen2.5-7B-class zero-weight target")
    for t in r.tensors:
        ne = shape_7b(t.name, [int(x) for x in t.shape], src)
        block, type_size = GGML_QUANT_SIZES[t.tensor_type]
        nbytes = int(np.prod(ne)) // block * type_size
        w.add_tensor_info(t.name, list(reversed(ne)), np.dtype(np.float32), nbytes, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    align = 32
    with open(out, "r+b") as f:  # up to where the tensor data starts, as the real headers are cut
        f.truncate((os.path.getsize(out) + align - 1) // align * align)
    data = sum((ti.nbytes + align - 1) // align * align for ti in w.tensors[0].values())
    print(os.path.getsize(out) + data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
