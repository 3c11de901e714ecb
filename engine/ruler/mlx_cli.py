"""`draftlight bench --runtime mlx`: the pair as MLX folders, converted from GGUF where that is what was named.

`--drafter ngram` measures prompt lookup alone (depth 0 and the n-gram arm at `--ngram-depth`, against
mlx-lm's plain loop); every other drafter gets the n-gram arm beside its own. `--drafter mtp` measures the target's own MTP head (an MLX folder with `mtp.*` weights) against
mlx-vlm's own MTP rounds; a drafter folder that reads the target (DFlash, DSpark, EAGLE-3, Gemma 4's
assistant: its kind read from its config, engine.models.discover.drafter_kind) against mlx-vlm's
rounds for that kind; any other folder, or a GGUF file, is a draft model, against mlx-lm's loops."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.drafting import kinds
from engine.errors import DraftlightError
from engine.models import catalog
from engine.models.discover import drafter_kind
from engine.progress import terminal_progress
from engine.ruler.prompts import built_in, load_file
from engine.runtime.llama import RUNTIME as LLAMA_RUNTIME


def _pair_member(spec: str, default: catalog.CatalogModel, progress) -> tuple[Path, Path | None]:
    """An MLX folder and the GGUF it was converted from (None where a folder was named)."""
    from engine.models.mlx_conversions import mlx_folder_for

    path = catalog.resolve(default if spec == "default" else spec, progress)
    if LLAMA_RUNTIME.owns(path):
        return mlx_folder_for(path, log=lambda line: print(f"convert: {line}", file=sys.stderr)), path
    return path, None


def cmd_bench_mlx(args: argparse.Namespace) -> int:
    from engine.ruler import mlx_report
    from engine.ruler.mlx_arms import MlxBenchConfig

    drafters = args.drafter or ["default"]
    if len(drafters) != 1:
        raise DraftlightError("The MLX ruler measures one draft model: give --drafter once.")
    progress = terminal_progress()
    target, target_gguf = _pair_member(args.target, catalog.DEFAULT_TARGET, progress)
    if drafters[0] in (kinds.MTP.name, kinds.NGRAM.name):  # the target's own heads; prompt lookup, at --ngram-depth
        kind, drafter, drafter_gguf = kinds.KINDS[drafters[0]], None, None
    elif drafters[0] in kinds.KEYWORDS:
        raise DraftlightError(
            f"The MLX ruler measures a draft model, the target's MTP head, prompt lookup (ngram) or a drafter "
            f"folder, not {drafters[0]}."
        )
    else:
        drafter, drafter_gguf = _pair_member(drafters[0], catalog.DEFAULT_DRAFTER, progress)
        kind = kinds.KINDS[drafter_kind(target, drafter)]  # from the folder's headers: DFlash, EAGLE-3, ...
        if kind is kinds.MTP:
            raise DraftlightError(
                f"{drafter.name} holds MTP heads alone, and the MLX runtime reads them from the target's own "
                "folder only: give --drafter mtp with a target that carries them."
            )
    both = target_gguf is not None and drafter_gguf is not None and not args.no_oracle
    config = MlxBenchConfig(
        target=target,
        drafter=drafter,
        kind=kind.name,
        prompts=load_file(args.prompts) if args.prompts else built_in(args.only.split(",") if args.only else None),
        depths=args.depths,
        ngram_depth=args.ngram_depth,
        target_gguf=target_gguf if both else None,
        drafter_gguf=drafter_gguf if both else None,
        n_tokens=args.tokens,
        repeats=args.repeats,
        threads=args.threads,
        n_ctx=args.ctx,
        thinking=args.thinking == "on",
        cool_pause_s=args.cool_pause,
    )
    found = mlx_report.run_and_print(config, Path(args.out))
    return 1 if found and args.strict else 0
