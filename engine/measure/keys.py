"""What a box profile is keyed by: the machine, both model files, the runtime, the mode and the
threads; and where a profile with that key is kept. Read by the measurement (engine.measure.timing)
and by the saved profiles (engine.measure.profile) alike."""

from __future__ import annotations

import hashlib
import os
import platform
from pathlib import Path

from engine.errors import DraftlightError
from engine.measure.costmodel import PROFILE_VERSION
from engine.models.catalog import cache_dir
from engine.runtime.protocol import RunOptions, TextModel


def machine_id() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.node()} | {platform.system()} {platform.machine()} | {cpu} | {os.cpu_count()} cores"


def file_id(path: Path) -> str:
    """A model's name, size and time; an MLX folder's from its weights, which a folder's own stat misses."""
    if path.is_dir():
        weights = [p.stat() for p in sorted(path.glob("*.safetensors"))]
        return f"{path.name}:{sum(w.st_size for w in weights)}:{max((w.st_mtime_ns for w in weights), default=0)}"
    st = path.stat()
    return f"{path.name}:{st.st_size}:{st.st_mtime_ns}"


def model_file(model: TextModel) -> Path:
    """The file or folder a loaded model came from, which its box profiles are keyed and named by."""
    if model.path is None:
        raise DraftlightError(f"{model.name} was built in memory: it has no file to key a box profile by.")
    return model.path


def profile_key(target: Path, drafter: Path, options: RunOptions) -> str:
    parts = [
        machine_id(),
        file_id(Path(target)),
        file_id(Path(drafter)),
        options.runtime_version(),
        options.mode,
        str(options.threads),
        str(PROFILE_VERSION),
    ]
    acceleration = options.acceleration()
    if acceleration.overlap_drafter:  # a draft model's steps priced as they run beside the verify
        parts.append("drafter overlaps the verify")
    if acceleration.guess_outcome:
        parts.append("drafter guesses the outcome")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def profile_path(key: str) -> Path:
    return cache_dir() / "profiles" / f"{key}.json"
