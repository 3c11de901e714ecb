"""Keep one architecture's cubin in every fatbin of a shared library's .nv_fatbin section, in place.

    prune_fatbin.py IN.so OUT.so 90      (libmlx.so of mlx-cuda-13: sm_75/80/90/100/120/121 cubins and
                                          compute_120 PTX in each of 99 fatbins; the sm_90 cubins are 9.2 MB)

Each fatbin keeps its place, so every pointer into the section stays valid: the chosen entry moves to
just after the fatbin's header, the header's size shrinks to cover it alone, and the bytes after it
become zeros (which compress to nothing). A fatbin without that cubin stops the script.
"""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

MAGIC = 0xBA55ED50
ELF = 2  # an entry's kind: 1 PTX, 2 a cubin


def section(path: str, name: str) -> tuple[int, int]:
    out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        fields = line.split("]", 1)[-1].split()
        if fields and fields[0] == name:
            return int(fields[3], 16), int(fields[4], 16)
    raise SystemExit(f"{path}: no {name} section")


def prune(data: bytearray, start: int, size: int, arch: int) -> tuple[int, int]:
    """(fatbins, bytes kept) after cutting every fatbin in data[start:start+size] to its sm_`arch` cubin."""
    pos, count, kept = start, 0, 0
    while pos + 16 <= start + size:
        magic, _, header, body = struct.unpack_from("<IHHQ", data, pos)
        if magic != MAGIC:
            pos += 8  # fatbins are 8-aligned, with padding between them
            continue
        count += 1
        entry, end, pick = pos + header, pos + header + body, None
        while entry < end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            entry_arch = struct.unpack_from("<I", data, entry + 0x1C)[0]
            if kind == ELF and entry_arch == arch:
                pick = bytes(data[entry : entry + entry_header + payload])
            entry += entry_header + payload
        if entry != end:
            raise SystemExit(f"fatbin at {pos:#x}: its entries' sizes do not add up")
        if pick is None:
            raise SystemExit(f"fatbin at {pos:#x}: no sm_{arch} cubin")
        data[pos + header : end] = bytes(end - pos - header)
        data[pos + header : pos + header + len(pick)] = pick
        struct.pack_into("<Q", data, pos + 8, len(pick))
        kept += len(pick)
        pos = end
    return count, kept


def main() -> int:
    src, dst, arch = sys.argv[1], sys.argv[2], int(sys.argv[3])
    data = bytearray(Path(src).read_bytes())
    count, kept = prune(data, *section(src, ".nv_fatbin"), arch)
    Path(dst).write_bytes(data)
    print(f"{count} fatbins, kept {kept} bytes of sm_{arch} cubins")
    return 0


if __name__ == "__main__":
    sys.exit(main())
