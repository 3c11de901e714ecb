"""`draftlight tune`: measure (or show the saved) box profile of a pair on its runtime.

A profile is keyed by the runtime the pair runs on (engine.measure.profile), so `--runtime mlx`
measures and saves a profile of its own beside llama.cpp's for the same files.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from engine.drafting import kinds
from engine.errors import DraftlightError
from engine.measure.costmodel import BoxProfile, best_depth, explain
from engine.measure.keys import model_file
from engine.measure.soundness import DISAGREEMENT
from engine.models import catalog
from engine.models.discover import drafter_kind
from engine.pairloading import load_target
from engine.progress import say_on_stderr, terminal_progress
from engine.runtime import RuntimeOptions
from engine.runtime.formats import runtime_name
from engine.runtime.loading import chosen_runtime
from engine.runtime.mlx import RUNTIME as MLX_RUNTIME
from engine.runtime.protocol import TextModel
from engine.runtime.runtimes import Runtime


def cmd_tune(args: argparse.Namespace) -> int:
    from engine.measure.profile import load_profile, measure, measured_soundly

    options = RuntimeOptions(n_ctx=args.ctx, n_threads=args.threads, exact=not args.fast)
    progress = terminal_progress()
    target_path = catalog.resolve(catalog.DEFAULT_TARGET if args.target == "default" else args.target, progress)
    runtime = chosen_runtime(target_path, args.runtime)
    # The default draft model is a GGUF file: an MLX folder's target is tuned alone (nothing converted).
    mlx_folder_alone = args.drafter == "default" and MLX_RUNTIME.owns(target_path)
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
        if runtime.converts:
            models = [load_target(p, runtime, options, progress) for p in (target_path, drafter_path)]
        if models:
            saved = load_profile(model_file(models[0]), model_file(models[1]), models[0].options)
        else:
            saved = load_profile(target_path, drafter_path, options)
        if args.show and saved is None:
            raise DraftlightError("No sound box profile is saved for this pair here: `draftlight tune` measures one.")
        if saved is not None and not (args.force or args.check):
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(saved.measured_at))
            profile, note = saved, f"(saved {when}; --check measures again and compares, --force replaces it)"
        else:
            t0 = time.perf_counter()
            models = models or [load_target(p, runtime, options, progress) for p in (target_path, drafter_path)]
            target, drafter = models
            said = say_on_stderr("tune")
            profile = measured_soundly(lambda: measure(target, drafter, target.options, progress=said), said)
            note = f"(measured in {time.perf_counter() - t0:.1f} s)"
    finally:
        for model in models:
            model.close()
    _print_header(profile, runtime, note)
    if args.check and saved is not None:
        print(compare(saved, profile))
    print(profile.table())
    depth, rates = best_depth(profile, profile.acceptance_prior)
    print(
        "predicted tokens/s by depth at the calibration acceptance: "
        + "  ".join(f"d{k} {r:.1f}" for k, r in enumerate(rates))
    )
    print(explain(profile, depth, profile.acceptance_prior))
    return 0


def _tune_target_only(target_path: Path, runtime: Runtime, options: RuntimeOptions) -> int:
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


def _print_header(profile: BoxProfile, runtime: Runtime, note: str = "") -> None:
    pair = f"{profile.target} + {profile.drafter}" if profile.drafter != "(none)" else profile.target
    print(
        f"Box profile for {pair}, {profile.mode} mode, {profile.threads} threads, "
        f"on {runtime_name(runtime)} {note}".rstrip()
    )
    print(f"runtime: {profile.runtime}")
    print(f"machine: {profile.machine}")
    load = "not read" if profile.other_cpu is None else f"{profile.other_cpu:.0%}"
    print(
        f"basis: {profile.basis()}; figures' widest spread ±{profile.spread / 2:.0%}; "
        f"other processes' CPU {load}, thermal {profile.thermal}"
    )


def compare(saved: BoxProfile, fresh: BoxProfile) -> str:
    """`tune --check`: the saved profile's figures against a fresh measurement's, and the verdict on it."""
    pairs = [
        (f"target pass of {i} rows", a, b) for i, (a, b) in enumerate(zip(saved.target_rows_s, fresh.target_rows_s), 1)
    ]
    if saved.drafter_step_s and fresh.drafter_step_s:
        pairs.append(("drafter step", saved.drafter_step_s, fresh.drafter_step_s))
    lines = ["figure                   saved      now   saved/now"]
    worst = 1.0
    for name, a, b in pairs:
        ratio = a / b if b else float("inf")
        worst = max(worst, ratio, 1 / ratio if ratio else float("inf"))
        lines.append(f"{name:22} {a * 1e3:7.1f} ms {b * 1e3:7.1f} ms  {ratio:5.2f}")
    allowed = DISAGREEMENT * (1 + max(saved.spread, fresh.spread))
    if worst > allowed:
        lines.append(f"The saved profile was off by up to {worst:.1f}x: replaced by this measurement.")
    else:
        lines.append(
            f"The saved profile holds: every figure within {worst:.2f}x of now (allowed {allowed:.1f}x); now saved."
        )
    return "\n".join(lines)
