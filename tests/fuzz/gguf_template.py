"""Copy a GGUF model with its chat template replaced, for tests that feed the CLI a hostile one.

The header is rebuilt around the new `tokenizer.chat_template` value and the tensor data is
copied as is: tensor offsets count from the data section, which stays aligned.
"""

from __future__ import annotations

import struct
from pathlib import Path

from gguf import GGUFReader

KEY = "tokenizer.chat_template"


class TemplateSwap:
    """A GGUF model read once (about 5 s for gguf-py's reader), then written with any template."""

    def __init__(self, source: Path) -> None:
        reader = GGUFReader(source)
        field = reader.fields[KEY]
        self.start = field.offset
        self.end = field.offset + sum(part.nbytes for part in field.parts)
        self.infos_end = max(t.field.offset + sum(p.nbytes for p in t.field.parts) for t in reader.tensors)
        align = reader.fields.get("general.alignment")
        self.alignment = int(align.parts[-1][0]) if align is not None else 32
        self.data_offset = reader.data_offset
        self.raw = source.read_bytes()

    def write(self, target: Path, template: str) -> Path:
        """Write `target`: the source with its chat template replaced by `template`."""
        key, value = KEY.encode(), template.encode("utf-8", errors="surrogatepass")
        kv = struct.pack("<Q", len(key)) + key + struct.pack("<I", 8) + struct.pack("<Q", len(value)) + value
        header = self.raw[: self.start] + kv + self.raw[self.end : self.infos_end]
        header += b"\0" * (-len(header) % self.alignment)
        target.write_bytes(header + self.raw[self.data_offset :])
        return target
