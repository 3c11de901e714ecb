"""Copy a GGUF model with its chat template replaced, for tests that feed the CLI a hostile one.

The header is rebuilt around the new `tokenizer.chat_template` value and the tensor data is
copied as is: tensor offsets count from the data section, which stays aligned.
"""

from __future__ import annotations

import struct
from pathlib import Path

from gguf import GGUFReader

KEY = "tokenizer.chat_template"


def with_template(source: Path, target: Path, template: str) -> Path:
    """Write `target`: `source` with its chat template replaced by `template`."""
    reader = GGUFReader(source)
    field = reader.fields[KEY]
    start = field.offset
    end = start + sum(part.nbytes for part in field.parts)
    infos_end = max(t.field.offset + sum(p.nbytes for p in t.field.parts) for t in reader.tensors)
    alignment = int(reader.fields["general.alignment"].parts[-1][0]) if "general.alignment" in reader.fields else 32
    raw = source.read_bytes()
    key, value = KEY.encode(), template.encode("utf-8", errors="surrogatepass")
    kv = struct.pack("<Q", len(key)) + key + struct.pack("<I", 8) + struct.pack("<Q", len(value)) + value
    header = raw[:start] + kv + raw[end:infos_end]
    header += b"\0" * (-len(header) % alignment)
    target.write_bytes(header + raw[reader.data_offset :])
    return target
