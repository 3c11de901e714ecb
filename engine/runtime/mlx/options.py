"""How an MLX model runs: its options (a RunOptions), and the accelerations they resolve to."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from engine.runtime.protocol import Acceleration

if TYPE_CHECKING:
    from engine.runtime.mlx.cuda_attention import Attend


@dataclass(frozen=True)
class MlxOptions:
    """How an MLX model runs (a RunOptions): its context's size, and the prompt's chunks."""

    runtime: ClassVar[str] = "mlx"
    # A round launches its next step before reading this one (mlx-lm's async eval): a whole round may
    # take less wall time than a lone pass, so a profile does not hold one against the other.
    pipelined_rounds: ClassVar[bool] = True
    n_ctx: int = 4096  # positions a context holds at most (the model's own limit, if smaller)
    prefill_chunk: int = 512  # tokens a decode runs at once; a cancelled prefill stops between chunks
    # Each row's greedy token taken in the decode's graph, read with its rows in one sync. None: on a
    # GPU (where it saves the host a pass over each row); on MLX's CPU backend its argmax is several
    # times slower than numpy's over the same memory, which the rows share without a copy there (a plain
    # step launched on the device's guess takes them on the device everywhere: engine.runtime.mlx.ahead).
    argmax_on_device: bool | None = None
    # A short batch's decode compiled (engine.runtime.mlx.compiled), its attention over the whole KV
    # buffer behind a mask: on MLX's CPU backend (whose attention is plain operations either way) and
    # Metal (its sdpa_vector kernel reads a bool mask), MLX's own attention; on MLX's CUDA build, whose
    # vector kernel takes no mask, our kernel that reads the position instead
    # (engine.runtime.mlx.cuda_attention). None: on everywhere.
    compiled_decode: bool | None = None
    # Each layer's q/k/v projections and its gate/up projections run as one matmul each in our decodes
    # (engine.runtime.mlx.joined): three kernels fewer a layer, the same bytes held. None: on everywhere.
    joined_projections: bool | None = None

    @property
    def mode(self) -> str:
        """MLX has one way to run a batch: its mode is the device it runs on ("mlx cpu", "mlx gpu"), and
        "compiled" where its short decodes are (compiled_decode), "joined" where its projections are
        (joined_projections): a box profile measured one way does not price the other."""
        return f"mlx {device()}" + (" compiled" if self.compiles() else "") + (" joined" if self.joins() else "")

    @property
    def threads(self) -> int:
        return 0  # MLX chooses its own

    def runtime_version(self) -> str:
        return runtime_version()

    def acceleration(self) -> Acceleration:
        """The device's argmax (argmax_on_device, above). The other switches are llama.cpp seams:
        kept rows its output buffers, overlap a decode launched and read later; on MLX each would be
        a lazy graph evaluated later (mx.async_eval), to be measured on Apple silicon."""
        argmax = device() == "gpu" if self.argmax_on_device is None else self.argmax_on_device
        return Acceleration(argmax_on_device=argmax)

    def compiles(self) -> bool:
        """Whether a context's short decodes run compiled (compiled_decode, above)."""
        return True if self.compiled_decode is None else self.compiled_decode

    def joins(self) -> bool:
        """Whether a model's projection groups are joined at load (joined_projections, above)."""
        return True if self.joined_projections is None else self.joined_projections

    def attention(self) -> Attend | None:
        """The attention a compiled decode runs in place of MLX's behind a mask: the CUDA kernel on MLX's
        CUDA build, None elsewhere."""
        import mlx.core as mx

        if device() == "gpu" and not mx.metal.is_available():
            from engine.runtime.mlx.cuda_attention import kernel

            return kernel
        return None


@functools.cache
def device() -> str:
    """MLX's default device: "gpu" (Metal, CUDA) or "cpu"."""
    import mlx.core as mx

    return "gpu" if mx.default_device() == mx.gpu else "cpu"


@functools.cache
def runtime_version() -> str:
    """MLX's and mlx-lm's versions and the device, for profiles' keys and reports."""
    import mlx.core as mx
    import mlx_lm

    return f"mlx {getattr(mx, '__version__', '?')}, mlx-lm {mlx_lm.__version__} ({device()})"
