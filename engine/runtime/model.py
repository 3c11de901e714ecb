"""The llama.cpp binding's first half: the backend, run options, and a loaded model.

Everything here goes through llama-cpp-python's low-level ctypes API. engine.runtime.llama
holds the other half, a context: decoding batches, logits, rewinds.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import llama_cpp.llama_cpp as llama

from engine.errors import ModelFileError
from engine.runtime.gguf import GGUFInfo, read_gguf
from engine.runtime.loadcheck import check_loadable
from engine.runtime.probe import ensure_loadable

KV_TYPES = {"f16": 1, "q8_0": 8}  # ggml type ids
_log_lock = threading.Lock()
_log_state: dict = {"verbose": False, "keeping": False, "recent": []}  # recent: (level, text)
_backend_ready = False


# "llama_model_load: error loading model: error loading model architecture: " before the reason
_LOG_PREFIX = re.compile(r"^(?:[a-z_0-9]+: |error loading model[a-z ]*: )+")
# ggml.h's enum ggml_log_level
GGML_LOG_LEVEL_WARN, GGML_LOG_LEVEL_ERROR, GGML_LOG_LEVEL_CONT = 3, 4, 5


@llama.llama_log_callback
def _log_callback(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
    message = text.decode("utf-8", errors="replace")
    if _log_state["verbose"]:
        os.write(2, text)
    recent = _log_state["recent"]
    if level == GGML_LOG_LEVEL_CONT:  # the rest of the line before it: kept if that was
        if _log_state["keeping"] and recent:
            recent[-1] = (recent[-1][0], recent[-1][1] + message.rstrip("\n"))
        return
    # Warnings and errors are kept to explain a failed load: llama.cpp says why at ERROR.
    _log_state["keeping"] = level in (GGML_LOG_LEVEL_WARN, GGML_LOG_LEVEL_ERROR)
    if _log_state["keeping"]:
        recent.append((level, message.strip()))
        del recent[:-20]


def clear_log() -> None:
    """Forget what llama.cpp said so far: llama_reason() then speaks of the next call alone."""
    _log_state["recent"].clear()


def llama_reason() -> str:
    """llama.cpp's own words for its latest failure: its error lines (else its warnings), or ""."""
    recent = _log_state["recent"]
    errors = [text for level, text in recent if level == GGML_LOG_LEVEL_ERROR] or [text for _, text in recent]
    said: list[str] = []
    for line in errors:
        text = _LOG_PREFIX.sub("", line).strip()
        if text and not text.startswith("failed to load model") and text not in said:
            said.append(text)
    return "; ".join(said)[:600]


def set_verbose(verbose: bool) -> None:
    """Show llama.cpp's own logging on stderr (off by default)."""
    _log_state["verbose"] = verbose


def _init_backend() -> None:
    global _backend_ready
    with _log_lock:
        if not _backend_ready:
            llama.llama_log_set(_log_callback, ctypes.c_void_p(0))
            llama.llama_backend_init()
            _backend_ready = True


@functools.cache
def offloads_to_gpu() -> bool:
    """Whether this llama.cpp build runs layers on a GPU (Metal, CUDA, ...): fixed for the process."""
    _init_backend()
    return bool(llama.llama_supports_gpu_offload())


@functools.cache
def offloads_to_cuda() -> bool:
    """Whether the GPU this llama.cpp build runs layers on is NVIDIA's, through CUDA."""
    return offloads_to_gpu() and "CUDA" in llama.llama_print_system_info().decode(errors="replace")


def default_threads() -> int:
    """Threads for decoding: every core up to 8 (past that, memory bandwidth rules)."""
    return max(1, min(os.cpu_count() or 1, 8))


@dataclass(frozen=True)
class RuntimeOptions:
    """How a model is loaded and run."""

    n_ctx: int = 4096
    n_batch: int = 512  # prompt tokens per prefill batch
    n_threads: int = 0  # 0: default_threads()
    gpu_layers: int = -1  # -1: every layer (Metal on Apple Silicon)
    # Exact: a verify batch computes each row exactly as a single-row pass would, so
    # speculation cannot change greedy output. Two things break that on CPUs: repacked
    # weights (batched GEMM against single-row GEMV), and attention over an f16/f32 KV
    # cache, which takes a split-KV path for one row past 512 positions and a tiled one for
    # many rows. So exact mode keeps weights as stored and the KV cache in Q8_0, for which
    # llama.cpp's CPU attention has one kernel however many rows. Fast mode is llama.cpp's
    # defaults (repacking, f16 cache): quicker on some machines, and the text may change.
    exact: bool = True
    # A draft model decodes every batch at one shape (two rows) where a GPU runs it: CUDA
    # graphs and Metal's pipelines are reused only for a shape seen before, and rows cost
    # little there. None: so on a GPU, not on a CPU (where a second row costs a whole pass).
    steady_draft_shape: bool | None = None
    # The draft model takes in its round's last draft while the target verifies the round: its
    # decode is launched beside the verify (another context, so another CUDA stream), so every
    # step of the next round is a one-row batch with nothing left to catch up, and one CUDA
    # graph serves them all. None: so on CUDA, where it was measured; not on a CPU, where the
    # two decodes take turns and the step is wasted wherever that draft is rejected, nor yet on
    # Metal, where the steady two-row step stays until it is measured there.
    overlap_drafter: bool | None = None
    # And, greedy, it guesses the verify's outcome: while the target verifies, it takes its own
    # choice after the last draft (what it would draft next) and decodes that too. Where the round
    # keeps every draft and the target's token is that guess, the next round's first draft is in
    # hand when it begins: one step fewer on the critical path. A wrong guess costs the device a
    # step beside the verify and is cut back like a refused draft. None: wherever the drafter
    # takes in its last draft during the verify (overlap_drafter).
    guess_outcome: bool | None = None
    # Compute the probabilities the events report while the next decode runs on the device
    # (engine.runtime.side), each round's events then going out after the next round's first
    # decode. None: so on a GPU; on a CPU a decode leaves nothing to overlap with.
    overlap_probabilities: bool | None = None
    # Each greedy token is the argmax of its row, taken by llama.cpp on the device as part of
    # the decode (a backend sampler) rather than by numpy on the row once it has arrived: on
    # a GPU the host then never scans a row before the next decode can launch. The rows still
    # arrive for the probabilities. None: so on a GPU; on a CPU the same scan runs in the
    # graph's own threads, and costs the same.
    argmax_on_device: bool | None = None
    # A draft model's rows stay on the device: each step writes its row into a tensor there and
    # hands the host only its argmax's logit and the banned tokens' (RowKeeper), where the host
    # used to take in the whole row and copy it (about 100 us a step on the H200's host); a row
    # is fetched only where all of it is read (a refused draft's rank, sampling). None: wherever
    # the argmax is taken on the device.
    keep_draft_rows: bool | None = None

    @property
    def on_gpu(self) -> bool:
        return self.gpu_layers != 0 and offloads_to_gpu()

    @property
    def steady_draft(self) -> bool:
        return self.on_gpu if self.steady_draft_shape is None else self.steady_draft_shape

    @property
    def drafter_overlaps(self) -> bool:
        on_cuda = self.gpu_layers != 0 and offloads_to_cuda()
        return on_cuda if self.overlap_drafter is None else self.overlap_drafter

    @property
    def drafter_guesses(self) -> bool:
        return self.drafter_overlaps if self.guess_outcome is None else self.guess_outcome and self.drafter_overlaps

    @property
    def overlap(self) -> bool:
        return self.on_gpu if self.overlap_probabilities is None else self.overlap_probabilities

    @property
    def device_argmax(self) -> bool:
        return self.on_gpu if self.argmax_on_device is None else self.argmax_on_device

    @property
    def draft_rows_kept(self) -> bool:
        return self.device_argmax if self.keep_draft_rows is None else self.keep_draft_rows and self.device_argmax

    @property
    def threads(self) -> int:
        return self.n_threads or default_threads()

    @property
    def mode(self) -> str:
        return "exact" if self.exact else "fast"

    @property
    def kv_type(self) -> str:
        """The KV cache's element type, as llama.cpp's -ctk/-ctv name it."""
        return "q8_0" if self.exact else "f16"


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
        _init_backend()
        params = llama.llama_model_default_params()
        params.n_gpu_layers = self.options.gpu_layers
        params.use_extra_bufts = not self.options.exact
        params.vocab_only = vocab_only
        # A model's own MTP heads load with it, so it can draft for itself (engine.drafting.mtp).
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

    def size_bytes(self) -> int:
        return int(llama.llama_model_size(self.ptr))

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


def runtime_version() -> str:
    """llama-cpp-python's version and llama.cpp's system info, for cache keys and reports."""
    import llama_cpp

    return f"llama-cpp-python {llama_cpp.__version__}"


def system_info() -> str:
    _init_backend()
    return llama.llama_print_system_info().decode("utf-8", errors="replace").strip()
