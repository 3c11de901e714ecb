"""Box profiles: what a round's parts cost on this machine, measured once and kept.

A profile is keyed by the machine, both model files, the runtime (its name and version, from the
options a model runs on: llama.cpp's or MLX's), the mode and the threads, so a profile measured on
one runtime never prices another's rounds; `draftlight tune` or the first Auto reply measures one.
Here a profile is saved, found again, judged (engine.measure.soundness) and marked stale; its key
is made in engine.measure.keys, and it is measured in engine.measure.timing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

from engine.drafting import Drafter, ModelDrafter
from engine.errors import DraftlightError
from engine.measure.costmodel import PROFILE_VERSION, BoxProfile
from engine.measure.keys import machine_id, model_file, profile_key, profile_path
from engine.measure.soundness import (
    ATTEMPTS,
    ProfileRefused,
    impossible,
    note_refusal,
    problem_of,
    recent_refusal,
    refusal,
)
from engine.measure.timing import Steps, measure, measuring_rows, run_steps
from engine.models.catalog import cache_dir
from engine.runtime.protocol import RunOptions, TextModel


def load_profile(target: Path, drafter: Path, options: RunOptions) -> BoxProfile | None:
    return _read_profile(profile_path(profile_key(target, drafter, options)))


def _read_profile(path: Path) -> BoxProfile | None:
    """A saved profile of this release that is not stale and passes its checks; None otherwise."""
    try:
        data = json.loads(path.read_text())
        profile = BoxProfile(**data) if data.get("version") == PROFILE_VERSION and not data.get("stale") else None
    except (OSError, ValueError, TypeError):
        return None
    # Spread and load were judged when it was saved; physics is judged again, on what the file says now.
    if profile is None or impossible(
        profile.target_rows_s, profile.drafter_step_s, profile.spread, profile.plain_round_s
    ):
        return None
    return profile


def mark_stale(profile: BoxProfile) -> None:
    """A saved profile a reply contradicted: kept for the record, never used again; the next Auto reply re-measures."""
    path = profile_path(profile.key)
    try:
        data = json.loads(path.read_text())
        data["stale"] = True
        path.write_text(json.dumps(data, indent=1))
    except (OSError, ValueError):
        pass


def save_profile(profile: BoxProfile) -> Path:
    path = profile_path(profile.key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(profile), indent=1))
    os.replace(tmp, path)
    return path


def profile_for(target: TextModel, drafter: TextModel, options: RunOptions, progress=None) -> BoxProfile:
    """The saved profile, or a fresh measurement (saved) if the box, models or runtime changed."""
    found = load_profile(model_file(target), model_file(drafter), options)
    if found is not None:
        return found
    key = profile_key(model_file(target), model_file(drafter), options)
    return measured_soundly(lambda: measure(target, drafter, options, progress=progress), progress, key)


def measured_soundly(measure_once, progress=None, key: str = "") -> BoxProfile:
    """A profile measured and saved if its figures pass their checks (engine.measure.soundness);
    measured again if not, up to ATTEMPTS in all; not saved, and a sentence raised, if the last fails too. A refusal
    is remembered: until it is RETRY_AFTER_S old, the profile at `key` is refused unmeasured."""
    return run_steps(measuring_soundly(lambda: _at_once(measure_once), progress, key))


def _at_once(measure_once: Callable[[], BoxProfile]) -> Steps:
    yield from ()
    return measure_once()


def measuring_soundly(steps_once: Callable[[], Steps], progress=None, key: str = "") -> Steps:
    """`measured_soundly` as steps: those of each attempt in turn."""
    refused = recent_refusal(profile_path(key)) if key else ""
    if refused:
        raise ProfileRefused(refused)
    problem = ""
    for attempt in range(1, ATTEMPTS + 1):
        again = f"measuring again (attempt {attempt} of {ATTEMPTS}; {problem}): " if attempt > 1 else ""
        profile = yield from _said_as(steps_once(), again)
        problem = problem_of(profile)
        if not problem:
            save_profile(profile)
            return profile
        if attempt < ATTEMPTS and progress is not None:
            progress(f"measuring again (attempt {attempt + 1} of {ATTEMPTS}): {problem}")
    sentence = refusal(problem)
    note_refusal(profile_path(profile.key), sentence)
    raise ProfileRefused(sentence)


def _said_as(steps: Steps, prefix: str) -> Steps:
    """The same steps, each label after `prefix` (a second attempt says why it started over)."""
    if not prefix:
        return (yield from steps)
    try:
        while True:
            try:
                step = next(steps)
            except StopIteration as end:
                return end.value
            yield replace(step, label=prefix + step.label)
    finally:
        steps.close()


def profile_for_target_only(target: TextModel, options: RunOptions, progress=None) -> BoxProfile:
    """Row costs for drafters with no model: a saved profile's rows if one exists, else measured (and saved)."""
    found = saved_rows(model_file(target), options)
    if found is not None:
        return found
    if progress is None:
        raise DraftlightError("No box profile for this target yet: run `draftlight tune` or pick Auto once.")
    key = profile_key(model_file(target), model_file(target), options)
    return measured_soundly(lambda: _measure_rows(target, options, progress), progress, key)


def saved_rows(target: Path, options: RunOptions) -> BoxProfile | None:
    """A saved profile with rows of the target at `target` on this box and runtime, whatever its drafter."""
    profiles = sorted((cache_dir() / "profiles").glob("*.json")) if (cache_dir() / "profiles").is_dir() else []
    for path in profiles:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if (
            data.get("target") == Path(target).name
            and data.get("machine") == machine_id()
            and data.get("mode") == options.mode
            and data.get("runtime") == options.runtime_version()
            and data.get("version") == PROFILE_VERSION
        ):
            found = _read_profile(path)
            if found is not None:
                return found
    return None


def _measure_rows(target: TextModel, options: RunOptions, progress) -> BoxProfile:
    return run_steps(measuring_rows(target, options, progress))


def saved_target_profile(target: TextModel, options: RunOptions) -> BoxProfile | None:
    """A saved profile with this target's rows on this box, whatever its drafter; None, not a measurement, without one."""
    try:
        return profile_for_target_only(target, options)
    except DraftlightError:
        return None


def saved_pair_profile(target: TextModel, drafter: Drafter | None, options: RunOptions) -> BoxProfile | None:
    """What this pair's rounds cost here, if a profile is saved: a draft model's own profile; for a
    drafter with no model (n-gram), the target's rows with drafting free; None with no drafter."""
    if drafter is None:
        return None
    if isinstance(drafter, ModelDrafter):
        return load_profile(model_file(target), model_file(drafter.model), options)
    rows = saved_target_profile(target, options)
    return drafting_free(rows, drafter.name) if rows else None


def drafting_free(rows: BoxProfile, drafter: str) -> BoxProfile:
    """A profile's target rows for a drafter with no model of its own (n-grams, an MTP head, DFlash,
    EAGLE-3): drafting priced free until its rounds say otherwise, and no guesses, which only a draft
    model makes."""
    return replace(rows, drafter=drafter, drafter_step_s=0.0, drafter_catch_up_s=0.0, drafter_guesses=False)
