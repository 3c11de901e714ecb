"""Which runtime runs a pair faster on this box: llama.cpp on the GGUF files, MLX on their conversions.

Where a GGUF target has an MLX conversion in the cache (engine.models.mlx_conversions; `make
mlx-models` or `python -m engine.models.mlx_conversions NAME` writes them), the pairing doctor loads
the pair on each runtime and times the same greedy reply at the probe's depth; the first reply on
each warms it up, the second is timed. Nothing is converted here: a conversion can take minutes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.chat import Message
from engine.drafting import kinds
from engine.errors import DraftlightError
from engine.events import RunStats
from engine.rounds import GenerationConfig
from engine.runtime import RuntimeOptions
from engine.runtime.formats import LLAMA, MLX, runtime_name
from engine.runtime.llama import RUNTIME as LLAMA_RUNTIME

COMPARE_TOKENS = 32


@dataclass(frozen=True)
class RuntimeSpeed:
    runtime: str  # "llama" or "mlx"
    decode_tps: float
    tokens: int


@dataclass(frozen=True)
class RuntimeComparison:
    speeds: tuple[RuntimeSpeed, ...] = ()
    note: str = ""  # why nothing was measured, or what failed

    def sentence(self) -> str:
        if len(self.speeds) < 2:
            return self.note
        fast, slow = sorted(self.speeds, key=lambda s: -s.decode_tps)
        figures = " and ".join(f"{runtime_name(s.runtime)} {s.decode_tps:.1f} tok/s" for s in self.speeds)
        ratio = fast.decode_tps / slow.decode_tps if slow.decode_tps else float("inf")
        return (
            f"Measured on this box, the same greedy reply ({fast.tokens} tokens): {figures}; "
            f"{runtime_name(fast.runtime)} is {ratio:.2f}x as fast as {runtime_name(slow.runtime)} here."
        )


def mlx_installed() -> bool:
    try:
        import engine.runtime.mlx.model  # noqa: F401
    except ImportError:
        return False
    return True


def existing_conversion(gguf: Path) -> Path | None:
    """The MLX folder already converted from this GGUF file in the cache, or None (nothing converted)."""
    try:
        from engine.models.mlx_conversions import conversions_dir
        from engine.runtime.mlx.convert import converted_folder
    except ImportError:  # MLX is not installed here: one runtime only
        return None
    return converted_folder(gguf, cache=conversions_dir())


def compare_runtimes(
    target: Path,
    drafter: Path | str,
    options: RuntimeOptions,
    prompt: str,
    depth: int,
    max_tokens: int = COMPARE_TOKENS,
    say: Callable[[str], None] = lambda _said: None,
) -> RuntimeComparison:
    """Both runtimes timed on this pair (a GGUF target whose MLX conversion exists, and a drafter that
    is a keyword kind or a GGUF file converted too); a note saying why not where they cannot be."""
    if not LLAMA_RUNTIME.owns(target) or not mlx_installed():
        return RuntimeComparison()  # one runtime can run it here
    if existing_conversion(target) is None:
        return RuntimeComparison(
            note=f"MLX could run {target.name} once converted: `python -m engine.models.mlx_conversions "
            f"{target}` converts it, and this report then measures which runtime is faster here."
        )
    if isinstance(drafter, Path) and existing_conversion(drafter) is None:
        return RuntimeComparison(
            note=f"To compare llama.cpp with MLX on this pair, convert the drafter too: "
            f"`python -m engine.models.mlx_conversions {drafter}`."
        )
    speeds = []
    for runtime in (LLAMA, MLX):
        say(f"timing the pair on {runtime_name(runtime)}")
        try:
            speeds.append(_time_reply(target, drafter, options, runtime, prompt, depth, max_tokens))
        except DraftlightError as exc:
            return RuntimeComparison(note=f"The pair could not be timed on {runtime_name(runtime)}: {exc}")
    return RuntimeComparison(tuple(speeds))


def _time_reply(
    target: Path, drafter: Path | str, options: RuntimeOptions, runtime: str, prompt: str, depth: int, max_tokens: int
) -> RuntimeSpeed:
    from engine.session import Engine

    spec = None if str(drafter) == kinds.NONE.name else drafter
    engine = Engine.load(target, spec, options, runtime=runtime)
    try:
        config = GenerationConfig(max_tokens=max_tokens, depth=depth if engine.can_speculate else 0, ignore_eog=True)
        ids = engine.prompt_ids([Message("user", prompt)])
        stats: RunStats | None = None
        for _ in range(2):  # the first reply warms the runtime up (kernels, caches); the second is timed
            engine.forget()
            stats = next(e for e in engine.stream(ids, config) if isinstance(e, RunStats))
        assert stats is not None
        return RuntimeSpeed(runtime, stats.decode_tps, stats.generated_tokens)
    finally:
        engine.close()
