"""What the round needs from a backend: a model's vocabulary, and a context that decodes batches.

The round (engine.speculative), the drafters that need no particular backend (a draft model,
n-grams) and the measurement code speak to these protocols alone; llama.cpp
(engine.runtime.llama) is one implementation. A backend says what it can accelerate in one
frozen `Acceleration`, resolved once from the options a program asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

if TYPE_CHECKING:
    from engine.runtime.side import SideWork

# (tokens, position of the first, the model's hidden state per token, [len(tokens), n_embd], or None)
BatchObserver = Callable[[list[int], int, "np.ndarray | None"], None]
# The most banned tokens whose logits come back with a row the device keeps (RuntimeContext.keep_banned).
MAX_BANNED = 16


class DeviceDraft(Protocol):
    """A greedy draft launched on the device and not yet waited for (an MLX draft model's chain): its
    ids as the device's array, which a verify on that device takes in as they stand, and a read of
    its ids and rows (float32, the ban written in), waiting for them unless the verify's wait did."""

    n: int
    ids: Any  # the device's array of the n ids, unevaluated
    rows: Any  # the device's [n, vocab] logits, unevaluated
    row_parts: list[tuple[float, float]] | None  # once read: each row's softmax_parts, where the device took them

    def arrays(self) -> list[Any]:
        """Every array a wait for the draft takes in (its ids and rows among them)."""
        ...

    def read(self, waited: bool = False) -> tuple[list[int], np.ndarray]: ...


class LaunchedDraft(Protocol):
    """A draft as a verify sees it (engine.drafting.base.Draft): its tokens, or its ids still on the
    device (`unread`) and the read once the verify's wait has them (`settle`)."""

    @property
    def tokens(self) -> list[int]: ...

    def unread(self) -> DeviceDraft | None: ...

    def settle(self, waited: bool = False) -> None: ...


@dataclass(frozen=True)
class Acceleration:
    """Each acceleration a context may use, as the backend resolved it: one name a switch, each
    the name of the option that asks for it (engine.runtime.llama.RuntimeOptions)."""

    # Each greedy token is taken on the device, in the decode (RuntimeContext.device_choices),
    # with each row's softmax normaliser (RuntimeContext.device_parts).
    argmax_on_device: bool = False
    # A draft model's rows stay on the device (RuntimeContext.keeps_rows, kept_row).
    keep_draft_rows: bool = False
    # The probabilities a reply reports are computed in the next decode's wait (side work).
    overlap_probabilities: bool = False
    # A draft model takes in its round's last draft while the target verifies the round.
    overlap_drafter: bool = False
    # And, greedy, guesses the verify's outcome and decodes that guess beside it.
    guess_outcome: bool = False
    # A draft model decodes every step at one shape (the last two tokens).
    steady_draft_shape: bool = False


class RunOptions(Protocol):
    """How a backend loads and runs a model (engine.runtime.llama.RuntimeOptions,
    engine.runtime.mlx.MlxOptions): opaque to the round but for the accelerations it asks for, and
    what a box profile is keyed by."""

    runtime: ClassVar[str]  # "llama" or "mlx" (engine.runtime.formats.RUNTIMES)
    # Each runtime's options are a frozen dataclass: a caller varies one with dataclasses.replace.
    __dataclass_fields__: ClassVar[dict[str, Any]]
    pipelined_rounds: ClassVar[bool]  # a round may overlap its next step, so it can take less than a lone pass

    @property
    def n_ctx(self) -> int: ...

    @property
    def mode(self) -> str:
        """How exact its batches are asked to be ("exact", "fast"), or its device on MLX."""
        ...

    @property
    def threads(self) -> int: ...

    def runtime_version(self) -> str:
        """The runtime's name and version, for profiles' keys and reports."""
        ...

    def acceleration(self) -> Acceleration:
        """Each acceleration asked for, resolved for this backend and device."""
        ...


class RuntimeModel(Protocol):
    """A loaded model as the round sees it: its name and vocabulary, and how to open a context."""

    n_vocab: int

    @property
    def name(self) -> str: ...

    @property
    def options(self) -> RunOptions:
        """What it was loaded with, and its contexts run on by default."""
        ...

    def piece(self, token: int) -> bytes:
        """The bytes a token stands for (special tokens render as nothing)."""
        ...

    def is_eog(self, token: int) -> bool:
        """Whether the token ends generation (end of text, end of turn)."""
        ...

    def eog_tokens(self) -> tuple[int, ...]:
        """Every end-of-generation token id."""
        ...

    def new_context(self, max_rows: int = 1, kept_rows: int = 0, options: RunOptions | None = None) -> RuntimeContext:
        """A context of its own on this model, for `max_rows` rows of logits a decode; with
        `kept_rows`, a draft model's rows kept on the device in as many slots; on `options` or
        the model's own."""
        ...


class TextModel(RuntimeModel, Protocol):
    """A loaded model with its tokenizer, as chats, templates and the pairing rules see it: what
    the engine asks of a target or a draft model on any runtime."""

    @property
    def n_ctx_train(self) -> int: ...

    @property
    def bos(self) -> int:
        """The beginning-of-sequence token; -1 for none."""
        ...

    @property
    def eos(self) -> int: ...

    @property
    def add_bos(self) -> bool:
        """Whether a prompt starts with `bos`."""
        ...

    @property
    def add_eos(self) -> bool: ...

    @property
    def vocab_type(self) -> int:
        """llama.cpp's numbers: 1 SentencePiece, 2 byte-level BPE, ..."""
        ...

    @property
    def path(self) -> Path | None:
        """The file or folder it was loaded from."""
        ...

    @property
    def architecture(self) -> str:
        """ "qwen2", "llama", "qwen3_5", ..."""
        ...

    @property
    def chat_template(self) -> str | None:
        """The chat template the model carries, or None."""
        ...

    @property
    def state_kind(self) -> str:
        """ "recurrent", "hybrid" (recurrent and attention layers), or "" (attention alone)."""
        ...

    @property
    def longest_piece(self) -> int:
        """Bytes in the vocabulary's longest token: a bound on what one token can spell."""
        ...

    def tokenize(self, text: str, add_special: bool = False, parse_special: bool = True) -> list[int]:
        """Text to token ids; special tokens such as <|im_start|> parsed by default."""
        ...

    def token_text(self, token: int) -> str:
        """The vocabulary's own spelling of a token (as stored, e.g. 'Ġthe')."""
        ...

    def display(self, token: int) -> str:
        """A token as a person reads it: its text, or its spelling if special."""
        ...

    def describe(self) -> str: ...

    def close(self) -> None: ...


class RuntimeContext(Protocol):
    """One inference context: its cache, a decode that hands back rows of logits, a rewind."""

    acceleration: Acceleration
    n_ctx: int  # positions the cache holds at most
    max_rows: int  # rows of logits one decode hands back at most: 1 + the deepest draft it verifies
    tokens: list[int]  # what the cache holds, position by position
    decode_s: float  # time inside the backend's decodes so far (the round's accounting)
    has_state: bool  # a recurrent state beside (or instead of) a KV cache
    rollback_depth: int  # how far back the latest batch can be undone
    fed_at: float  # when the latest fed batch was launched (time.perf_counter), for its cost beside a verify

    @property
    def model(self) -> RuntimeModel: ...

    @property
    def n_past(self) -> int: ...

    @property
    def host_syncs(self) -> int | None:
        """The host's waits for the device so far, where the runtime counts them (the eval audit): on
        MLX every context's and drafter's in the process, so a round reads its target's alone."""
        ...

    @property
    def can_rewind(self) -> bool:
        """Whether a verify batch of max_rows can be undone down to its first row."""
        ...

    def describe_rollback(self) -> str:
        """How this context undoes a rejected draft, in a sentence."""
        ...

    def decode(self, tokens: list[int], all_logits: bool, side: SideWork | None = None) -> np.ndarray:
        """Decode tokens at the next positions; their rows (all_logits) or the last, valid until the
        next decode. `side` is work to do in the decode's wait, before its rows are read."""
        ...

    def decode_unread(self, last: int, draft: LaunchedDraft) -> np.ndarray:
        """The verify's rows for [last, *draft] where the draft is still on this device (Draft.unread):
        its ids taken in as they stand, one wait for the rows and the draft's tokens together."""
        ...

    def pipeline_greedy(self, banned: tuple[int, ...]) -> None:
        """The next decode is a plain step whose token is its row's argmax (`banned` aside), and a plain
        step follows it: a context may launch that step on the device's own guess before the rows are
        read (MLX, as mlx-lm's generate_step); one whose guess was wrong drops it."""
        ...

    def ban_in_rows(self, banned: tuple[int, ...]) -> bool:
        """Whether the next decode's rows come back with `banned` given -inf, the ban added on the
        device before they are read (MLX); False where the caller writes it into the rows (llama.cpp)."""
        ...

    def defer_rows(self) -> bool:
        """Whether the next decode's rows may stay on the device until something reads them (an
        array-like, copied to the host on first use): a greedy round that reads only the device's
        argmax and softmax parts (device_choices, device_parts) asks, and copies no row (MLX on a
        GPU); False where the rows are the host's anyway (llama.cpp, MLX's CPU backend)."""
        ...

    def feed(self, tokens: list[int], side: SideWork | None = None) -> None:
        """Decode without waiting for the rows (an accelerator computes on); `collect` reads them."""
        ...

    @property
    def unread(self) -> bool:
        """Whether the latest decode was fed and its row is still to be collected."""
        ...

    def collect(self, side: SideWork | None = None) -> np.ndarray:
        """The row of the latest fed batch, once the device has it."""
        ...

    def rewind(self, keep: int) -> None:
        """Forget every position from `keep` on."""
        ...

    def sync(self, tokens: list[int]) -> int:
        """Make the cache hold exactly `tokens`, keeping the longest common prefix; tokens decoded."""
        ...

    def prefill(self, tokens: list[int]) -> tuple[np.ndarray, int]:
        """Make the cache hold `tokens`; the last token's row (a copy) and how many were decoded."""
        ...

    def clear(self) -> None: ...

    def close(self) -> None: ...

    def stoppable(self, cancelled: Callable[[], bool]) -> AbstractContextManager[None]:
        """Decodes inside end as soon as `cancelled()` says so, mid-batch too (engine.errors.Cancelled)."""
        ...

    def observe_batches(self, observer: BatchObserver, hidden_states: bool = True) -> Callable[[], None]:
        """Hand every decoded batch to `observer` (a drafter reading the target); returns the way to stop."""
        ...

    def observers_paused(self) -> AbstractContextManager[None]:
        """Decode without telling the observers: a plain reply."""
        ...

    # The accelerations' seams: each answers None (or False) where the backend does not do it.

    def device_choices(self, banned: tuple[int, ...] = ()) -> list[int | None] | None:
        """The latest decode's greedy token per row, where the device took them (argmax_on_device)."""
        ...

    def device_parts(self, rows: np.ndarray, banned: tuple[int, ...] = ()) -> list[tuple[float, float] | None] | None:
        """Each row's softmax_parts from the device's argmax and normaliser, where it took them."""
        ...

    @property
    def keeps_rows(self) -> bool:
        """Whether each decode's row stays on the device (keep_draft_rows); `kept_row` fetches one."""
        ...

    def keep_banned(self, banned: tuple[int, ...]) -> None:
        """The logits of `banned` (at most MAX_BANNED) come back with each kept row."""
        ...

    def kept_row(self, position: int, out: np.ndarray) -> np.ndarray:
        """The kept row at `position`, copied into `out`."""
        ...
