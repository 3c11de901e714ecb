"""A changed target made at test time: the project's own GGUF copied, with some layers' weights swapped.

The copy keeps the file's name and size, as a re-download of a changed file would; its
feed-forward down-projections trade places between neighbouring layers, so it is the same
architecture giving other logits, and the drafter that matched the original matches it less.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from gguf import GGUFReader

SWAPS = 3  # pairs of layers whose ffn_down trade places


def changed_copy(original: Path, folder: Path) -> Path:
    """`original` copied into `folder` under its own name, SWAPS pairs of same-typed ffn_down swapped."""
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / original.name
    shutil.copyfile(original, copy)
    downs = [t for t in GGUFReader(original).tensors if t.name.endswith(".ffn_down.weight")]
    pairs = [
        (a, b) for a, b in zip(downs[::2], downs[1::2]) if (a.tensor_type, a.n_bytes) == (b.tensor_type, b.n_bytes)
    ]
    assert len(pairs) >= SWAPS, f"{original.name} has too few same-typed neighbouring layers to swap"
    with copy.open("r+b") as f:
        middle = len(pairs) // 2  # the first and last layers matter most: a model swapped there only babbles
        for ta, tb in pairs[middle : middle + SWAPS]:
            f.seek(ta.data_offset)
            data_a = f.read(ta.n_bytes)
            f.seek(tb.data_offset)
            data_b = f.read(tb.n_bytes)
            f.seek(ta.data_offset)
            f.write(data_b)
            f.seek(tb.data_offset)
            f.write(data_a)
    return copy
