"""A loaded GGUF model: weights, vocabulary and metadata, through llama.cpp.

engine.runtime.llama.context holds the other half, a context: decoding batches, logits, rewinds.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import llama_cpp.llama_cpp as llama

from engine.errors import ModelFileError
from engine.runtime.gguf import GGUFInfo, read_gguf
from engine.runtime.llama.backend import clear_log, init_backend, llama_reason
from engine.runtime.llama.context import Context
from engine.runtime.llama.loadcheck import check_loadable
from engine.runtime.llama.options import RuntimeOptions
from engine.runtime.llama.probe import ensure_loadable
from engine.runtime.protocol import RunOptions


class Model:
    """A loaded GGUF model: weights, vocabulary and metadata."""

    def __init__(self, path: str | Path, options: RuntimeOptions | None = None, vocab_only: bool = False):
        self.options = options or RuntimeOptions()
        self.path = Path(path).expanduser()
        self.info: GGUFInfo = read_gguf(self.path)
        load_mtp = self.info.nextn_layers > 0
        if not vocab_only:  # llama.cpp reads no layer metadata for a vocabulary alone
            check_loadable(self.info)
        ensure_loadable(self.info, vocab_only, load_mtp)  # what llama.cpp would abort on, in a child
        init_backend()
        params = llama.llama_model_default_params()
        params.n_gpu_layers = self.options.gpu_layers
        params.use_extra_bufts = not self.options.exact
        params.vocab_only = vocab_only
        # A model's own MTP heads load with it, so it can draft for itself (engine.drafting.llama.mtp).
        params.load_mtp = load_mtp
        clear_log()
        ptr = llama.llama_model_load_from_file(str(self.path).encode(), params)
        if not ptr:
            reason = llama_reason() or "no reason given"
            raise ModelFileError(f"llama.cpp could not load {self.path.name}: {reason}")
        self.ptr = ptr
        self.vocab = llama.llama_model_get_vocab(ptr)
        self.n_vocab: int = llama.llama_vocab_n_tokens(self.vocab)
        self.vocab_type: int = llama.llama_vocab_type(self.vocab)
        self.bos: int = llama.llama_vocab_bos(self.vocab)
        self.eos: int = llama.llama_vocab_eos(self.vocab)
        self.add_bos: bool = bool(llama.llama_vocab_get_add_bos(self.vocab))
        self.add_eos: bool = bool(llama.llama_vocab_get_add_eos(self.vocab))
        self.n_ctx_train: int = llama.llama_model_n_ctx_train(ptr)
        self.vocab_only = vocab_only
        self._pieces: dict[int, bytes] = {}
        self._eog: tuple[int, ...] | None = None
        self._eog_of: dict[int, bool] = {}  # is_eog, per token id asked
        self._piece_buf = ctypes.create_string_buffer(256)

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def chat_template(self) -> str | None:
        """The chat template the file carries (tokenizer.chat_template), or None."""
        return self.info.chat_template

    @property
    def architecture(self) -> str:
        """general.architecture: "qwen2", "llama", "qwen35", ..."""
        return self.info.architecture

    def describe(self) -> str:
        buf = ctypes.create_string_buffer(256)
        llama.llama_model_desc(self.ptr, buf, len(buf))
        return buf.value.decode("utf-8", errors="replace")

    @property
    def state_kind(self) -> str:
        """ "recurrent" (a state-space or RWKV model), "hybrid" (recurrent and attention layers), or ""
        (attention alone): what llama.cpp says of the architecture, known from a vocabulary-only load."""
        if llama.llama_model_is_hybrid(self.ptr):
            return "hybrid"
        return "recurrent" if llama.llama_model_is_recurrent(self.ptr) else ""

    def tokenize(self, text: str, add_special: bool = False, parse_special: bool = True) -> list[int]:
        """Text to token ids. Special tokens such as <|im_start|> are parsed by default."""
        data = text.encode("utf-8")
        cap = len(data) + 16
        buf = (llama.llama_token * cap)()
        n = llama.llama_tokenize(self.vocab, data, len(data), buf, cap, add_special, parse_special)
        if n < 0:
            cap = -n
            buf = (llama.llama_token * cap)()
            n = llama.llama_tokenize(self.vocab, data, len(data), buf, cap, add_special, parse_special)
        return list(buf[:n])

    def piece(self, token: int) -> bytes:
        """The bytes a token stands for (special tokens render as nothing)."""
        cached = self._pieces.get(token)
        if cached is None:
            n = llama.llama_token_to_piece(self.vocab, token, self._piece_buf, len(self._piece_buf), 0, False)
            if n < 0:
                big = ctypes.create_string_buffer(-n)
                n = llama.llama_token_to_piece(self.vocab, token, big, -n, 0, False)
                cached = big.raw[:n]
            else:
                cached = self._piece_buf.raw[:n]
            self._pieces[token] = cached
        return cached

    @functools.cached_property
    def longest_piece(self) -> int:
        """Bytes in the vocabulary's longest token (at least 1): a bound on what one token can spell."""
        longest = 1
        for token in range(self.n_vocab):  # special tokens too: a prompt's text spells them (<|im_start|>)
            n = llama.llama_token_to_piece(self.vocab, token, self._piece_buf, len(self._piece_buf), 0, True)
            longest = max(longest, abs(n))
        return longest

    def token_text(self, token: int) -> str:
        """The vocabulary's own spelling of a token (as stored, e.g. 'Ġthe')."""
        raw = llama.llama_vocab_get_text(self.vocab, token)
        return raw.decode("utf-8", errors="replace") if raw else ""

    def display(self, token: int) -> str:
        """A token as a person reads it: its text, or its vocabulary spelling if special."""
        text = self.piece(token).decode("utf-8", errors="replace")
        return text if text else self.token_text(token)

    def is_eog(self, token: int) -> bool:
        known = self._eog_of.get(token)
        if known is None:  # asked of every emitted token: llama.cpp is asked once a token id
            known = self._eog_of[token] = bool(llama.llama_vocab_is_eog(self.vocab, token))
        return known

    def eog_tokens(self) -> tuple[int, ...]:
        """Every end-of-generation token id (end of text, end of turn, ...)."""
        if self._eog is None:
            self._eog = tuple(t for t in range(self.n_vocab) if llama.llama_vocab_is_eog(self.vocab, t))
        return self._eog

    def meta(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(1 << 16)
        n = llama.llama_model_meta_val_str(self.ptr, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", errors="replace") if n >= 0 else None

    def close(self) -> None:
        if getattr(self, "ptr", None):
            llama.llama_model_free(self.ptr)
            self.ptr = None

    def __del__(self) -> None:
        self.close()

    def new_context(self, max_rows: int = 1, kept_rows: int = 0, options: RunOptions | None = None) -> Context:
        """A context on this model (RuntimeModel.new_context), on `options` or the model's own."""
        if options is not None and not isinstance(options, RuntimeOptions):
            raise TypeError(f"a llama.cpp context runs on llama.cpp's options, not {type(options).__name__}")
        return Context(self, options, max_rows=max_rows, kept_rows=kept_rows)
