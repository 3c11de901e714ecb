"""Make a zero-weight copy of a GGUF model whose greedy choice is token 0, strictly.

  patch_models.py HEADER SIZE OUT [--zero]

The copy is HEADER (the real file's first bytes: header, metadata, tensor table) then zeros up to
SIZE. With every weight zero all logits are 0 and each sampler breaks the tie its own way: our
engine's argmax takes token 0, llama.cpp's draft sampler (top-k) took other tokens, so stock
speculation accepted nothing. Unless --zero, three tensors are then filled so that token 0 wins
by a margin in every model and at every position, and every draft is accepted in both engines:
  token_embd.weight   every element 1  (every token's embedding is the all-ones vector)
  output_norm.weight  every element 1  (F32)
  output.weight       row 0 (token 0's row) every element 1, other rows 0
Every other weight stays zero (the norms of each layer too), so each layer adds nothing and the
last hidden state is all ones: logit 0 = n_embd, every other logit 0. Timing is unchanged: the
kernels do the same work whatever the values.
"""

from __future__ import annotations

import shutil
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "py"))

QK_K = 256
HALF_ONE = struct.pack("<e", 1.0)
# One block whose every element dequantizes to 1.0, per ggml type id (ggml-common.h layouts).
BLOCKS = {
    0: (1, struct.pack("<f", 1.0)),  # F32
    # Q8_0 {d; int8 qs[32]}: d * q
    8: (32, HALF_ONE + bytes([1]) * 32),
    # Q5_0 {d; qh[4]; qs[16]}: d * (q - 16), q = nibble | high bit << 4 = 1 | 16
    6: (32, HALF_ONE + b"\xff" * 4 + b"\x11" * 16),
    # Q4_K {d; dmin; scales[12]; qs[128]}: d * sc * q - dmin * m; sc = 1, m = 0, q = 1
    12: (QK_K, HALF_ONE + b"\x00\x00" + bytes([1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1]) + b"\x11" * 128),
    # Q6_K {ql[128]; qh[64]; int8 scales[16]; d}: d * sc * (q - 32), q = 1 | 2 << 4 = 33
    14: (QK_K, b"\x11" * 128 + b"\xaa" * 64 + bytes([1]) * 16 + HALF_ONE),
}


def tensor_table(path: Path):
    """name -> (ggml type, dims, absolute offset) from the GGUF header (v3)."""
    with path.open("rb") as f:
        data = f.read(64 << 20)
    pos = 4  # after the magic

    def u(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return v[0]

    def s():
        n = u("<Q")
        nonlocal pos
        v = data[pos : pos + n].decode("utf-8", "replace")
        pos += n
        return v

    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip(t):
        nonlocal pos
        if t == 8:
            s()
        elif t == 9:
            et, n = u("<I"), u("<Q")
            if et in sizes:
                pos += sizes[et] * n
            else:
                for _ in range(n):
                    skip(et)
        else:
            pos += sizes[t]

    assert data[:4] == b"GGUF", path
    u("<I")
    n_tensors, n_kv = u("<Q"), u("<Q")
    alignment = 32
    for _ in range(n_kv):
        key, t = s(), u("<I")
        if key == "general.alignment":
            alignment = u("<I")
        else:
            skip(t)
    table = {}
    for _ in range(n_tensors):
        name = s()
        dims = [u("<Q") for _ in range(u("<I"))]
        table[name] = (u("<I"), dims, u("<Q"))
    start = (pos + alignment - 1) // alignment * alignment
    return {k: (t, d, start + off) for k, (t, d, off) in table.items()}, start


def fill(f, ggml_type: int, offset: int, n_elements: int) -> int:
    per, block = BLOCKS[ggml_type]
    assert n_elements % per == 0
    f.seek(offset)
    f.write(block * (n_elements // per))
    return len(block) * (n_elements // per)


def main() -> int:
    header, size, out = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    shutil.copyfile(header, out)
    with out.open("r+b") as f:
        f.truncate(size)
    if "--zero" in sys.argv:
        print(f"{out.name}: zero weights, {size:,} bytes")
        return 0
    table, start = tensor_table(out)
    assert start == header.stat().st_size, (start, header.stat().st_size)
    with out.open("r+b") as f:
        t, dims, off = table["token_embd.weight"]
        a = fill(f, t, off, dims[0] * dims[1])
        t, dims, off = table["output_norm.weight"]
        b = fill(f, t, off, dims[0])
        t, dims, off = table["output.weight"]
        c = fill(f, t, off, dims[0])  # row 0: the first n_embd elements
    print(
        f"{out.name}: {size:,} bytes, data from {start:,}; filled token_embd {a:,} B, output_norm {b:,} B, output row 0 {c:,} B"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
