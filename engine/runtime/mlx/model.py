"""An MLX model as a RuntimeModel: mlx-lm's own model classes, its loader, its tokenizer.

engine.runtime.mlx.context holds the other half, a context: the KV cache, decoding batches, rewinds.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import mlx.nn as nn

from engine.errors import ModelFileError
from engine.runtime.mlx.context import MlxContext
from engine.runtime.mlx.options import MlxOptions

# Files whose presence says a folder carries a tokenizer mlx-lm (through transformers) can load.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json")


class MlxModel:
    """A loaded MLX model (a RuntimeModel): an mlx-lm nn.Module, its vocabulary and tokenizer."""

    def __init__(
        self,
        module: nn.Module,
        n_vocab: int,
        name: str = "mlx model",
        tokenizer: Any | None = None,
        options: MlxOptions | None = None,
        n_ctx_train: int | None = None,
    ) -> None:
        """A model already built (a test's random weights); `tokenizer` is mlx-lm's TokenizerWrapper,
        or None: then no token ends generation and token t's piece is "<t>"."""
        self.module = module
        self.n_vocab = n_vocab
        self.name = name
        self.tokenizer = tokenizer
        self.options = options or MlxOptions()
        args = getattr(module, "args", None)
        self.n_ctx_train = n_ctx_train or getattr(args, "max_position_embeddings", None) or self.options.n_ctx
        self._pieces: dict[int, bytes] = {}
        self._special: frozenset[int] = frozenset(getattr(tokenizer, "all_special_ids", ()) or ())
        eog = getattr(tokenizer, "eos_token_ids", None) or ()
        self._eog: tuple[int, ...] = tuple(sorted(int(t) for t in eog if 0 <= int(t) < n_vocab))
        self._byte_level = _is_byte_level(tokenizer)
        self.path: Path | None = None  # the folder it was loaded from (a drafter reads its own part of it)

    @classmethod
    def load(cls, path: str | Path, options: MlxOptions | None = None) -> MlxModel:
        """An MLX model folder: config.json, model*.safetensors and, where there are, tokenizer files
        (mlx_lm.utils.load). Without tokenizer files the weights load alone (mlx_lm.utils.load_model),
        as a test's folder does: transformers cannot make a tokenizer from nothing."""
        from mlx_lm.utils import load, load_model

        folder = Path(path).expanduser()
        if not (folder / "config.json").is_file():
            raise ModelFileError(f"{folder} is not an MLX model folder: it has no config.json.")
        if not any(folder.glob("model*.safetensors")):
            raise ModelFileError(
                f"{folder} has no model*.safetensors: convert the model to MLX first (mlx_lm.convert)."
            )
        try:
            if any((folder / f).is_file() for f in TOKENIZER_FILES):
                module, tokenizer, config = load(str(folder), return_config=True)
            else:
                (module, config), tokenizer = load_model(folder), None
        except (ValueError, KeyError, FileNotFoundError, json.JSONDecodeError) as e:
            raise ModelFileError(f"mlx-lm could not load {folder.name}: {e}") from e
        n_vocab = _vocab_size(module, config)
        model = cls(module, n_vocab, folder.name, tokenizer, options, config.get("max_position_embeddings"))
        model.path = folder
        return model

    def piece(self, token: int) -> bytes:
        """The bytes a token stands for (special tokens render as nothing)."""
        cached = self._pieces.get(token)
        if cached is None:
            cached = self._pieces[token] = self._piece(token)
        return cached

    def _piece(self, token: int) -> bytes:
        tok = self.tokenizer
        if tok is None:
            return f"<{token}>".encode()
        if token in self._special:
            return b""
        spelling = tok.convert_ids_to_tokens(token)
        if spelling is None:
            return b""
        if self._byte_level:  # GPT-2's byte-to-character map: every byte, a UTF-8 character cut too
            decoder = _byte_decoder()
            if all(c in decoder for c in spelling):
                return bytes(decoder[c] for c in spelling)
        if spelling.startswith("<0x") and spelling.endswith(">") and len(spelling) == 6:  # SentencePiece's byte tokens
            return bytes([int(spelling[3:5], 16)])
        if "\u2581" in spelling:  # SentencePiece's word boundary
            return spelling.replace("\u2581", " ").encode()
        return tok.decode([token]).encode()

    def is_eog(self, token: int) -> bool:
        """Whether the token ends generation (the tokenizer's end-of-sequence ids)."""
        return token in self._eog

    def eog_tokens(self) -> tuple[int, ...]:
        """Every end-of-generation token id: none for a model built without a tokenizer."""
        return self._eog

    def tokenize(self, text: str) -> list[int]:
        """Text to token ids, through the tokenizer (special tokens such as <|im_start|> parsed)."""
        if self.tokenizer is None:
            raise ModelFileError(f"{self.name} has no tokenizer: give it token ids.")
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def new_context(self, max_rows: int = 1, kept_rows: int = 0, options: MlxOptions | None = None) -> MlxContext:
        """A context of its own on this model (RuntimeModel.new_context); `kept_rows` is accepted
        and unused, since no MLX context keeps rows on the device yet (keep_draft_rows is off)."""
        return MlxContext(self, options or self.options, max_rows=max_rows)


def _vocab_size(module: nn.Module, config: dict) -> int:
    args = getattr(module, "args", None)
    size = (
        getattr(args, "vocab_size", None) or config.get("vocab_size") or config.get("text_config", {}).get("vocab_size")
    )
    if not size:
        raise ModelFileError("the model's config.json says no vocab_size.")
    return int(size)


def _is_byte_level(tokenizer: Any | None) -> bool:
    if tokenizer is None:
        return False
    from mlx_lm.tokenizer_utils import BPEStreamingDetokenizer

    return isinstance(getattr(tokenizer, "_detokenizer", None), BPEStreamingDetokenizer)


@functools.cache
def _byte_decoder() -> dict[str, int]:
    from mlx_lm.tokenizer_utils import _byte_decoder as decoder

    return decoder()
