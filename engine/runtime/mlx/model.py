"""An MLX model as a RuntimeModel: mlx-lm's own model classes, its loader, its tokenizer.

engine.runtime.mlx.context holds the other half, a context: the KV cache, decoding batches, rewinds.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Literal

import mlx.nn as nn

from engine.errors import ModelFileError
from engine.runtime.mlx.context import MlxContext
from engine.runtime.mlx.hidden import Parts
from engine.runtime.mlx.joined import join
from engine.runtime.mlx.options import MlxOptions
from engine.runtime.mlx_check import check_folder, loader_errors
from engine.runtime.protocol import RunOptions

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
        path: Path | None = None,
        architecture: str = "",
    ) -> None:
        """A model already built (a test's random weights); `tokenizer` is mlx-lm's TokenizerWrapper,
        or None: then no token ends generation and token t's piece is "<t>"."""
        self.module = module
        self.n_vocab = n_vocab
        self.name = name
        self.tokenizer = tokenizer
        self.options = options or MlxOptions()
        # Projection groups run as one matmul in our decodes (engine.runtime.mlx.joined); 0: none joined.
        self.joined_groups = join(module) if self.options.joins() else 0
        self.path = path  # the folder it was loaded from; None for a model built in memory
        self.architecture = architecture or getattr(getattr(module, "args", None), "model_type", "") or ""
        self.bits: int | None = None  # the weights' quantization, where config.json says one
        args = getattr(module, "args", None)
        self.n_ctx_train = n_ctx_train or getattr(args, "max_position_embeddings", None) or self.options.n_ctx
        self._pieces: dict[int, bytes] = {}
        self._special: frozenset[int] = frozenset(getattr(tokenizer, "all_special_ids", ()) or ())
        eog = getattr(tokenizer, "eos_token_ids", None) or ()
        self._eog: tuple[int, ...] = tuple(sorted(int(t) for t in eog if 0 <= int(t) < n_vocab))
        self._byte_level = _is_byte_level(tokenizer)
        self.bos, self.add_bos = _added(tokenizer, "bos_token_id", first=True)
        self.eos, self.add_eos = _added(tokenizer, "eos_token_id", first=False)
        if self.eos < 0 and self._eog:
            self.eos = self._eog[0]

    @classmethod
    def load(cls, path: str | Path, options: MlxOptions | None = None) -> MlxModel:
        """An MLX model folder: config.json, model*.safetensors and, where there are, tokenizer files
        (mlx_lm.utils.load). Without tokenizer files the weights load alone (mlx_lm.utils.load_model),
        as a test's folder does: transformers cannot make a tokenizer from nothing."""
        from mlx_lm.utils import load, load_model

        folder = Path(path).expanduser()
        check_folder(folder)  # nothing unchecked reaches mlx-lm
        with loader_errors(folder, "mlx-lm"):
            if any((folder / f).is_file() for f in TOKENIZER_FILES):
                module, tokenizer, config = load(str(folder), return_config=True)
            else:
                (module, config), tokenizer = load_model(folder), None
        n_vocab = _vocab_size(module, config)
        n_ctx_train = config.get("max_position_embeddings")
        model = cls(
            module,
            n_vocab,
            folder.name,
            tokenizer,
            options,
            n_ctx_train if isinstance(n_ctx_train, int) and n_ctx_train > 0 else None,
            path=folder,
            architecture=str(config.get("model_type") or ""),
        )
        quantization = config.get("quantization")  # {"bits": 4, "group_size": 64} where quantized
        bits = quantization.get("bits") if isinstance(quantization, dict) else None
        model.bits = bits if isinstance(bits, int) and 0 < bits <= 32 else None
        wire_weights()
        return model

    @property
    def chat_template(self) -> str | None:
        """The tokenizer's chat template (tokenizer_config.json's or chat_template.jinja), or None."""
        template = getattr(self.tokenizer, "chat_template", None)
        return template if isinstance(template, str) and template.strip() else None

    @property
    def vocab_type(self) -> int:
        """llama.cpp's vocabulary type numbers (engine.models.compat.VOCAB_TYPES) for the tokenizer's model:
        byte-level BPE 2, SentencePiece 1, WordPiece 3, Unigram 4; 0 without a tokenizer."""
        if self.tokenizer is None:
            return 0
        if self._byte_level:
            return 2
        backend = getattr(getattr(self.tokenizer, "_tokenizer", None), "backend_tokenizer", None)
        kind = type(backend.model).__name__ if backend is not None else ""
        return {"BPE": 1, "WordPiece": 3, "Unigram": 4}.get(kind, 1)

    @property
    def state_kind(self) -> Literal["", "hybrid", "recurrent"]:
        """ "recurrent" (every layer keeps a state), "hybrid" (recurrent and attention layers), or ""
        (attention alone), from the caches mlx-lm makes for the model."""
        from mlx_lm.models.cache import KVCache, RotatingKVCache, make_prompt_cache

        caches = make_prompt_cache(self.module)
        attention = [isinstance(c, (KVCache, RotatingKVCache)) or c.is_trimmable() for c in caches]
        if all(attention):
            return ""
        return "hybrid" if any(attention) else "recurrent"

    def describe(self) -> str:
        """The model in a few words: its architecture and its weights' size."""
        from mlx.utils import tree_flatten

        n = sum(v.size for _, v in tree_flatten(self.module.parameters()))
        bits = self.bits
        return f"{self.architecture or 'mlx'} {n / 1e9:.2f}B parameters" + (f", {bits}-bit" if bits else "")

    def token_text(self, token: int) -> str:
        """The vocabulary's own spelling of a token (as stored, e.g. 'Ġthe')."""
        if self.tokenizer is None:
            return f"<{token}>"
        spelling = self.tokenizer.convert_ids_to_tokens(int(token))
        return spelling if isinstance(spelling, str) else ""

    def display(self, token: int) -> str:
        """A token as a person reads it: its text, or its vocabulary spelling if special."""
        text = self.piece(token).decode("utf-8", errors="replace")
        return text if text else self.token_text(token)

    @functools.cached_property
    def longest_piece(self) -> int:
        """Bytes in the vocabulary's longest token (at least 1), special tokens by their spelling."""
        return max([1, *(max(len(self.piece(t)), len(self.token_text(t).encode())) for t in range(self.n_vocab))])

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

    def tokenize(self, text: str, add_special: bool = False, parse_special: bool = True) -> list[int]:
        """Text to token ids, through the tokenizer; special tokens such as <|im_start|> are parsed
        by default (as llama.cpp's tokenize), `add_special` adds the BOS/EOS the tokenizer adds."""
        if self.tokenizer is None:
            raise ModelFileError(f"{self.name} has no tokenizer: give it token ids.")
        ids = self.tokenizer.encode(text, add_special_tokens=add_special, split_special_tokens=not parse_special)
        return [int(t) for t in ids]

    def close(self) -> None:
        """Let go of the weights (MLX frees them once nothing else holds the module)."""
        self.module = None

    @functools.cached_property
    def head_apart(self) -> bool:
        """Whether a decode that reads only its last row may run the head on that row alone
        (hidden.BatchTaps.forward's `last`): the model's logits are its head over its decoder stack,
        checked on one token (hidden.Parts.check), once, before any context decodes (a check inside a
        decode would run under a hybrid's step recording). A model whose logits are more decodes whole."""
        try:
            Parts(self.module, self.name).check()
        except Exception:  # refused, or its code will not run one token without a cache
            return False
        return True

    def new_context(self, max_rows: int = 1, kept_rows: int = 0, options: RunOptions | None = None) -> MlxContext:
        """A context of its own on this model (RuntimeModel.new_context); `kept_rows` is accepted
        and unused, since no MLX context keeps rows on the device yet (keep_draft_rows is off)."""
        if options is not None and not isinstance(options, MlxOptions):
            raise TypeError(f"an MLX context runs on MLX's options, not {type(options).__name__}")
        return MlxContext(self, options or self.options, max_rows=max_rows)


def _vocab_size(module: nn.Module, config: dict) -> int:
    args = getattr(module, "args", None)
    size = (
        getattr(args, "vocab_size", None) or config.get("vocab_size") or config.get("text_config", {}).get("vocab_size")
    )
    if not size:
        raise ModelFileError("the model's config.json says no vocab_size.")
    return int(size)


def _added(tokenizer: Any | None, attribute: str, first: bool) -> tuple[int, bool]:
    """A special token's id (-1 for none) and whether encoding with special tokens adds it."""
    if tokenizer is None:
        return -1, False
    token = getattr(tokenizer, attribute, None)
    if not isinstance(token, int):
        return -1, False
    try:
        plain = tokenizer.encode("a", add_special_tokens=False)
        added = tokenizer.encode("a", add_special_tokens=True)
    except Exception:  # a tokenizer that cannot encode a letter: nothing is added
        return token, False
    extra = added[: len(added) - len(plain)] if first else added[len(plain) :]
    return token, token in extra and len(added) > len(plain)


def _is_byte_level(tokenizer: Any | None) -> bool:
    if tokenizer is None:
        return False
    from mlx_lm.tokenizer_utils import BPEStreamingDetokenizer

    return isinstance(getattr(tokenizer, "_detokenizer", None), BPEStreamingDetokenizer)


@functools.cache
def _byte_decoder() -> dict[str, int]:
    from mlx_lm.tokenizer_utils import _byte_decoder as decoder

    return decoder()


@functools.cache
def wire_weights() -> None:
    """Keep the weights resident where MLX allows (Metal's wired limit at its recommended working set,
    as mlx-lm's generate does), once for the process, where the device recommends one (not on a CPU)."""
    from mlx_lm.utils import maybe_set_recommended_wired_limit

    maybe_set_recommended_wired_limit()
