"""`draftlight tune`: measure (or show the saved) box profile of a pair on its runtime.

A profile is keyed by the runtime the pair runs on (engine.measure.profile), so `--runtime mlx`
measures and saves a profile of its own beside llama.cpp's for the same files.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from engine.drafting import kinds
from engine.measure.costmodel import BoxProfile, best_depth, explain
from engine.models import catalog
from engine.models.discover import drafter_kind
from engine.pairloading import load_target
from engine.progress import say_on_stderr, terminal_progress
from engine.runtime import RuntimeOptions
from engine.runtime.formats import model_format, runtime_name
from engine.runtime.loading import chosen_runtime
from engine.runtime.protocol import TextModel


def cmd_tune(args: argparse.Namespace) -> int:
    from engine.measure.profile import load_profile, measure, save_profile

    options = RuntimeOptions(n_ctx=args.ctx, n_threads=args.threads, exact=not args.fast)
    progress = terminal_progress()
    target_path = catalog.resolve(catalog.DEFAULT_TARGET if args.target == "default" else args.target, progress)
    runtime = chosen_runtime(target_path, args.runtime)
    # The default draft model is a GGUF file: an MLX folder's target is tuned alone (nothing converted).
    mlx_folder_alone = args.drafter == "default" and model_format(target_path) == "mlx"
    if (
        mlx_folder_alone
        or args.drafter in (kinds.MTP.name, kinds.NGRAM.name)
        or (
            args.drafter != "default"
            and drafter_kind(target_path, catalog.resolve(args.drafter, progress)) != kinds.MODEL.name
        )
    ):
        return _tune_target_only(target_path, runtime, options)
    drafter_path = catalog.resolve(catalog.DEFAULT_DRAFTER if args.drafter == "default" else args.drafter, progress)
    models: list[TextModel] = []
    try:
        # On MLX the profile is keyed by the folders the models load from (a GGUF file's conversion)
        # and MLX's options: load first, then look for a saved profile.
        if runtime != "llama":
            models = [load_target(p, runtime, options, progress) for p in (target_path, drafter_path)]
        keyed = (models[0].path, models[1].path, models[0].options) if models else (target_path, drafter_path, options)
        existing = None if args.force else load_profile(*keyed)
        if existing is not None:
            saved = time.strftime("%Y-%m-%d %H:%M", time.localtime(existing.measured_at))
            profile, note = existing, f"(saved {saved}; --force measures again)"
        else:
            t0 = time.perf_counter()
            models = models or [load_target(p, runtime, options, progress) for p in (target_path, drafter_path)]
            target, drafter = models
            profile = measure(target, drafter, target.options, progress=say_on_stderr("tune"))
            save_profile(profile)
            note = f"(measured in {time.perf_counter() - t0:.1f} s)"
    finally:
        for model in models:
            model.close()
    _print_header(profile, runtime, note)
    print(profile.table())
    depth, rates = best_depth(profile, profile.acceptance_prior)
    print(
        "predicted tokens/s by depth at the calibration acceptance: "
        + "  ".join(f"d{k} {r:.1f}" for k, r in enumerate(rates))
    )
    print(explain(profile, depth, profile.acceptance_prior))
    return 0


def _tune_target_only(target_path: Path, runtime: str, options: RuntimeOptions) -> int:
    """A drafter with no model of its own: the target's rows and rollback here; its own cost shows in situ."""
    from engine.measure.profile import profile_for_target_only

    target = load_target(target_path, runtime, options, terminal_progress())
    try:
        profile = profile_for_target_only(target, target.options, say_on_stderr("tune"))
    finally:
        target.close()
    _print_header(profile, runtime)
    print(profile.table())
    print(
        "This drafter has no model of its own to time: Auto starts it free and prices its draft steps, "
        "what feeding it costs inside the verify pass, and the round's rest from the conversation's own rounds."
    )
    return 0


def _print_header(profile: BoxProfile, runtime: str, note: str = "") -> None:
    pair = f"{profile.target} + {profile.drafter}" if profile.drafter != "(none)" else profile.target
    print(
        f"Box profile for {pair}, {profile.mode} mode, {profile.threads} threads, "
        f"on {runtime_name(runtime)} {note}".rstrip()
    )
    print(f"runtime: {profile.runtime}")
    print(f"machine: {profile.machine}")
