"""How a llama.cpp model is loaded and run, and the accelerations that resolves to on this build."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

from engine.runtime.gguf import GGUFInfo
from engine.runtime.llama.backend import default_threads, offloads_to_cuda, offloads_to_gpu, runtime_version
from engine.runtime.protocol import Acceleration, RuntimeModel

KV_TYPES = {"f16": 1, "q8_0": 8}  # ggml type ids


@dataclass(frozen=True)
class RuntimeOptions:
    """How a model is loaded and run."""

    runtime: ClassVar[str] = "llama"
    pipelined_rounds: ClassVar[bool] = False  # a round's passes run one after another
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

    def acceleration(self) -> Acceleration:
        """Each acceleration these options ask for, resolved for this llama.cpp build and device."""
        return _resolve(self, self.on_gpu, self.gpu_layers != 0 and offloads_to_cuda())

    @property
    def threads(self) -> int:
        return self.n_threads or default_threads()

    @property
    def mode(self) -> str:
        return "exact" if self.exact else "fast"

    def runtime_version(self) -> str:
        return runtime_version()

    @property
    def kv_type(self) -> str:
        """The KV cache's element type, as llama.cpp's -ctk/-ctv name it."""
        return "q8_0" if self.exact else "f16"


@functools.cache
def _resolve(options: RuntimeOptions, on_gpu: bool, on_cuda: bool) -> Acceleration:
    """Each tri-state switch: None is the default of where it was measured to pay."""
    argmax = on_gpu if options.argmax_on_device is None else options.argmax_on_device
    overlap_drafter = on_cuda if options.overlap_drafter is None else options.overlap_drafter
    return Acceleration(
        argmax_on_device=argmax,
        keep_draft_rows=argmax if options.keep_draft_rows is None else options.keep_draft_rows and argmax,
        overlap_probabilities=on_gpu if options.overlap_probabilities is None else options.overlap_probabilities,
        overlap_drafter=overlap_drafter,
        guess_outcome=overlap_drafter if options.guess_outcome is None else options.guess_outcome and overlap_drafter,
        steady_draft_shape=on_gpu if options.steady_draft_shape is None else options.steady_draft_shape,
    )


class LoadedModel(RuntimeModel, Protocol):
    """What a context needs of its model (engine.runtime.llama.model.Model): its llama.cpp pointer and header."""

    ptr: object
    path: Path
    info: GGUFInfo
    vocab_only: bool
    n_ctx_train: int

    @property
    def options(self) -> RuntimeOptions: ...
